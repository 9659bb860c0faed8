/**
 * The native addon's ropewalk.DecodeAttention (native/src/attention.h): its kernel for one KV
 * head, on each ISA variant this CPU has, over float32 and float16 KV rows, against softmax
 * attention computed in float64 here on the same (rounded) values (head sizes 8, 64 and 128: the
 * one-value-at-a-time path and the 16-lane one; held lengths with and without a remainder past
 * the softmax's steps of 16, up to 1,072), and its typed refusal of sizes that disagree; then the
 * op inside a graph: a Qwen3-shaped model with 128-wide heads and stories260K (8-wide), whose
 * native graphs run DecodeAttention, give the logits of the CPU graph (ONNX Runtime's
 * GroupQueryAttention) within float rounding over a teacher-forced path: two prefill chunks
 * (the addon's prefill tiles on AVX-512 with 16-lane heads, else ONNX Runtime's kernel through
 * InvokeOp), then decode steps; with a float16 KV cache too, against ONNX Runtime's float16
 * GroupQueryAttention. The prefill kernel alone too, against causal softmax attention in float64.
 * The Qwen3-shaped model's native graph also rotates q and k in ropewalk.QkNormRope (its per-head
 * norms and RoPE), so the same comparison covers that op inside a graph.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { KV_FLOAT16_MODEL_FILE, resolveModel } from '../../main/engine/model/bundle.ts';
import { floatToHalf, halfToFloat } from '../../main/engine/model/gguf/quants.ts';
import { CPU_TARGET, NATIVE_CPU_TARGET } from '../../main/engine/model/graph-target.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { forcedLogits } from '../helpers/forced-logits.ts';
import { STORIES_GGUF } from '../helpers/paths.ts';
import { randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';

const status = loadNativeAddon();
const addon = status.available ? status.addon : null;
const skip = addon?.attentionHead ? false : `native addon without attentionHead (${status.available ? 'an older build' : status.reason})`;

/** Values of varied sign and scale, deterministic. */
const values = (n: number, seed: number, amp = 1) => Float32Array.from({ length: n }, (_, i) => amp * Math.sin(i * 0.731 + seed) * (1 + (i % 5)));

/** Softmax attention of g query heads over L rows, in float64 (the definition, not the kernel's order). */
function reference(q: Float32Array, k: Float32Array, v: Float32Array, g: number, L: number, hd: number, scale: number): Float64Array {
  const out = new Float64Array(g * hd);
  for (let j = 0; j < g; j++) {
    const s = Array.from({ length: L }, (_, t) => {
      let dot = 0;
      for (let i = 0; i < hd; i++) dot += q[j * hd + i] * k[t * hd + i];
      return dot * scale;
    });
    const max = Math.max(...s);
    const e = s.map((x) => Math.exp(x - max));
    const sum = e.reduce((a, b) => a + b, 0);
    for (let t = 0; t < L; t++) for (let i = 0; i < hd; i++) out[j * hd + i] += (e[t] / sum) * v[t * hd + i];
  }
  return out;
}

const ISAS = ['scalar', 'avx2', 'avx512'] as const;

test('ropewalk.DecodeAttention\'s kernel equals softmax attention in float64 within float32 rounding, on every ISA variant this CPU has', { skip }, (t) => {
  const isas = ISAS.filter((isa) => {
    try {
      addon!.attentionHead!(isa, new Float32Array(8), new Float32Array(8), new Float32Array(8), 1, 1, 8, 1);
      return true;
    } catch {
      return false;
    }
  });
  assert.ok(isas.includes(addon!.attentionKernel as never), `the op's own variant ${addon!.attentionKernel} is among those tested`);
  let worst = 0;
  for (const [g, hd] of [[2, 128], [4, 64], [3, 64], [2, 8], [1, 128]]) {
    for (const L of [1, 15, 16, 45, 1072]) {
      // Scores spread over ~±10 after scaling: a softmax far from uniform, as a trained model's.
      const q = values(g * hd, 1, 0.5), k = values(L * hd, 2 + L, 0.5), v = values(L * hd, 3 + L);
      const scale = 1 / Math.sqrt(hd);
      const want = reference(q, k, v, g, L, hd, scale);
      const vmax = v.reduce((a, x) => Math.max(a, Math.abs(x)), 0);
      // The float16 cache's rows: the same values rounded to float16, the reference on the rounded ones.
      const k16 = Uint16Array.from(k, floatToHalf), v16 = Uint16Array.from(v, floatToHalf);
      const wantHalf = reference(q, Float32Array.from(k16, halfToFloat), Float32Array.from(v16, halfToFloat), g, L, hd, scale);
      for (const isa of isas) {
        for (const [kind, got, ref] of [
          ['float32', addon!.attentionHead!(isa, q, k, v, g, L, hd, scale), want],
          ['float16', addon!.attentionHead!(isa, q, k16, v16, g, L, hd, scale), wantHalf],
        ] as const) {
          const err = got.reduce((a, x, i) => Math.max(a, Math.abs(x - ref[i])), 0) / vmax;
          worst = Math.max(worst, err);
          assert.ok(err < 2e-5, `${isa}, ${kind} KV, g ${g}, L ${L}, hd ${hd}: off by ${err} of max |v|`);
        }
      }
    }
  }
  t.diagnostic(`variants ${isas.join(', ')}; worst |Δ| / max |v| ${worst.toExponential(2)}`);
});

const skipPrefill = addon?.attentionPrefill ? false : `native addon without attentionPrefill (${status.available ? 'an older build' : status.reason})`;

test('ropewalk.DecodeAttention\'s prefill kernel equals causal softmax attention in float64 within float32 rounding (float16: its rounding), on every ISA variant this CPU has, its tiles split or not', { skip: skipPrefill }, (t) => {
  const isas = ISAS.filter((isa) => {
    try {
      addon!.attentionPrefill!(isa, new Float32Array(16), new Float32Array(16), new Float32Array(16), 1, 0, 1, 16, 1);
      return true;
    } catch {
      return false;
    }
  });
  assert.ok(isas.includes(addon!.attentionKernel as never), `the op's own variant ${addon!.attentionKernel} is among those tested`);
  let worst = 0;
  let worstHalf = 0;
  // g 3: a tile of 16 rows ends inside a token's heads; T 1 and 2: tiles mostly empty; P > 0: a later chunk;
  // P 240, T 33: rows whose keys cross the kernel's chunk of 256 (its online softmax).
  for (const [g, hd] of [[2, 128], [4, 64], [1, 16], [3, 32]]) {
    for (const [P, T] of [[0, 1], [0, 2], [0, 37], [5, 16], [100, 45], [240, 33]]) {
      const L = P + T;
      const q = values(T * g * hd, 1 + T, 0.5), k = values(L * hd, 2 + L, 0.5), v = values(L * hd, 3 + L);
      const scale = 1 / Math.sqrt(hd);
      const vmax = v.reduce((a, x) => Math.max(a, Math.abs(x)), 0);
      const q16 = Uint16Array.from(q, floatToHalf), k16 = Uint16Array.from(k, floatToHalf), v16 = Uint16Array.from(v, floatToHalf);
      const [qh, kh, vh] = [q16, k16, v16].map((a) => Float32Array.from(a, halfToFloat));
      // Row (t, j): the decode reference over the keys 0 … P+t.
      const causal = (qs: Float32Array, ks: Float32Array, vs: Float32Array) => {
        const out = new Float64Array(T * g * hd);
        for (let tok = 0; tok < T; tok++) {
          const n = P + tok + 1;
          out.set(reference(qs.subarray(tok * g * hd, (tok + 1) * g * hd), ks.subarray(0, n * hd), vs.subarray(0, n * hd), g, n, hd, scale), tok * g * hd);
        }
        return out;
      };
      const want = causal(q, k, v), wantHalf = causal(qh, kh, vh);
      for (const isa of isas) {
        for (const step of [1, 3]) {
          const got = addon!.attentionPrefill!(isa, q, k, v, g, P, T, hd, scale, step);
          const err = got.reduce((a, x, i) => Math.max(a, Math.abs(x - want[i])), 0) / vmax;
          worst = Math.max(worst, err);
          assert.ok(err < 2e-5, `${isa}, float32, g ${g}, hd ${hd}, P ${P}, T ${T}, step ${step}: off by ${err} of max |v|`);
          const gotHalf = addon!.attentionPrefill!(isa, q16, k16, v16, g, P, T, hd, scale, step);
          // float16 output: its rounding, 2^-11 of a value, on top.
          const errHalf = gotHalf.reduce((a, x, i) => Math.max(a, Math.abs(halfToFloat(x) - wantHalf[i])), 0) / vmax;
          worstHalf = Math.max(worstHalf, errHalf);
          assert.ok(errHalf < 1e-3, `${isa}, float16, g ${g}, hd ${hd}, P ${P}, T ${T}, step ${step}: off by ${errHalf} of max |v|`);
        }
      }
    }
  }
  t.diagnostic(`variants ${isas.join(', ')}; worst |Δ| / max |v| float32 ${worst.toExponential(2)}, float16 ${worstHalf.toExponential(2)}`);
});

test('ropewalk.DecodeAttention\'s prefill kernel refuses sizes that disagree, a head size off the 16 lanes and mixed types, naming them', { skip: skipPrefill }, () => {
  const f = (n: number) => new Float32Array(n);
  assert.throws(() => addon!.attentionPrefill!('scalar', f(8), f(8), f(8), 1, 0, 1, 8, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /hd 8 \(a multiple of 16\)/.test(e.message));
  assert.throws(() => addon!.attentionPrefill!('scalar', f(32), f(16), f(32), 1, 0, 2, 16, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /P 0, T 2, hd 16 .*k of 16 and v of 32 values/.test(e.message));
  assert.throws(() => addon!.attentionPrefill!('scalar', f(16), new Uint16Array(16) as never, f(16), 1, 0, 1, 16, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /must all be Float32Arrays or all Uint16Arrays/.test(e.message));
  assert.throws(() => addon!.attentionPrefill!('scalar', f(16), f(16), f(16), 1, 0, 1, 16, 1, 0), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /step 0/.test(e.message));
});

test('ropewalk.DecodeAttention\'s kernel refuses sizes that disagree and an ISA this CPU lacks, naming them', { skip }, () => {
  const f = (n: number) => new Float32Array(n);
  assert.throws(() => addon!.attentionHead!('scalar', f(8), f(8), f(8), 2, 1, 8, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /g 2, L 1, hd 8 for q of 8, k of 8 and v of 8 values/.test(e.message));
  assert.throws(() => addon!.attentionHead!('scalar', f(8), f(16), f(8), 1, 2, 8, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /v of 8 values/.test(e.message));
  assert.throws(() => addon!.attentionHead!('scalar', f(8), new Uint16Array(8), f(8), 1, 1, 8, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /k and v must both be Float32Arrays or both Uint16Arrays/.test(e.message));
  assert.throws(() => addon!.attentionHead!('sse' as never, f(8), f(8), f(8), 1, 1, 8, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /no sse variant/.test(e.message));
});

/** Qwen3's layout with 128-wide heads (the kernel's 16-lane path), small enough for a test. */
const QWEN3_SMALL: ModelConfig = {
  architecture: 'qwen3', hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 128,
  vocabSize: 512, rmsNormEps: 1e-6, tiedEmbeddings: true, attentionBias: false, qkNorm: true,
  rope: { theta: 1_000_000, rotaryDim: 128, layout: 'half' }, trainedContext: 4096,
};

/** Two prefill chunks (40 tokens at position 0, then 23 at 40: tiles of 16 rows, a later chunk's causal offset) before the decode steps. */
const PROMPTS = [Array.from({ length: 40 }, (_, i) => (17 * i + 5) % 512), Array.from({ length: 23 }, (_, i) => (29 * i + 3) % 512)];

/** Teacher-forced logits of `file` under the native graph and the CPU graph (float32 or float16 KV); the graphs' text too. */
async function bothGraphs(file: string, cacheDir: string, steps: number, kvDtype: 'float32' | 'float16'): Promise<{ runs: Float32Array[][]; graphs: string[] }> {
  const runs: Float32Array[][] = [];
  const graphs: string[] = [];
  for (const target of [NATIVE_CPU_TARGET, CPU_TARGET]) {
    const bundle = await resolveModel(file, cacheDir, undefined, { target });
    const modelPath = kvDtype === 'float16' ? path.join(path.dirname(bundle.modelPath), KV_FLOAT16_MODEL_FILE) : bundle.modelPath;
    graphs.push(readFileSync(modelPath).toString('latin1'));
    const backend = await NativeDecoderSession.create(modelPath, bundle.manifest.config, 'cpu', kvDtype);
    try {
      runs.push(await forcedLogits(backend, bundle.manifest.config, steps, PROMPTS));
    } finally {
      await backend.dispose();
    }
  }
  return { runs, graphs };
}

for (const kvDtype of ['float32', 'float16'] as const) for (const [name, make] of [
  ['a Qwen3-shaped model (128-wide heads, 4 / 2 heads, random weights)', async (dir: string) => {
    const file = path.join(dir, 'qwen3-small.gguf');
    writeModelGguf(file, QWEN3_SMALL, await storiesTokenizerMetadata(), randomWeights(5, 0.08));
    return file;
  }],
  ['stories260K (8-wide heads)', async () => STORIES_GGUF],
] as const) {
  test(`${name}, ${kvDtype} KV, on ropewalk.DecodeAttention gives GroupQueryAttention's logits within float rounding, two prefill chunks and 40 decode steps`, { skip }, async (t) => {
    const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-attn-'));
    try {
      const { runs, graphs } = await bothGraphs(await make(cacheDir), cacheDir, 40, kvDtype);
      assert.ok(graphs[0].includes('DecodeAttention') && !graphs[0].includes('GroupQueryAttention'), 'the native graph\'s attention is DecodeAttention');
      assert.ok(graphs[1].includes('GroupQueryAttention') && !graphs[1].includes('DecodeAttention'), 'the CPU graph keeps GroupQueryAttention');
      // Qwen3's per-head q/k norms and RoPE: one QkNormRope node in the native float32 graph
      // (qk-norm-rope.test.ts), ONNX Runtime's SimplifiedLayerNormalization and RotaryEmbedding in the CPU graph.
      if (name.startsWith('a Qwen3') && kvDtype === 'float32') {
        assert.ok(graphs[0].includes('QkNormRope') && !graphs[0].includes('RotaryEmbedding'), 'the native graph rotates q and k in QkNormRope');
        assert.ok(graphs[1].includes('RotaryEmbedding') && !graphs[1].includes('QkNormRope'), 'the CPU graph keeps RotaryEmbedding');
      }
      const [ours, ort] = runs;
      const errs = ours.map((o, i) => {
        const scale = ort[i].reduce((a, v) => Math.max(a, Math.abs(v)), 0);
        return o.reduce((a, v, j) => Math.max(a, Math.abs(v - ort[i][j])), 0) / scale;
      });
      t.diagnostic(`max |Δlogit| / max |logit|: prefill chunks ${errs[0].toExponential(1)}, ${errs[1].toExponential(1)}; decode steps up to ${Math.max(...errs.slice(2)).toExponential(1)}`);
      assert.equal(errs.length, 42, 'the two prefill chunks and 40 decode steps compared');
      // On AVX-512 a prefill with 16-lane heads (the Qwen3-shaped model) is the addon's tiles, else
      // ONNX Runtime's kernel through InvokeOp (the classifier differs anyway: MatMulF32 against
      // Gemm); a decode step's and the tiles' attention sum in another float order (e^x within 2
      // ulp): float32 rounding. With a float16 KV cache, ONNX Runtime's kernel rounds its float16
      // intermediates (2^−11 ≈ 4.9e−4 of a value) where ours keeps float32: float16 rounding.
      const bar = kvDtype === 'float32' ? 1e-5 : 1e-3;
      assert.ok(Math.max(...errs) < bar, `a run off by ${Math.max(...errs)}`);
    } finally {
      rmSync(cacheDir, { recursive: true, force: true });
    }
  });
}
