/**
 * GGML tensor types: their block layout and exact dequantization to float32.
 *
 * Contract: `ggmlType(id)` describes a type (name, elements per block, bytes per block) or is
 * undefined for an id this file does not know; `dequantize(type, bytes, n)` turns `n` elements
 * (a multiple of the block size) stored as `type` into a Float32Array. Every product and sum is
 * rounded to float32 in the order the format's definition computes it (llama.cpp
 * `ggml-quants.c` `dequantize_row_*`, gguf-py `quants.py`), so the result equals the reference
 * bit for bit (test: quant-blocks.gguf's `.ref` tensors).
 *
 * Block layouts (little-endian; d, m, dmin are float16 unless said otherwise):
 *   Q8_0  32: d, int8 q[32]                          y = d·q
 *   Q4_0  32: d, q[16] nibbles (low: 0..15, high: 16..31)  y = d·(q − 8)
 *   Q4_1  32: d, m, q[16]                            y = d·q + m
 *   Q5_0  32: d, qh uint32 (5th bits), q[16]         y = d·(q − 16)
 *   Q5_1  32: d, m, qh, q[16]                        y = d·q + m
 *   Q4_K 256: d, dmin, scales[12] (8 × 6-bit scale + 6-bit min), q[128]; 8 sub-blocks of 32:
 *             y = (d·sc)·q − (dmin·mn)
 *   Q5_K 256: as Q4_K plus qh[32] (5th bits) before q[128]
 *   Q6_K 256: ql[128], qh[64], int8 scales[16], d (last); 16 sub-blocks of 16:
 *             y = (d·sc)·(q − 32)
 */

/** Type ids as GGUF stores them (ggml.h `enum ggml_type`). */
export const GGML = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14, BF16: 30,
} as const;

/** One supported tensor type. */
export interface GgmlType {
  id: number;
  name: string;
  /** Elements per block. */
  blockSize: number;
  /** Bytes per block. */
  blockBytes: number;
}

const QK_K = 256;
const TYPES: GgmlType[] = [
  { id: GGML.F32, name: 'F32', blockSize: 1, blockBytes: 4 },
  { id: GGML.F16, name: 'F16', blockSize: 1, blockBytes: 2 },
  { id: GGML.BF16, name: 'BF16', blockSize: 1, blockBytes: 2 },
  { id: GGML.Q8_0, name: 'Q8_0', blockSize: 32, blockBytes: 34 },
  { id: GGML.Q4_0, name: 'Q4_0', blockSize: 32, blockBytes: 18 },
  { id: GGML.Q4_1, name: 'Q4_1', blockSize: 32, blockBytes: 20 },
  { id: GGML.Q5_0, name: 'Q5_0', blockSize: 32, blockBytes: 22 },
  { id: GGML.Q5_1, name: 'Q5_1', blockSize: 32, blockBytes: 24 },
  { id: GGML.Q4_K, name: 'Q4_K', blockSize: QK_K, blockBytes: 144 },
  { id: GGML.Q5_K, name: 'Q5_K', blockSize: QK_K, blockBytes: 176 },
  { id: GGML.Q6_K, name: 'Q6_K', blockSize: QK_K, blockBytes: 210 },
];
const BY_ID = new Map(TYPES.map((t) => [t.id, t]));

/** Names of ggml types this file does not dequantize, for error messages. */
const OTHER_NAMES: Record<number, string> = {
  9: 'Q8_1', 10: 'Q2_K', 11: 'Q3_K', 15: 'Q8_K', 16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S', 20: 'IQ4_NL',
  21: 'IQ3_S', 22: 'IQ2_S', 23: 'IQ4_XS', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64', 29: 'IQ1_M', 34: 'TQ1_0',
  35: 'TQ2_0', 39: 'MXFP4',
};

/** The supported type with this id, or undefined. */
export function ggmlType(id: number): GgmlType | undefined {
  return BY_ID.get(id);
}

/** A type id's ggml name ('Q3_K', …), or `type <id>` for an unknown id. */
export function ggmlTypeName(id: number): string {
  return BY_ID.get(id)?.name ?? OTHER_NAMES[id] ?? `type ${id}`;
}

/** Names of the supported types, for messages. */
export const SUPPORTED_GGML_TYPES = TYPES.map((t) => t.name);

const f32 = Math.fround;
const halfTable = (() => {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    t[h] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return t;
})();

/** float16 bits → float32 value (exact). */
export function halfToFloat(h: number): number {
  return halfTable[h & 0xffff];
}

const f32Bits = new Uint32Array(1);
const f32View = new Float32Array(f32Bits.buffer);

/**
 * float32 value → float16 bits, rounded to nearest, ties to even (IEEE 754 binary16, as a
 * hardware cvt does it): |x| ≥ 65520 → ±Infinity, NaN → a quiet NaN, subnormals kept.
 */
export function floatToHalf(x: number): number {
  f32View[0] = x;
  const b = f32Bits[0];
  const sign = (b >>> 16) & 0x8000;
  const abs = b & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | (abs > 0x7f800000 ? 0x7e00 : 0x7c00);
  const e = (abs >>> 23) - 112; // float16 exponent field (127 − 15 = 112)
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal (or zero): the value in units of 2^-24, rounded half to even.
    if (e < -10) return sign;
    const m = (abs & 0x7fffff) | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rest = m & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | ((abs >>> 13) & 0x3ff);
  const rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++; // a carry rounds into the exponent (up to Infinity)
  return sign | h;
}

/** float32 values → float16 bits (`floatToHalf` each) into `out` (same length), returned. */
export function floatsToHalves(values: Float32Array, out = new Uint16Array(values.length)): Uint16Array {
  for (let i = 0; i < values.length; i++) out[i] = floatToHalf(values[i]);
  return out;
}

/**
 * Dequantizes `n` elements of `type` from `bytes` (`n / blockSize × blockBytes` bytes).
 * @returns float32 values in storage order (row-major, as the tensor's shape).
 * @throws RangeError when `n` is not a whole number of blocks or `bytes` is too short
 *   (callers check both first and report them as model errors).
 */
export function dequantize(type: GgmlType, bytes: Uint8Array, n: number): Float32Array {
  if (n % type.blockSize !== 0) throw new RangeError(`${n} elements are not a whole number of ${type.name} blocks of ${type.blockSize}`);
  const blocks = n / type.blockSize;
  if (bytes.byteLength < blocks * type.blockBytes) {
    throw new RangeError(`${type.name}: ${n} elements need ${blocks * type.blockBytes} bytes, found ${bytes.byteLength}`);
  }
  const y = new Float32Array(n);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const half = (o: number) => halfTable[v.getUint16(o, true)];
  switch (type.id) {
    case GGML.F32:
      for (let i = 0; i < n; i++) y[i] = v.getFloat32(i * 4, true);
      break;
    case GGML.F16:
      for (let i = 0; i < n; i++) y[i] = half(i * 2);
      break;
    case GGML.BF16: {
      const u = new Uint32Array(y.buffer);
      for (let i = 0; i < n; i++) u[i] = v.getUint16(i * 2, true) << 16;
      break;
    }
    case GGML.Q8_0:
      for (let b = 0; b < blocks; b++) {
        const o = b * 34;
        const d = half(o);
        for (let j = 0; j < 32; j++) y[b * 32 + j] = d * v.getInt8(o + 2 + j);
      }
      break;
    case GGML.Q4_0:
    case GGML.Q4_1: {
      const hasMin = type.id === GGML.Q4_1;
      for (let b = 0; b < blocks; b++) {
        const o = b * type.blockBytes;
        const d = half(o);
        const m = hasMin ? half(o + 2) : 0;
        const qs = o + (hasMin ? 4 : 2);
        for (let j = 0; j < 16; j++) {
          const q = bytes[qs + j];
          const lo = hasMin ? q & 15 : (q & 15) - 8;
          const hi = hasMin ? q >> 4 : (q >> 4) - 8;
          y[b * 32 + j] = hasMin ? f32(d * lo) + m : d * lo;
          y[b * 32 + j + 16] = hasMin ? f32(d * hi) + m : d * hi;
        }
      }
      break;
    }
    case GGML.Q5_0:
    case GGML.Q5_1: {
      const hasMin = type.id === GGML.Q5_1;
      for (let b = 0; b < blocks; b++) {
        const o = b * type.blockBytes;
        const d = half(o);
        const m = hasMin ? half(o + 2) : 0;
        const qh = v.getUint32(o + (hasMin ? 4 : 2), true);
        const qs = o + (hasMin ? 8 : 6);
        const bias = hasMin ? 0 : 16;
        for (let j = 0; j < 16; j++) {
          const q = bytes[qs + j];
          const lo = ((q & 15) | (((qh >>> j) & 1) << 4)) - bias;
          const hi = ((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - bias;
          y[b * 32 + j] = hasMin ? f32(d * lo) + m : d * lo;
          y[b * 32 + j + 16] = hasMin ? f32(d * hi) + m : d * hi;
        }
      }
      break;
    }
    case GGML.Q4_K:
    case GGML.Q5_K: {
      const five = type.id === GGML.Q5_K;
      for (let b = 0; b < blocks; b++) {
        const o = b * type.blockBytes;
        const d = half(o);
        const dmin = half(o + 2);
        const sc = o + 4;
        const qh = o + 16;
        let ql = o + (five ? 48 : 16);
        const out = b * QK_K;
        for (let j = 0; j < 4; j++) {
          // Two 32-element sub-blocks per 32 bytes of q: low nibbles, then high nibbles.
          for (let half2 = 0; half2 < 2; half2++) {
            const sub = 2 * j + half2;
            const [s, mn] = scaleMinK4(bytes, sc, sub);
            const d1 = f32(d * s);
            const m1 = f32(dmin * mn);
            const shift = 4 * half2;
            const hiBit = 2 * j + half2;
            for (let l = 0; l < 32; l++) {
              let q = (bytes[ql + l] >> shift) & 15;
              if (five && (bytes[qh + l] >> hiBit) & 1) q += 16;
              y[out + 64 * j + 32 * half2 + l] = f32(d1 * q) - m1;
            }
          }
          ql += 32;
        }
      }
      break;
    }
    case GGML.Q6_K:
      for (let b = 0; b < blocks; b++) {
        const o = b * 210;
        const d = half(o + 208);
        for (let n128 = 0; n128 < 2; n128++) {
          const ql = o + 64 * n128;
          const qh = o + 128 + 32 * n128;
          const sc = o + 192 + 8 * n128;
          const out = b * QK_K + 128 * n128;
          for (let l = 0; l < 32; l++) {
            const is = l >> 4;
            const h = bytes[qh + l];
            const q1 = ((bytes[ql + l] & 15) | ((h & 3) << 4)) - 32;
            const q2 = ((bytes[ql + l + 32] & 15) | (((h >> 2) & 3) << 4)) - 32;
            const q3 = ((bytes[ql + l] >> 4) | (((h >> 4) & 3) << 4)) - 32;
            const q4 = ((bytes[ql + l + 32] >> 4) | (((h >> 6) & 3) << 4)) - 32;
            y[out + l] = f32(d * v.getInt8(sc + is)) * q1;
            y[out + l + 32] = f32(d * v.getInt8(sc + is + 2)) * q2;
            y[out + l + 64] = f32(d * v.getInt8(sc + is + 4)) * q3;
            y[out + l + 96] = f32(d * v.getInt8(sc + is + 6)) * q4;
          }
        }
      }
      break;
    default:
      throw new RangeError(`no dequantization for ${type.name}`);
  }
  return y;
}

/** Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes at `o` (ggml `get_scale_min_k4`). */
function scaleMinK4(q: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 15) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}
