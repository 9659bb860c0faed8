/**
 * The header chip names the engine: a remote engine's model info carries executionProvider 'cpu'
 * as a placeholder, and the chip said "CPU" for it (issue 19); it says "Remote" with the URL.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { engineChip } from '../../renderer/lib/engine-chip.ts';

test('a remote engine is "Remote", not the placeholder CPU; a local model shows its execution provider', () => {
  const remote = { executionProvider: 'cpu' as const, remote: { baseUrl: 'http://127.0.0.1:9000/v1', model: 'm', counting: 'server' as const, apiKey: 'none' as const } };
  assert.deepEqual(engineChip(remote), { label: 'Remote', title: 'Answered by a remote engine at http://127.0.0.1:9000/v1' });
  assert.equal(engineChip({ executionProvider: 'cuda' })?.label, 'CUDA');
  assert.equal(engineChip({ executionProvider: 'cpu' })?.label, 'CPU');
  assert.equal(engineChip(null), null);
});
