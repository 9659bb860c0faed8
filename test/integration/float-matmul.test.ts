/**
 * The native addon's ropewalk.MatMulF32 (native/src/float_matmul.h): its kernel, on each ISA
 * variant this CPU has, against the dot products in float64 (row lengths with and without a
 * remainder past the kernel's steps of 64 values; the two FMA variants bit for bit alike), and its
 * typed refusal of sizes that disagree; then the op inside a graph: stories260K's float GGUF,
 * whose native graph runs its classifier as MatMulF32 (the last position's row, in a prefill and a decode step alike), gives
 * the CPU graph's logits (Gemm over MLAS) within float rounding over a teacher-forced path.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { CPU_TARGET, NATIVE_CPU_TARGET } from '../../main/engine/model/graph-target.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { forcedLogits } from '../helpers/forced-logits.ts';
import { STORIES_GGUF } from '../helpers/paths.ts';

const status = loadNativeAddon();
const addon = status.available ? status.addon : null;
const skip = addon?.matMulF32 ? false : `native addon without matMulF32 (${status.available ? 'an older build' : status.reason})`;

/** Values of varied sign and scale, deterministic. */
const values = (n: number, seed: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.731 + seed) * (1 + (i % 5)) * 10 ** ((i % 3) - 1));

test('ropewalk.MatMulF32 computes W · x as float64 does within float32 rounding, on every ISA variant this CPU has', { skip }, (t) => {
  const isas = (['scalar', 'avx2', 'avx512'] as const).filter((isa) => {
    try {
      addon!.matMulF32!(isa, new Float32Array(1), new Float32Array(1), 1, 1);
      return true;
    } catch {
      return false;
    }
  });
  assert.ok(isas.includes(addon!.matMulF32Kernel as never), `the op's own variant (${addon!.matMulF32Kernel}) is among those tested`);
  const n = 5;
  for (const k of [1, 31, 64, 100, 1024 + 37]) {
    const x = values(k, 1), w = values(n * k, 2);
    for (const isa of isas) {
      const y = addon!.matMulF32!(isa, x, w, n, k);
      for (let r = 0; r < n; r++) {
        let want = 0, magnitude = 0;
        for (let i = 0; i < k; i++) want += w[r * k + i] * x[i], magnitude += Math.abs(w[r * k + i] * x[i]);
        // float32 sums of k products: each rounding within 2^-24 of what it adds up to.
        const bound = k * 2 ** -24 * magnitude + 1e-30;
        assert.ok(Math.abs(y[r] - want) <= bound, `${isa} k ${k} row ${r}: ${y[r]} against ${want} (bound ${bound})`);
      }
    }
    if (isas.includes('avx2') && isas.includes('avx512')) {
      assert.deepEqual(addon!.matMulF32!('avx2', x, w, n, k), addon!.matMulF32!('avx512', x, w, n, k), `k ${k}: one order, the same bits on AVX2 + FMA and AVX-512`);
    }
    t.diagnostic(`k ${k}: ${isas.join(', ')} within k · 2^-24 · Σ|w·x| of float64`);
  }
});

test('ropewalk.MatMulF32 refuses sizes that disagree and an ISA this CPU lacks, naming them', { skip }, () => {
  assert.throws(() => addon!.matMulF32!('scalar', new Float32Array(4), new Float32Array(7), 2, 4), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /n 2, k 4 for x of 4 values and w of 7/.test(e.message));
  assert.throws(() => addon!.matMulF32!('sse' as never, new Float32Array(1), new Float32Array(1), 1, 1), (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /no sse variant/.test(e.message));
});

test('stories260K (float) with its classifier on ropewalk.MatMulF32 gives the Gemm graph\'s logits within float rounding, prefill and decode', { skip }, async (t) => {
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-f32op-'));
  try {
    const runs: Float32Array[][] = [];
    for (const target of [NATIVE_CPU_TARGET, CPU_TARGET]) {
      const bundle = await resolveModel(STORIES_GGUF, cacheDir, undefined, { target });
      const graph = readFileSync(bundle.modelPath).toString('latin1');
      assert.equal(graph.includes('MatMulF32'), target === NATIVE_CPU_TARGET, 'MatMulF32 in the native target\'s graph only');
      assert.equal(graph.includes('Gemm'), target === CPU_TARGET, 'the native graph\'s classifier is MatMulF32, not Gemm');
      assert.ok(graph.includes('FusedMatMul'), 'the linears stay on FusedMatMul (MLAS prepacks their B)');
      const backend = await NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config);
      try {
        runs.push(await forcedLogits(backend, bundle.manifest.config, 24));
      } finally {
        await backend.dispose();
      }
    }
    const [ours, mlas] = runs;
    const errs = ours.map((o, i) => {
      const scale = mlas[i].reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      return o.reduce((a, v, j) => Math.max(a, Math.abs(v - mlas[i][j])), 0) / scale;
    });
    t.diagnostic(`max |Δlogit| / max |logit| per run (the prompt's prefill first): ${errs.map((e) => e.toExponential(1)).join(' ')}`);
    // The classifier's sums in another float order: a few float32 ulps of the logits.
    assert.equal(errs.length, 25, 'the prompt and 24 decode steps compared');
    assert.ok(Math.max(...errs) < 1e-5, `a run off by ${Math.max(...errs)}`);
  } finally {
    rmSync(cacheDir, { recursive: true, force: true });
  }
});
