/**
 * Sliding-window attention (Mistral-style `sliding_window` 32, shorter than the 256-token
 * context) through the real ONNX Runtime graph on both decoder backends, against the independent
 * float64 reference forward with its window mask (test/helpers/reference-forward.ts):
 *   - 20 prompt tokens in two prefill chunks, then 140 greedy tokens (128 past the window): the
 *     logits equal the windowed reference's to float32 rounding at every step and its greedy tokens
 *     are the graph's, while the reference without the window is far off (the window matters here);
 *   - the same from a GGUF file's `llama.attention.sliding_window` (a synthetic llama GGUF);
 *   - a prefill chunk that itself spans more than the window (the window inside one GQA call);
 *   - a context shift past the window (the backend's own shift of the KV cache: rows dropped,
 *     keys re-rotated) against the reference's shift (test/helpers/reference-forward.ts `shift`):
 *     the window then counts the cache's new slots, as llama.cpp's shifted positions. (A fresh
 *     prefill of the shifted tokens is not an exact oracle: the kept rows' deeper keys and values
 *     saw the dropped tokens; measured here: 13 of 47 greedy tokens agree, the 14th at a 6.7e-5 gap.)
 *   - prefix reuse in the engine past the window: a follow-up prompt reuses the cached rows and
 *     answers exactly as a fresh engine does.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { maxAbsDiff, OnnxRunner } from '../helpers/onnx-runner.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import { randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { advanceInLockstep, decodeInLockstep } from '../helpers/lockstep.ts';

const WINDOW = 32;
const MAX = 256;
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-swa-'));
const dir = path.join(root, 'mistral');
let model: Awaited<ReturnType<typeof importHuggingFace>>;
before(async () => {
  await writeSyntheticCheckpoint(dir, { family: 'mistral', seed: 11, layers: 2, configOverrides: { sliding_window: WINDOW } });
  model = await importHuggingFace(dir);
});
after(() => rmSync(root, { recursive: true, force: true }));

const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13) % 151_000);

/** `greedyAgainstReference` at this file's context (the windowed reference is the oracle). */
const greedy = (config: ModelConfig, weights: ModelWeights, ids: number[], steps: number, backend: 'js' | 'native') =>
  greedyAgainstReference({ config, weights, ids, steps, maxContext: MAX, backend });

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: 140 greedy tokens past a ${WINDOW}-token window equal the windowed reference`, async (t) => {
    const config = model.manifest.config;
    assert.deepEqual(config.slidingWindow, [WINDOW, WINDOW]);
    const steps = WINDOW - prompt.length + 140;
    const { worst, fullOff, tokensDiffer } = await greedy(config, model.weights as ModelWeights, prompt, steps, backend);
    t.diagnostic(`${backend}: ${steps} steps, worst |onnx − windowed ref| / scale ${worst.toExponential(2)}; past the window the unwindowed reference is up to ${fullOff.toExponential(2)} off and picks another token ${tokensDiffer} times`);
    assert.ok(fullOff > 1000 * Math.max(worst, 1e-9), 'the window changes the logits far beyond rounding');
  });
}

test('GGUF llama.attention.sliding_window: 100 greedy tokens past the window equal the windowed reference', async (t) => {
  const config: ModelConfig = {
    architecture: 'llama', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 512,
    rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: false, qkNorm: false, rope: { theta: 10000, rotaryDim: 16, layout: 'interleaved' }, trainedContext: MAX,
  };
  const file = path.join(root, 'windowed.gguf');
  writeModelGguf(file, config, { ...(await storiesTokenizerMetadata()), 'llama.attention.sliding_window': { u32: WINDOW } }, randomWeights(3, 0.1));
  const imported = await importGguf(file);
  assert.deepEqual(imported.manifest.config.slidingWindow, [WINDOW, WINDOW]);
  const ids = Array.from({ length: 20 }, (_, i) => (i * 37 + 5) % 512);
  const { worst, fullOff, tokensDiffer } = await greedy(imported.manifest.config, imported.weights as ModelWeights, ids, WINDOW - ids.length + 100, 'js');
  t.diagnostic(`GGUF: worst |onnx − windowed ref| / scale ${worst.toExponential(2)}; unwindowed up to ${fullOff.toExponential(2)} off, another token ${tokensDiffer} times`);
  assert.ok(fullOff > 1000 * Math.max(worst, 1e-9), 'the window changes the logits far beyond rounding');
});

test('one prefill chunk longer than the window: logits equal the windowed reference', async () => {
  const config = model.manifest.config;
  const runner = await OnnxRunner.create(config, model.weights, MAX);
  const ref = new ReferenceModel(config, model.weights, MAX);
  try {
    const long = Array.from({ length: 90 }, (_, i) => (i * 104729 + 7) % 151_000);
    await runner.forward(long.slice(0, 10));
    ref.forward(long.slice(0, 10));
    const { diff, scale } = maxAbsDiff(await runner.forward(long.slice(10)), ref.forward(long.slice(10)));
    assert.ok(diff <= 1e-5 * Math.max(1, scale), `max |onnx − windowed ref| = ${diff}, scale ${scale}`);
  } finally {
    await runner.dispose();
  }
});

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: a context shift past the window (the backend's shift) equals the reference's shift, 60 tokens on`, async (t) => {
    const config = model.manifest.config;
    const runner = await OnnxRunner.create(config, model.weights, MAX, backend);
    const ref = new ReferenceModel(config, model.weights, MAX);
    try {
      await runner.forward(prompt);
      let expected = ref.forward(prompt);
      // Decode to 90 positions, then drop 40 after the first (as the engine keeps BOS).
      expected = await advanceInLockstep(runner, ref, expected, 90);
      const keep = 1;
      const drop = 40;
      const { cos, sin } = runner.rope.shiftRotation(drop);
      runner.session.shift(runner.kv, keep, drop, { cos, sin, rotaryDim: config.rope.rotaryDim, interleaved: config.rope.layout === 'interleaved' });
      ref.shift(keep, drop);
      assert.equal(runner.kv.length, 50);
      const worst = await decodeInLockstep(runner, ref, expected, 60, 'after the shift');
      t.diagnostic(`${backend}: after dropping ${drop} of 90, 60 steps, worst |onnx − ref| / scale ${worst.toExponential(2)}`);
    } finally {
      await runner.dispose();
    }
  });
}

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

test('prefix reuse past the window: a follow-up prompt reuses the cached rows and answers as a fresh engine does', async (t) => {
  const cacheDir = path.join(root, 'cache');
  const ask = async (engine: Engine, prompt: string) => {
    let last: GenerationEvent | undefined;
    for await (const ev of engine.generate({ prompt, maxTokens: 40, sampler: GREEDY, ignoreEos: true })) last = ev;
    assert.ok(last?.type === 'done', JSON.stringify(last));
    return last;
  };
  const first = 'Once upon a time, in a small town by the sea, there lived an old fisherman who had a boat and a dog. '.repeat(3);
  const engine = await Engine.load(dir, { cacheDir, maxContext: MAX });
  const fresh = await Engine.load(dir, { cacheDir, maxContext: MAX });
  try {
    const a = await ask(engine, first);
    const followUp = `${first}${a.text} Then one morning the dog barked at the water.`;
    const b = await ask(engine, followUp);
    const want = await ask(fresh, followUp);
    t.diagnostic(`reused ${b.stats.reusedTokens} of ${b.promptTokens.length} prompt tokens (window ${WINDOW})`);
    assert.ok(b.stats.reusedTokens > 2 * WINDOW, `reused ${b.stats.reusedTokens}`);
    assert.deepEqual(b.tokens, want.tokens);
  } finally {
    await engine.dispose();
    await fresh.dispose();
  }
});
