/** The CLI's import progress line: phases in words; while writing weights, %, GB and ETA. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatLoadProgress } from '../../main/cli/progress.ts';

test('progress lines name the phase and, while writing, the share, bytes and seconds left', () => {
  assert.equal(formatLoadProgress('hash', 0), 'importing the model: hashing the model files');
  assert.equal(
    formatLoadProgress('write', 0.4263, { bytes: 937_000_000, totalBytes: 2_198_000_000, etaSeconds: 6 }),
    'importing the model: writing weights 42% (0.9 of 2.2 GB, about 6 s left)',
  );
  assert.equal(formatLoadProgress('write', 0), 'importing the model: writing weights');
  assert.equal(formatLoadProgress('unpack', 0), 'importing the model: unpack', 'a phase without words is shown as it is');
});
