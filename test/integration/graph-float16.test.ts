/**
 * The CUDA graph in float16 (the mixed-precision graph `--ep cuda` loads: float16 attention, KV
 * cache and float-weight matmuls, float32 elsewhere; decoder-graph.ts) runs on the CPU EP
 * rewritten to CUDA's arithmetic (test/helpers/cuda-arithmetic.ts: every node in float32, every
 * float16 value rounded once, as CUDA's kernels store them; run as it is, the CPU EP would keep
 * chains of float16 nodes it has no kernel for in float32, unrounded, and measure too little).
 * Its reference is the same CUDA graph in float32 (`CUDA_FLOAT32_REFERENCE`): quantized matmuls
 * at accuracy level 0 on the dequantized blocks in both, no llama.cpp int8-activation emulation
 * in either, so what differs is float16 alone. (The CPU graph emulates llama.cpp's int8
 * activations on quantized files: the float16 graph differs from it by 0.17 on Q8_0, which
 * measures llama.cpp's arithmetic, not float16.)
 * Teacher-forced along the float32 reference's greedy path for 64 steps after a prompt: the
 * float16 graph's top-1 token agrees at >= 95 % of steps and the log-probabilities of the float32
 * top-8 stay within 2e-2 on every model (measured: stories260K 1.54e-2, Q8_0 1.19e-2, Q4_0
 * 1.33e-2, Q5_1 1.54e-2, the synthetic families 1.4e-4 to 4.8e-4, a GGUF with gpt-oss's attention sinks and q/k/v/o biases; top-1 64/64 on all). Both run
 * on the JS backend (host KV, float16 rows); the native backend's float16 KV tensors give the JS
 * backend's tokens.
 * Not checked here: the same graph on CUDA's own kernels (no GPU; their accumulation order differs
 * from the CPU EP's float32 kernels').
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import { float16Agreement } from '../helpers/float16-agreement.ts';
import { assertSameScript, kvScript } from '../helpers/kv-script.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-float16-'));
const cacheDir = path.join(root, 'cache');
after(() => rmSync(root, { recursive: true, force: true }));

/** The bound on |Δ log p|, every model: the issue's. */
const BOUND = 2e-2;
const MODELS: { name: string; source: () => Promise<string> }[] = [
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
  { name: 'GGUF Q4_0', source: async () => path.join(GGUF_DIR, 'stories260K-q4_0.gguf') },
  { name: 'GGUF Q5_1', source: async () => path.join(GGUF_DIR, 'stories260K-q5_1.gguf') },
];

for (const m of MODELS) {
  test(`${m.name}: the CUDA float16 graph, rounded as CUDA rounds, on the CPU EP against the CUDA graph in float32 (no llama.cpp emulation in either): top-1 at >= 95 % of 64 teacher-forced steps, top-8 log-probs within 2e-2`, async (t) => {
    const { agree, maxDiff, worst, dtypes } = await float16Agreement(await m.source(), cacheDir);
    assert.deepEqual(dtypes, { reference: 'float32', float16: 'float16' });
    t.diagnostic(`${m.name}: top-1 ${(agree * 100).toFixed(1)} %, max |Δ log p| over the float32 top-8 ${maxDiff.toExponential(2)} (step ${worst.step}, rank ${worst.rank}, log p ${worst.logProb.toFixed(2)})`);
    assert.ok(agree >= 0.95, `top-1 agreement ${agree}`);
    assert.ok(maxDiff <= BOUND, `max |Δ log p| over the float32 top-8 = ${maxDiff}`);
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
