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

/** W as MatMulNBits computes it: I_K · Wᵀ = Wᵀ [K, N], returned as W [N, K]. */
async function kernelDequant(w: QuantizedTensor): Promise<Float32Array> {
  const [n, k] = w.shape;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-mmnb-'));
  try {
    const built = matMulNBitsGraph(w, 0);
    writeFileSync(path.join(dir, 'model.onnx'), built.model);
    await writeExternalData(path.join(dir, 'model.onnx.data'), built);
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
    const eye = new Float32Array(k * k);
    for (let i = 0; i < k; i++) eye[i * k + i] = 1;
    const out = (await session.run({ x: new ort.Tensor('float32', eye, [k, k]) })).y.data as Float32Array;
    await session.release();
    const wt = new Float32Array(n * k);
    for (let i = 0; i < k; i++) for (let j = 0; j < n; j++) wt[j * k + i] = out[i * n + j];
    return wt;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const EXACT = ['q8_0', 'q4_0', 'q5_0', 'q6_k', 'q5_1', 'q5_k'];
const APPROX = ['q4_1', 'q4_k'];

test('GGUF blocks through MatMulNBits: Q8_0, Q4_0, Q5_0, Q6_K, Q5_1, Q5_K exact; Q4_1, Q4_K within float32 rounding', async (t) => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const name of [...EXACT, ...APPROX]) {
      const info = g.tensors.get(`blocks.${name}`)!;
      const w = quantizedFromGguf(g.typeOf(info), await g.readRaw(info), info.shape);
      assert.ok(w, `${name} maps to MatMulNBits`);
      const ref = await g.readFloat32(g.tensors.get(`blocks.${name}.ref`)!);
      const got = await kernelDequant(w);
      let maxErr = 0;
      let maxStep = 0; // error in units of the block's quantization step (its scale before / k)
      for (let i = 0; i < ref.length; i++) {
        const err = Math.abs(got[i] - ref[i]);
        maxErr = Math.max(maxErr, err);
        const b = Math.floor((i % w.shape[1]) / w.blockSize) + Math.floor(i / w.shape[1]) * (w.shape[1] / w.blockSize);
        if (w.scales[b] !== 0) maxStep = Math.max(maxStep, err / Math.abs(w.scales[b]));
      }
      t.diagnostic(`${name}: ${w.bits}-bit block ${w.blockSize}, max |error| ${maxErr.toExponential(2)}, ${maxStep.toExponential(2)} of the kernel's scale`);
      if (EXACT.includes(name)) assert.equal(maxErr, 0, `${name} is exact`);
      else assert.ok(maxStep < 1e-5, `${name}: ${maxStep} of a step`);
    }
  } finally {
    await g.close();
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
