/**
 * Per-model defaults through the services as the window calls them (router, real SQLite, the
 * real engine with stories260K as a llama2.c checkpoint and as GGUF): what is set while a model is
 * loaded — max context, sampler, system prompt — and its weights choice come back when that model
 * is opened again, after another model ran with other values, and after a restart; the load
 * itself uses the remembered max context.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { MethodName, RequestOf, ResponseOf } from '../../main/contract/channels.ts';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import { STORIES_BIN, STORIES_GGUF } from '../helpers/paths.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-model-defaults-'));
const dataDir = path.join(root, 'data');
const cacheDir = path.join(root, 'cache');
let s: Backend;

const call = <M extends MethodName>(method: M, payload: RequestOf<M>) => s.router.call(method, payload) as Promise<ResponseOf<M>>;

before(async () => {
  s = await startBackend({ dataDir, cacheDir, defaultModel: STORIES_BIN, executionProvider: 'cpu' });
  await s.modelLoaded;
});
after(async () => {
  await s?.dispose();
  rmSync(root, { recursive: true, force: true });
});

test('a model opened again gets back its max context, sampler, system prompt and weights choice', async () => {
  await call('openModel', { path: STORIES_BIN, quantize: 'q8' });
  await call('updateSettings', { maxContext: 256, maxTokens: 40, temperature: 0.3, topK: 5, systemPrompt: 'Tell tales of the sea.' });
  await s.models.ready();

  // Another model, with other values set while it runs.
  const gguf = await call('openModel', { path: STORIES_GGUF });
  assert.equal(gguf.status, 'ready', String(gguf.error));
  await call('updateSettings', { maxContext: 512, maxTokens: 100, temperature: 1.1, systemPrompt: '' });
  await s.models.ready();

  const back = await call('openModel', { path: STORIES_BIN });
  assert.equal(back.info?.maxContext, 256, 'loaded with its remembered max context');
  assert.match(back.info?.weights.formats ?? '', /q8 \(rtn\)/, 'and its weights choice');
  const st = await call('getSettings', {});
  assert.deepEqual([st.maxContext, st.maxTokens, st.temperature, st.topK, st.systemPrompt], [256, 40, 0.3, 5, 'Tell tales of the sea.']);

  // And after a restart, opening the GGUF again brings its own back.
  await s.dispose();
  s = await startBackend({ dataDir, cacheDir, defaultModel: STORIES_BIN, executionProvider: 'cpu' });
  await s.modelLoaded;
  const again = await call('openModel', { path: STORIES_GGUF });
  assert.equal(again.info?.maxContext, 512);
  const st2 = await call('getSettings', {});
  assert.deepEqual([st2.maxTokens, st2.temperature, st2.systemPrompt, st2.topK], [100, 1.1, '', 5], "the GGUF's own values; top-k it never set stays as it was");
});
