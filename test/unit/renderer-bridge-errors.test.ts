/**
 * Error codes survive the Electron bridge: the preload rejects with a plain object (contextBridge
 * would keep only an Error's message), and the renderer's `withErrorCodes` turns it back into an
 * `ApiError` with the contract's code.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildApi } from '../../app/bridge.ts';
import { ApiError, withErrorCodes } from '../../renderer/lib/errors.ts';

test('a failed call through the preload bridge rejects in the page with an ApiError carrying the code', async () => {
  const bridge = buildApi(
    async () => ({ ok: false, error: { code: 'CONTEXT_FULL', message: 'This message does not fit.' } }),
    () => () => undefined,
  );
  // What the page receives: contextBridge structured-clones the rejection value.
  const cloned = { ...bridge, getSettings: (r: Record<string, never>) => bridge.getSettings(r).catch((e: unknown) => Promise.reject(structuredClone(e))) };
  const api = withErrorCodes(cloned);
  await assert.rejects(api.getSettings({}), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.code, 'CONTEXT_FULL');
    assert.equal(e.message, 'This message does not fit.');
    return true;
  });
  const ok = withErrorCodes(buildApi(async () => ({ ok: true, value: { maxContext: 512 } }), () => () => undefined));
  assert.deepEqual(await ok.getSettings({}), { maxContext: 512 });
});
