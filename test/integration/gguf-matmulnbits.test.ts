/**
 * GGUF blocks run as ONNX Runtime's `com.microsoft.MatMulNBits` (real ONNX Runtime): each tensor
 * of ../shared/models/gguf/quant-blocks.gguf is mapped (quantized-weights.ts), multiplied by the
 * identity so the kernel's output is its own dequantization, and compared with gguf-py's `.ref`.
 * Q8_0, Q4_0, Q5_0, Q6_K, Q5_1 and Q5_K must be exact; Q4_1 and Q4_K (float zero points) within
 * float32 rounding, and the measured error is reported as a test diagnostic.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { quantizedFromGguf, quantizeRtn } from '../../main/engine/model/gguf/quantized-weights.ts';
import type { QuantizedTensor } from '../../main/engine/model/manifest.ts';
import { matMulNBitsGraph } from '../../main/engine/model/decoder-graph.ts';
import { writeExternalData } from '../../main/engine/model/onnx-builder.ts';
import { GGUF_DIR } from '../helpers/paths.ts';
import { LOWBIT_BLOCKS, LOWBIT_BLOCKS_F32, LOWBIT_TYPES } from '../fixtures/make-lowbit-blocks.ts';
import { BLOCKS, llamaCppMatMul } from '../helpers/llamacpp-dot.ts';

/** y = x · Wᵀ [M, N] as the MatMulNBits graph computes it (`level` undefined: the decoder graph's default for W). */
async function kernelMatMul(w: QuantizedTensor, x: Float32Array, m: number, level?: number): Promise<Float32Array> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-mmnb-'));
  try {
    const built = matMulNBitsGraph(w, level);
    writeFileSync(path.join(dir, 'model.onnx'), built.model);
    await writeExternalData(path.join(dir, 'model.onnx.data'), built);
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
    const out = (await session.run({ x: new ort.Tensor('float32', x, [m, w.shape[1]]) })).y.data as Float32Array;
    await session.release();
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** W as MatMulNBits computes it: I_K · Wᵀ = Wᵀ [K, N] at accuracy level 0, returned as W [N, K]. */
async function kernelDequant(w: QuantizedTensor): Promise<Float32Array> {
  const [n, k] = w.shape;
  const eye = new Float32Array(k * k);
  for (let i = 0; i < k; i++) eye[i * k + i] = 1;
  const out = await kernelMatMul(w, eye, k, 0);
  const wt = new Float32Array(n * k);
  for (let i = 0; i < k; i++) for (let j = 0; j < n; j++) wt[j * k + i] = out[i * n + j];
  return wt;
}

const TYPES = ['q8_0', 'q4_0', 'q5_0', 'q6_k', 'q5_1', 'q5_k', 'q4_1', 'q4_k'];

test('GGUF blocks through MatMulNBits: Q8_0, Q4_0, Q5_0, Q6_K, Q5_1, Q5_K, Q4_1, Q4_K exact', async (t) => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const name of TYPES) {
      const info = g.tensors.get(`blocks.${name}`)!;
      const w = quantizedFromGguf(g.typeOf(info), await g.readRaw(info), info.shape);
      assert.ok(w, `${name} maps to MatMulNBits`);
      const ref = await g.readFloat32(g.tensors.get(`blocks.${name}.ref`)!);
      const got = await kernelDequant(w);
      const maxErr = ref.reduce((a, r, i) => Math.max(a, Math.abs(got[i] - r)), 0);
      t.diagnostic(`${name}: ${w.bits}-bit block ${w.blockSize}${w.blockOffsets ? ' + block offsets' : ''}, max |error| ${maxErr.toExponential(2)}`);
      assert.equal(maxErr, 0, `${name} is exact`);
    }
  } finally {
    await g.close();
  }
});

test('low-bit GGUF blocks through MatMulNBits: Q2_K, Q3_K (4-bit, block 16), IQ4_NL, IQ4_XS, MXFP4 (8-bit, block 32) exact against llama.cpp', async (t) => {
  const q = await openGguf(LOWBIT_BLOCKS);
  const ref = await openGguf(LOWBIT_BLOCKS_F32);
  try {
    for (const name of Object.keys(LOWBIT_TYPES)) {
      const info = q.tensors.get(`blocks.${name}.weight`)!;
      const w = quantizedFromGguf(q.typeOf(info), await q.readRaw(info), info.shape);
      assert.ok(w, `${name} maps to MatMulNBits`);
      const want = await ref.readFloat32(ref.tensors.get(`blocks.${name}.weight`)!);
      const got = await kernelDequant(w);
      const maxErr = want.reduce((a, r, i) => Math.max(a, Math.abs(got[i] - r)), 0);
      t.diagnostic(`${name}: ${w.bits}-bit block ${w.blockSize}${w.blockOffsets ? ' + block offsets' : ''}, max |error| ${maxErr.toExponential(2)}`);
      assert.equal(maxErr, 0, `${name} is exact`);
    }
  } finally {
    await q.close();
    await ref.close();
  }
});

test('round-to-nearest q4/q8 of float32 weights: every weight within half a step of its block', async () => {
  const n = 4;
  const k = 64;
  const data = Float32Array.from({ length: n * k }, (_, i) => Math.sin(i * 0.7) * (1 + (i % 5)));
  for (const bits of [4, 8] as const) {
    const w = quantizeRtn({ shape: [n, k], data }, bits)!;
    const got = await kernelDequant(w);
    for (let i = 0; i < data.length; i++) {
      const scale = w.scales[Math.floor(i / 32)];
      assert.ok(Math.abs(got[i] - data[i]) <= scale / 2 + 1e-6, `q${bits} element ${i}: ${got[i]} vs ${data[i]} (scale ${scale})`);
    }
  }
});

for (const type of ['q8_0', 'q4_0', 'q4_1', 'q5_1'] as const) {
  test(`${type} blocks multiply as llama.cpp's ${type} × ${BLOCKS[type].hasMin ? 'q8_1' : 'q8_0'} dot product: activations quantized per 32 with half-precision scales`, async (t) => {
    const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
    try {
      const info = g.tensors.get(`blocks.${type}`)!;
      const raw = await g.readRaw(info);
      const w = quantizedFromGguf(g.typeOf(info), raw, info.shape)!;
      const [n, k] = w.shape;
      const m = 2;
      const x = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i * 1.37) * (1 + (i % 7)) * 0.1);
      const want = llamaCppMatMul(BLOCKS[type], raw, n, k, x, m);
      const scale = want.reduce((a, t) => Math.max(a, Math.abs(t)), 0);
      const relErr = (y: Float32Array) => y.reduce((a, t, i) => Math.max(a, Math.abs(t - want[i])), 0) / scale;
      const ours = relErr(await kernelMatMul(w, x, m));
      // The same blocks labelled as import-time round-to-nearest (no llama.cpp counterpart): level 4
      // with the kernel's own float32 activation scales; and level 0 (float32 activations).
      const float32Scales = relErr(await kernelMatMul({ ...w, format: 'rtn' }, x, m));
      const float32Activations = relErr(await kernelMatMul(w, x, m, 0));
      t.diagnostic(`max |y − llama.cpp| / max |y|: ${ours.toExponential(2)}; with float32 activation scales ${float32Scales.toExponential(2)}; with float32 activations ${float32Activations.toExponential(2)}`);
      assert.ok(ours < 2e-6, `${ours}`);
      assert.ok(float32Scales > 10 * ours, 'the half scales are what makes the difference');
      assert.ok(float32Activations > 10 * ours, 'int8 activations are what llama.cpp computes');
    } finally {
      await g.close();
    }
  });
}
