/**
 * The CUDA graph in float16 (float16 activations, weights and KV cache: the graph `--ep cuda`
 * loads) runs on the CPU EP, where ONNX Runtime casts the float16 nodes it has no kernel for (Add,
 * Mul, Sub, Sigmoid, Gemm, …) to float32 itself. Its reference is the same CUDA graph in float32
 * (`CUDA_FLOAT32_REFERENCE`): quantized matmuls at accuracy level 0 on the dequantized blocks in
 * both, no llama.cpp int8-activation emulation in either, so what differs is float16 alone. (The
 * CPU graph emulates llama.cpp's int8 activations on quantized files: the float16 graph differs
 * from it by 0.17 on Q8_0, which measures llama.cpp's arithmetic, not float16.)
 * Teacher-forced along the float32 reference's greedy path for 64 steps after a prompt: the
 * float16 graph's top-1 token agrees at >= 95 % of steps and the log-probabilities of the float32
 * top-8 stay within 2e-2 (stories260K, a synthetic Qwen3, Q8_0; Q4_0 and Q5_1 measure past it:
 * see BOUND; a GGUF with gpt-oss's attention sinks and q/k/v/o biases). Both run on the JS
 * backend (host KV, float16 rows); the native backend's float16
 * KV tensors give the JS backend's tokens.
 * Not checked here: the same graph on CUDA's own float16 kernels (no GPU).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { CUDA_FLOAT32_REFERENCE, graphTarget, type GraphTarget } from '../../main/engine/model/graph-target.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';
import { assertSameScript, kvScript } from '../helpers/kv-script.ts';
import { argmax } from '../helpers/onnx-runner.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-float16-'));
const cacheDir = path.join(root, 'cache');
after(() => rmSync(root, { recursive: true, force: true }));
const STEPS = 64;
const PROMPT = 'Once upon a time';

function logSoftmax(l: Float32Array): Float64Array {
  let m = -Infinity;
  for (const x of l) m = Math.max(m, x);
  let s = 0;
  for (const x of l) s += Math.exp(x - m);
  const lse = m + Math.log(s);
  return Float64Array.from(l, (x) => x - lse);
}

/** One graph target's bundle of `source`, stepped on the CPU EP (JS backend, host KV of the graph's dtype). */
async function open(source: string, target: GraphTarget) {
  const bundle = await resolveModel(source, cacheDir, undefined, { target });
  const c = bundle.manifest.config;
  const session = await DecoderSession.create(bundle.modelPath, c, 'cpu');
  const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: c.trainedContext, hostBuffers: true, dtype: bundle.manifest.dtype === 'float16' ? 'float16' : 'float32' });
  const rope = new RopeCache(c.rope, c.trainedContext, c.localRope);
  return {
    dtype: bundle.manifest.dtype,
    session,
    /** Runs `ids` at the next positions; the last position's logits (a copy). */
    async run(ids: number[]): Promise<Float32Array> {
      const at = kv.length;
      rope.ensure(at + ids.length);
      kv.ensure(at + ids.length);
      const { cos, sin } = rope.rows(at, ids.length);
      const logits = (await session.run(ids, cos, sin, kv)).slice();
      kv.commit(ids.length);
      return logits;
    },
  };
}

/** Top-1 agreement and the largest |Δ log p| over the float32 top-8, along the float32 greedy path. */
async function compare(source: string): Promise<{ agree: number; maxDiff: number }> {
  const engine = await Engine.load(source, { cacheDir }); // only for the prompt's token ids
  const ids = engine.encodeRequest({ prompt: PROMPT });
  await engine.dispose();
  const f32 = await open(source, CUDA_FLOAT32_REFERENCE);
  const f16 = await open(source, graphTarget('cuda'));
  try {
    assert.equal(f32.dtype, 'float32');
    assert.equal(f16.dtype, 'float16');
    let a = await f32.run(ids);
    let b = await f16.run(ids);
    let agree = 0;
    let maxDiff = 0;
    for (let step = 0; step < STEPS; step++) {
      const next = argmax(a);
      if (argmax(b) === next) agree++;
      const la = logSoftmax(a);
      const lb = logSoftmax(b);
      const top8 = [...a.keys()].sort((i, j) => a[j] - a[i]).slice(0, 8);
      for (const i of top8) maxDiff = Math.max(maxDiff, Math.abs(la[i] - lb[i]));
      a = await f32.run([next]);
      b = await f16.run([next]);
    }
    return { agree: agree / STEPS, maxDiff };
  } finally {
    await f32.session.dispose();
    await f16.session.dispose();
  }
}

/**
 * The bound on |Δ log p|: the 2e-2, except where float16 itself is measured past it.
 * Q4_0 and Q5_1 (64 steps): 2.7e-2 and 2.6e-2. Not one op of ours: with every quantized matmul
 * of the float16 graph run in float32 all three GGUF files measure 2.2e-2, with a float32
 * residual stream or a float32 quantized head no better; float16 rounds the whole graph.
 */
const BOUND = 2e-2;
const MODELS: { name: string; source: () => Promise<string>; bound?: number }[] = [
  { name: 'stories260K', source: async () => STORIES_BIN },
  {
    name: 'synthetic Hugging Face Qwen3 (QK-norm, tied)',
    source: async () => {
      const dir = path.join(root, 'qwen3');
      await writeSyntheticCheckpoint(dir, { seed: 5, family: 'qwen3', tied: true });
      return dir;
    },
  },
  // The Gemma / Phi-3 steps of the CUDA target (soft-caps, (1 + w) norms, GELU-tanh, local RoPE,
  // fused projections), windows shorter than the teacher-forced run.
  ...(
    [
      ['gemma2', 3],
      ['gemma3_text', 6],
      ['phi3', 2],
    ] as const
  ).map(([family, layers]) => ({
    name: `synthetic Hugging Face ${family} (window 16)`,
    source: async () => {
      const dir = path.join(root, family);
      await writeSyntheticCheckpoint(dir, { seed: 5, family, layers, configOverrides: { sliding_window: 16 } });
      return dir;
    },
  })),
  // gpt-oss's attention sinks (GroupQueryAttention's head_sink, float16 here) and q/k/v/o biases, window 16.
  {
    name: 'GGUF with attention sinks and q/k/v/o biases (window 16)',
    source: async () => {
      const file = path.join(root, 'sinks.gguf');
      const config: ModelConfig = {
        architecture: 'llama', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 512,
        rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: true, outputBias: true, qkNorm: false, rope: { theta: 10000, rotaryDim: 16, layout: 'interleaved' },
        trainedContext: 256, attentionSinks: true,
      };
      const random = randomWeights(7, 0.1);
      const weightOf = (name: string, shape: number[]) => (/self_attn\.sinks$/.test(name) ? Float32Array.from([-3, 0.5, 2, 3]) : random(name, shape));
      writeModelGguf(file, config, { ...(await storiesTokenizerMetadata()), 'llama.attention.sliding_window': { u32: 16 } }, weightOf);
      return file;
    },
  },
  { name: 'GGUF Q8_0', source: async () => path.join(GGUF_DIR, 'stories260K-q8_0.gguf') },
  { name: 'GGUF Q4_0', source: async () => path.join(GGUF_DIR, 'stories260K-q4_0.gguf'), bound: 3.5e-2 },
  { name: 'GGUF Q5_1', source: async () => path.join(GGUF_DIR, 'stories260K-q5_1.gguf'), bound: 3.5e-2 },
];

for (const m of MODELS) {
  const bound = m.bound ?? BOUND;
  const named = bound === BOUND ? '2e-2' : `${bound} (NOT 2e-2: float16's own rounding, see BOUND)`;
  test(`${m.name}: the CUDA float16 graph on the CPU EP against the CUDA graph in float32 (no llama.cpp emulation in either): top-1 at >= 95 % of 64 teacher-forced steps, top-8 log-probs within ${named}`, async (t) => {
    const { agree, maxDiff } = await compare(await m.source());
    t.diagnostic(`${m.name}: top-1 ${(agree * 100).toFixed(1)} %, max |Δ log p| over the float32 top-8 ${maxDiff.toExponential(2)}`);
    assert.ok(agree >= 0.95, `top-1 agreement ${agree}`);
    assert.ok(maxDiff <= bound, `max |Δ log p| over the float32 top-8 = ${maxDiff}`);
  });
}

test('the float16 graph on the native backend (float16 KV tensors) gives the greedy tokens of the JS backend through KV growths, context shifts, prefix reuse and a conversation switch', async (t) => {
  const opts = { cacheDir, graphDtype: 'float16' as const, maxContext: 64 };
  const js = await Engine.load(STORIES_BIN, { ...opts, backend: 'js' });
  const native = await Engine.load(STORIES_BIN, { ...opts, backend: 'native' });
  try {
    assert.equal(native.manifest.dtype, 'float16');
    assert.equal(native.info.backend, 'native', String(native.sessionInfo.fallbackReason));
    assert.equal(native.sessionInfo.fallbackReason, null);
    assert.equal(js.info.backend, 'js');
    const n = assertSameScript(await kvScript(js), await kvScript(native));
    t.diagnostic(`float16 graph: ${n} greedy tokens equal on both backends`);
  } finally {
    await native.dispose();
    await js.dispose();
  }


});
