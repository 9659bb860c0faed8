/**
 * Attention sinks (gpt-oss's `sinks`, GroupQueryAttention's `head_sink`) through the real ONNX
 * Runtime graph, against the independent float64 reference forward whose one-head attention
 * (test/helpers/reference-attention.ts) follows gpt-oss's formula: the sink joins each softmax as
 * one more, value-less logit, unscaled. A synthetic Llama-family model with sinks on (values up
 * to ±3, so exp(sink) weighs against the sum of 1 … 150 keys' terms), one full and one
 * sliding-window layer (gpt-oss alternates them):
 *   - CPU EP, both decoder backends: 130 greedy tokens after a 2-chunk prefill equal the reference
 *     with sinks, logits within 1e-5 of their scale; the reference without sinks is far off;
 *   - a GGUF file with `blk.N.attn_sinks.weight` (llama.cpp's tensor name) imports with the sinks;
 *   - `--ep webgpu` (Mesa's lavapipe here) on that GGUF gives the CPU EP's 40 greedy tokens, with
 *     every compute node placed on WebGPU (nodesOnCpu 0).
 * CUDA is not run here (no GPU): its flash-attention kernel takes `head_sink` since
 * onnxruntime#25432; see docs/gpu.md.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { expectedWeights } from '../../main/engine/model/import-hf.ts';
import { describeRun, freshCacheDir, parseJsonRun, runChat } from '../helpers/cli-run.ts';
import { engineAgreement } from '../helpers/float16-agreement.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { argmax, maxAbsDiff } from '../helpers/onnx-runner.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import { randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';

const MAX = 256;
const WINDOW = 16;
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-sinks-'));
after(() => rmSync(root, { recursive: true, force: true }));

const config: ModelConfig = {
  architecture: 'llama', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 512,
  rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: false, qkNorm: false, rope: { theta: 10000, rotaryDim: 16, layout: 'interleaved' },
  trainedContext: MAX, slidingWindow: [WINDOW, 0], attentionSinks: true,
};
const SINKS = [[-3, 0.5, 2, 3], [1, -1, 2.5, 0]];
const random = randomWeights(7, 0.1);
const weightOf = (name: string, shape: number[]): Float32Array => {
  const m = /^model\.layers\.(\d+)\.self_attn\.sinks$/.exec(name);
  return m ? Float32Array.from(SINKS[Number(m[1])]) : random(name, shape);
};
const weights: ModelWeights = new Map([...expectedWeights(config)].map(([name, shape]) => [name, { shape, data: weightOf(name, shape) }]));
const ids = Array.from({ length: 20 }, (_, i) => (i * 37 + 5) % 512);

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: 130 greedy tokens with attention sinks equal the reference with sinks`, async (t) => {
    const r = await greedyAgainstReference({ config, weights, ids, steps: 130, maxContext: MAX, backend });
    // The same model without its sinks: how far the sinks move the logits.
    const plain = new ReferenceModel({ ...config, attentionSinks: false }, weights, MAX);
    const sinks = new ReferenceModel(config, weights, MAX);
    let off = 0;
    let differ = 0;
    for (const tokens of [ids, ...r.tokens.map((x) => [x])]) {
      const a = plain.forward(tokens);
      const b = sinks.forward(tokens);
      off = Math.max(off, maxAbsDiff(a, b).diff);
      if (argmax(a) !== argmax(b)) differ++;
    }
    t.diagnostic(`${backend}: worst |onnx − ref| / scale ${r.worst.toExponential(2)}; without sinks the reference is up to ${off.toExponential(2)} off, another token ${differ} times of ${r.tokens.length + 1}`);
    assert.ok(off > 1000 * Math.max(r.worst, 1e-9), 'the sinks change the logits far beyond rounding');
  });
}

const gguf = path.join(root, 'sinks.gguf');
before(async () => {
  writeModelGguf(gguf, config, { ...(await storiesTokenizerMetadata()), 'llama.attention.sliding_window': { u32: WINDOW } }, weightOf);
});

test('a GGUF file with blk.N.attn_sinks.weight imports with its sinks, and runs as the reference', async () => {
  const m = await importGguf(gguf);
  assert.equal(m.manifest.config.attentionSinks, true);
  const sinks = m.weights.get('model.layers.1.self_attn.sinks');
  assert.ok(sinks && 'data' in sinks);
  assert.deepEqual([...sinks.data], SINKS[1]);
  // The file windows every layer (llama.cpp's n_swa on a llama file): the reference gets the same.
  const cfg = m.manifest.config;
  assert.deepEqual(cfg.slidingWindow, [WINDOW, WINDOW]);
  await greedyAgainstReference({ config: cfg, weights: m.weights, ids, steps: 40, maxContext: MAX, backend: 'js' });
});

test('--ep webgpu on the sinks GGUF: the CPU EP greedy tokens, every node on WebGPU', async () => {
  const cacheDir = await freshCacheDir();
  const args = ['--model', gguf, '--temperature', '0', '--max-tokens', '40', '--ignore-eos', '--json', 'Once upon a time'];
  const cpu = parseJsonRun(await runChat(['--ep', 'cpu', ...args], cacheDir, 180_000));
  const r = await runChat(['--ep', 'webgpu', ...args], cacheDir, 300_000);
  assert.doesNotMatch(r.stderr, /could not be used/, `no WebGPU adapter here: install Mesa's lavapipe (see .ci/run). ${describeRun(r)}`);
  const gpu = parseJsonRun(r);
  assert.equal(gpu.stats.executionProvider, 'webgpu', describeRun(r));
  assert.equal(gpu.stats.nodesOnCpu, 0, 'every compute node (GroupQueryAttention with head_sink included) on WebGPU');
  assert.equal(cpu.tokens.length, 40);
  assert.deepEqual(gpu.tokens, cpu.tokens);
});

test('float16 KV on the CPU (the sinks a float16 initializer GroupQueryAttention reads): top-1 as float32 KV at every one of 64 teacher-forced steps, top-8 log p within 2e-2', async (t) => {
  const cacheDir = path.join(root, 'cache-kv16');
  const f32 = await Engine.load(gguf, { cacheDir, maxContext: MAX });
  const f16 = await Engine.load(gguf, { cacheDir, maxContext: MAX, kvCacheDtype: 'float16' });
  try {
    assert.equal(f16.info.kvCacheDtype, 'float16');
    const r = await engineAgreement(f32, f16, ids, 64);
    t.diagnostic(`sinks, float16 KV: top-1 ${(r.agree * 100).toFixed(1)} %, max |Δ log p| ${r.maxDiff.toExponential(2)}`);
    assert.equal(r.agree, 1);
    assert.ok(r.maxDiff <= 2e-2, `max |Δ log p| ${r.maxDiff}`);
  } finally {
    await f16.dispose();
    await f32.dispose();
  }
});
