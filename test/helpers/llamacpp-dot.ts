/**
 * Test helper: llama.cpp's CPU matmul of GGUF blocks, from ggml's definitions (the oracle for
 * MatMulNBits' emulation in gguf-matmulnbits.test.ts and the native addon's ropewalk.MatMulQ8 in
 * gguf-matmulq8.test.ts): the weight read from its stored bytes, the activations quantized as
 * block_q8_0 / block_q8_1 (block_q8_K for the K-quants, whose weights come dequantized by
 * gguf-py), the dot products summed in float64.
 */
import { halfToFloat } from '../../main/engine/model/gguf/quants.ts';
import { floatToHalf } from './gguf-writer.ts';

/**
 * A weight block as llama.cpp's dot products read it: its stored values (zero point applied), its
 * half scale at byte 0 and, for the "_1" types, its half min m at byte 2.
 */
export type BlockReader = { bytes: number; values: (v: DataView, o: number) => number[]; hasMin?: true };
const nibble = (v: DataView, at: number, e: number) => (e < 16 ? v.getUint8(at + e) & 15 : v.getUint8(at + e - 16) >> 4);
export const BLOCKS: Record<'q8_0' | 'q4_0' | 'q4_1' | 'q5_1', BlockReader> = {
  // block_q8_0: fp16 d, 32 × int8.
  q8_0: { bytes: 34, values: (v, o) => Array.from({ length: 32 }, (_, e) => v.getInt8(o + 2 + e)) },
  // block_q4_0: fp16 d, 16 bytes; element e < 16 is byte e's low nibble, e ≥ 16 byte e − 16's high one; value q − 8.
  q4_0: { bytes: 18, values: (v, o) => Array.from({ length: 32 }, (_, e) => nibble(v, o + 2, e) - 8) },
  // block_q4_1: fp16 d, fp16 m, nibbles as q4_0; value d·q + m.
  q4_1: { bytes: 20, hasMin: true, values: (v, o) => Array.from({ length: 32 }, (_, e) => nibble(v, o + 4, e)) },
  // block_q5_1: fp16 d, fp16 m, 32 high bits, nibbles; value d·q + m.
  q5_1: { bytes: 24, hasMin: true, values: (v, o) => Array.from({ length: 32 }, (_, e) => nibble(v, o + 8, e) | (((v.getUint32(o + 4, true) >>> e) & 1) << 4)) },
};

/**
 * llama.cpp's matmul for these weights, from ggml's definitions: each 32-block of x becomes a
 * `block_q8_0` / `block_q8_1` (`quantize_row_q8_0_ref` / `_q8_1_ref`: d = max|x| / 127 stored as an
 * IEEE half, q = round(x / d), and for q8_1 s = fp16(d · Σq)), and `ggml_vec_dot_{q8_0,q4_0}_q8_0` /
 * `ggml_vec_dot_{q4_1,q5_1}_q8_1` sum fp16(d_x) · d_w · Σ q_x · q_w (+ m_w · s_x) over blocks. Here
 * in float64 from the weight's stored values and half scales.
 */
export function llamaCppMatMul(block: BlockReader, raw: Uint8Array, n: number, k: number, x: Float32Array, m: number): Float64Array {
  const v = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const half = (t: number) => halfToFloat(floatToHalf(t));
  const y = new Float64Array(m * n);
  for (let r = 0; r < m; r++) {
    for (let b = 0; b < k / 32; b++) {
      const xs = x.subarray(r * k + b * 32, r * k + b * 32 + 32);
      const amax = xs.reduce((a, t) => Math.max(a, Math.abs(t)), 0);
      const d = Math.fround(amax / 127);
      const id = d ? 1 / d : 0;
      const qx = Array.from(xs, (t) => Math.round(Math.fround(t * id)));
      const sx = half(Math.fround(d * qx.reduce((a, q) => a + q, 0)));
      for (let j = 0; j < n; j++) {
        const o = (j * (k / 32) + b) * block.bytes;
        const qw = block.values(v, o);
        let dot = 0;
        for (let e = 0; e < 32; e++) dot += qx[e] * qw[e];
        y[r * n + j] += half(d) * halfToFloat(v.getUint16(o, true)) * dot + (block.hasMin ? halfToFloat(v.getUint16(o + 2, true)) * sx : 0);
      }
    }
  }
  return y;
}

/**
 * One row of activations as llama.cpp's `block_q8_K` dequantizes (`quantize_row_q8_K_ref`): per
 * 256, m = the value of largest |x|, iscale = f32(−127 / m), q = min(127, round-half-even(f32(iscale · x))),
 * d = f32(1 / iscale); the values d · q (0 for an all-zero block).
 */
export function q8KValues(x: Float32Array): Float64Array {
  const out = new Float64Array(x.length);
  for (let b = 0; b < x.length / 256; b++) {
    const xs = x.subarray(b * 256, b * 256 + 256);
    let amax = 0;
    let max = 0;
    for (const v of xs) if (Math.abs(v) > amax) (amax = Math.abs(v)), (max = v);
    if (amax === 0) continue;
    const iscale = Math.fround(-127 / max);
    const d = Math.fround(1 / iscale);
    for (let e = 0; e < 256; e++) out[b * 256 + e] = d * Math.min(127, roundHalfEven(Math.fround(iscale * xs[e])));
  }
  return out;
}

function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * llama.cpp's matmul of K-quant weights (Q4_K, Q6_K: `ggml_vec_dot_{q4_K,q6_K}_q8_K`), y [m, n], from
 * the weights' float dequantization `w` [n, k] (gguf-py's, the fixture's `.ref` tensor) and the
 * activations as block_q8_K holds them (`q8KValues`): the dot products' integer sums times their
 * scales are Σ w · d_x·q_x exactly (w = d·sc·q − dmin·m is what both dequantize), here in float64.
 */
export function llamaCppMatMulK(w: Float32Array, n: number, k: number, x: Float32Array, m: number): Float64Array {
  const y = new Float64Array(m * n);
  for (let r = 0; r < m; r++) {
    const a = q8KValues(x.subarray(r * k, r * k + k));
    for (let j = 0; j < n; j++) {
      let dot = 0;
      for (let e = 0; e < k; e++) dot += w[j * k + e] * a[e];
      y[r * n + j] = dot;
    }
  }
  return y;
}
