/**
 * The engine end to end on a synthetic Qwen3 checkpoint (random weights, real Qwen3 tokenizer and
 * chat template): import into the cache once, chat-template the messages, stream, stop on EOS;
 * the CUDA execution provider request falls back to CPU with a reason where CUDA is absent.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import { FINGERPRINTS_DIR } from '../../main/engine/model/bundle.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-engine-hf-'));
const modelDir = path.join(root, 'qwen3-tiny');
const cacheDir = path.join(root, 'cache');
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

before(async () => {
  await writeSyntheticCheckpoint(modelDir, { family: 'qwen3', seed: 3, dtype: 'BF16' });
});
after(() => rmSync(root, { recursive: true, force: true }));
/** The cache's entries but its fingerprint records. */
const bundleFolders = () => readdirSync(cacheDir).filter((e) => e !== FINGERPRINTS_DIR);

test('a Hugging Face Qwen3 folder imports once, renders the chat template and streams tokens', async () => {
  const engine = await Engine.load(modelDir, { cacheDir, maxContext: 256 });
  try {
    assert.equal(engine.info.architecture, 'qwen3');
    assert.equal(engine.info.hasChatTemplate, true);
    const events: GenerationEvent[] = [];
    for await (const ev of engine.generate({ messages: [{ role: 'user', content: 'Hello' }], maxTokens: 8, sampler: GREEDY, ignoreEos: true })) {
      events.push(ev);
    }
    const done = events.at(-1);
    assert.ok(done?.type === 'done');
    // ChatML, written by hand: <|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n
    assert.deepEqual(done.promptTokens.slice(0, 3), [151644, 872, 198]);
    assert.deepEqual(done.promptTokens.slice(-3), [151644, 77091, 198]);
    assert.equal(done.tokens.length, 8);
    assert.equal(done.reason, 'length');
    const streamed = events.filter((e) => e.type === 'token').map((e) => (e as { text: string }).text).join('');
    assert.equal(streamed, done.text);
    assert.ok(events.some((e) => e.type === 'prefill'));
  } finally {
    await engine.dispose();
  }
  // The second load is served from the import cache: one bundle, written once.
  const bundles = bundleFolders();
  assert.equal(bundles.length, 1);
  const manifest = path.join(cacheDir, bundles[0], 'manifest.json');
  const mtime = statSync(manifest).mtimeMs;
  const again = await Engine.load(modelDir, { cacheDir, maxContext: 256 });
  await again.dispose();
  assert.equal(statSync(manifest).mtimeMs, mtime);
  assert.deepEqual(bundleFolders(), bundles);
});

test('asking for the CUDA execution provider where it cannot load falls back to CPU and says why', async () => {
  const engine = await Engine.load(modelDir, { cacheDir, executionProvider: 'cuda' });
  try {
    if (engine.info.executionProvider === 'cuda') {
      // A machine with working CUDA libraries: nothing to fall back from.
      assert.equal(engine.info.fallbackReason, null);
    } else {
      assert.equal(engine.info.executionProvider, 'cpu');
      assert.match(engine.info.fallbackReason ?? '', /CUDA execution provider could not be loaded/);
    }
  } finally {
    await engine.dispose();
  }
});
