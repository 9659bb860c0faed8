/**
 * gpt-oss's dense pieces through the real ONNX Runtime graph (CPU EP), against the independent
 * float64 reference forward:
 *   - attention with biases on q, k, v and o: a Llama checkpoint with `attention_bias: true`
 *     (transformers gives o_proj the bias too) imports its o_proj.bias — before, the bias was read
 *     for q/k/v only and o's dropped without a word — and 60 greedy tokens equal the reference;
 *     a GGUF file's `attn_output.bias` the same;
 *   - a gpt-oss-shaped dense block: q/k/v/o biases, attention sinks, a 16-token sliding layer
 *     then a full one, and the clamped SwiGLU (α 1.702, limit 7) as the FFN's activation, with
 *     gate / up weights large enough that the clamps engage: 120 greedy tokens on both backends
 *     equal the reference; the reference without the clamps is far off; on WebGPU (Mesa's lavapipe
 *     here, native backend) every node is placed on WebGPU and 40 greedy tokens equal the reference.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { GPT_OSS_SWIGLU } from '../../main/engine/model/block-variants.ts';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { expectedWeights, importHuggingFace } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { argmax, maxAbsDiff, OnnxRunner } from '../helpers/onnx-runner.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import { randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const MAX = 256;
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-gpt-oss-dense-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** max |a − b| between two references' logits along `tokens` (prompt, then one at a time) and how often their argmax differs. */
function referenceGap(a: ReferenceModel, b: ReferenceModel, prompt: number[], tokens: number[]): { off: number; differ: number } {
  let off = 0;
  let differ = 0;
  for (const step of [prompt, ...tokens.map((x) => [x])]) {
    const x = a.forward(step);
    const y = b.forward(step);
    off = Math.max(off, maxAbsDiff(x, y).diff);
    if (argmax(x) !== argmax(y)) differ++;
  }
  return { off, differ };
}

test('a Llama checkpoint with attention_bias: its o_proj.bias is read, and 60 greedy tokens equal the reference', async (t) => {
  const dir = path.join(root, 'llama-bias');
  await writeSyntheticCheckpoint(dir, { family: 'llama', seed: 5, configOverrides: { attention_bias: true } });
  const m = await importHuggingFace(dir);
  const c = m.manifest.config;
  assert.equal(c.attentionBias, true);
  assert.equal(c.outputBias, true);
  assert.ok(m.weights.has('model.layers.1.self_attn.o_proj.bias'));
  const ids = Array.from({ length: 12 }, (_, i) => (i * 7919 + 13) % 151_000);
  const r = await greedyAgainstReference({ config: c, weights: m.weights, ids, steps: 60, maxContext: MAX });
  const gap = referenceGap(new ReferenceModel(c, m.weights as ModelWeights, MAX), new ReferenceModel({ ...c, outputBias: false }, m.weights as ModelWeights, MAX), ids, r.tokens);
  t.diagnostic(`worst |onnx − ref| / scale ${r.worst.toExponential(2)}; without o's bias the reference is ${gap.off.toExponential(2)} off`);
  assert.ok(gap.off > 100 * Math.max(r.worst, 1e-9), 'the o bias matters beyond rounding');
});

/** gpt-oss's dense attention and FFN on a small Llama-shaped model (interleaved RoPE as a GGUF llama file has it). */
const GPT_OSS_DENSE: ModelConfig = {
  architecture: 'llama', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 512,
  rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: true, outputBias: true, qkNorm: false, rope: { theta: 10000, rotaryDim: 16, layout: 'interleaved' },
  trainedContext: MAX, slidingWindow: [16, 0], attentionSinks: true, clampedSwiglu: GPT_OSS_SWIGLU,
};
const random = randomWeights(9, 0.1);
/** gate / up rows with std 0.5 (pre-activations of std ~4 on RMS-normed inputs: many beyond ±7), sinks of −1 … 2. */
const weightOf = (name: string, shape: number[]): Float32Array => {
  if (/self_attn\.sinks$/.test(name)) return Float32Array.from([-1, 0, 1, 2]);
  const w = random(name, shape);
  return /mlp\.(gate|up)_proj/.test(name) ? w.map((v) => v * 5) : w;
};
const denseWeights: ModelWeights = new Map([...expectedWeights(GPT_OSS_DENSE)].map(([n, shape]) => [n, { shape, data: weightOf(n, shape) }]));

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: a gpt-oss-shaped dense block (biases, sinks, sliding + full layer, clamped SwiGLU): 120 greedy tokens equal the reference`, async (t) => {
    const ids = Array.from({ length: 20 }, (_, i) => (i * 37 + 5) % 512);
    const r = await greedyAgainstReference({ config: GPT_OSS_DENSE, weights: denseWeights, ids, steps: 120, maxContext: MAX, backend });
    const unclamped = { ...GPT_OSS_DENSE, clampedSwiglu: { alpha: GPT_OSS_SWIGLU.alpha, limit: Infinity } };
    const gap = referenceGap(new ReferenceModel(GPT_OSS_DENSE, denseWeights, MAX), new ReferenceModel(unclamped, denseWeights, MAX), ids, r.tokens);
    t.diagnostic(`${backend}: worst |onnx − ref| / scale ${r.worst.toExponential(2)}; without the clamps the reference is ${gap.off.toExponential(2)} off, another token ${gap.differ} times of ${r.tokens.length + 1}`);
    assert.ok(gap.off > 1000 * Math.max(r.worst, 1e-9), 'the clamps engage and matter');
  });
}

test('WebGPU (lavapipe, native backend): the gpt-oss-shaped dense block runs with every node on WebGPU and gives the reference greedy tokens', async (t) => {
  const runner = await OnnxRunner.create(GPT_OSS_DENSE, denseWeights, MAX, 'native', 'webgpu');
  const ref = new ReferenceModel(GPT_OSS_DENSE, denseWeights, MAX);
  try {
    assert.equal(runner.session.info.executionProvider, 'webgpu', runner.session.info.fallbackReason ?? '');
    const ids = Array.from({ length: 20 }, (_, i) => (i * 37 + 5) % 512);
    let onnx = await runner.forward(ids);
    let expected = ref.forward(ids);
    assert.equal(runner.session.info.nodesOnCpu, 0, 'Clip, head_sink and the biases all on WebGPU');
    let worst = 0;
    for (let step = 0; step < 40; step++) {
      const { diff, scale } = maxAbsDiff(onnx, expected);
      worst = Math.max(worst, diff / Math.max(1, scale));
      assert.ok(diff <= 1e-5 * Math.max(1, scale), `step ${step}: max |webgpu − ref| = ${diff}, scale ${scale}`);
      assert.equal(argmax(onnx), argmax(expected), `step ${step}: greedy token differs`);
      onnx = await runner.forward([argmax(expected)]);
      expected = ref.forward([argmax(expected)]);
    }
    t.diagnostic(`webgpu: 40 steps past a 20-token prompt (window 16), worst |webgpu − ref| / scale ${worst.toExponential(2)}`);
  } finally {
    await runner.dispose();
  }
});

test("a GGUF file's attn_output.bias is read (outputBias), and the graph equals the reference", async () => {
  const { clampedSwiglu: _, attentionSinks: __, ...plain } = GPT_OSS_DENSE;
  const config: ModelConfig = { ...plain, slidingWindow: undefined };
  const file = path.join(root, 'bias.gguf');
  writeModelGguf(file, config, await storiesTokenizerMetadata(), weightOf);
  const m = await importGguf(file);
  assert.equal(m.manifest.config.outputBias, true);
  assert.equal(m.manifest.config.attentionBias, true);
  const ids = Array.from({ length: 10 }, (_, i) => (i * 31 + 3) % 512);
  await greedyAgainstReference({ config: m.manifest.config, weights: m.weights, ids, steps: 40, maxContext: MAX });
});
