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
 *   Q2_K 256: scales[16] (low nibble scale, high nibble min), q[64] (2 bits, 4 per byte), d, dmin;
 *             16 sub-blocks of 16: y = (d·sc)·q − (dmin·mn)
 *   Q3_K 256: hmask[32] (3rd bits), q[64] (low 2 bits), scales[12] (16 × 6-bit, packed), d;
 *             16 sub-blocks of 16: y = (d·(sc − 32))·(q − 4·!hbit)
 *   IQ4_NL 32: d, q[16] nibbles indexing KVALUES_IQ4NL     y = d·kv[q]
 *   IQ4_XS 256: d, scales_h uint16 (high 2 bits), scales_l[4] (low 4 bits), q[128]; 8 sub-blocks
 *             of 32: y = (d·(sc − 32))·kv[q]
 *   MXFP4 32: e (E8M0 exponent), q[16] nibbles indexing KVALUES_MXFP4 (E2M1 values doubled);
 *             y = kv[q]·2^(e − 128) (ggml `GGML_E8M0_TO_FP32_HALF`: the halved scale undoes the doubling)
 * The sub-block order of Q2_K and Q3_K: per 128 elements, 32 bytes of q hold 4 shifts (0, 2, 4,
 * 6 bits) × 32 elements, each 32 split in two sub-blocks of 16 (ggml `dequantize_row_q2_K`/`q3_K`).
 */

/** Type ids as GGUF stores them (ggml.h `enum ggml_type`). */
export const GGML = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13, Q6_K: 14,
  IQ4_NL: 20, IQ4_XS: 23, BF16: 30, MXFP4: 39,
} as const;

/** IQ4_NL / IQ4_XS's 16 non-linear levels (ggml-common.h `kvalues_iq4nl`): integers, times the block's scale. */
export const KVALUES_IQ4NL = Int8Array.from([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);
/** MXFP4's E2M1 values (0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives) doubled to integers (ggml-common.h `kvalues_mxfp4`). */
export const KVALUES_MXFP4 = Int8Array.from([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);

/**
 * An E8M0 exponent byte as float32 2^(e − 128), half the OCP scale 2^(e − 127) (ggml
 * `GGML_E8M0_TO_FP32_HALF`: e < 2 gives the subnormals 2^-128, 2^-127; e = 255 gives 2^127, not NaN).
 */
export function e8m0Half(e: number): number {
  return 2 ** ((e & 255) - 128);
}

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
  { id: GGML.Q2_K, name: 'Q2_K', blockSize: QK_K, blockBytes: 84 },
  { id: GGML.Q3_K, name: 'Q3_K', blockSize: QK_K, blockBytes: 110 },
  { id: GGML.IQ4_NL, name: 'IQ4_NL', blockSize: 32, blockBytes: 18 },
  { id: GGML.IQ4_XS, name: 'IQ4_XS', blockSize: QK_K, blockBytes: 136 },
  { id: GGML.MXFP4, name: 'MXFP4', blockSize: 32, blockBytes: 17 },
];
const BY_ID = new Map(TYPES.map((t) => [t.id, t]));

/** Names of ggml types this file does not dequantize, for error messages. */
const OTHER_NAMES: Record<number, string> = {
  9: 'Q8_1', 15: 'Q8_K', 16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S',
  21: 'IQ3_S', 22: 'IQ2_S', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64', 29: 'IQ1_M', 34: 'TQ1_0',
  35: 'TQ2_0',
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
    case GGML.Q2_K:
    case GGML.Q3_K:
      for (let b = 0; b < blocks; b++) {
        const o = b * type.blockBytes;
        forEachK16(type.id, bytes, v, o, (e, scale, min, q) => {
          y[b * QK_K + e] = f32(scale * q) - min;
        });
      }
      break;
    case GGML.IQ4_NL:
    case GGML.MXFP4:
    case GGML.IQ4_XS:
      for (let b = 0; b < blocks; b++) {
        forEachLevel32(type.id, bytes, v, b * type.blockBytes, (e, scale, level) => {
          y[b * type.blockSize + e] = scale * level;
        });
      }
      break;
    default:
      throw new RangeError(`no dequantization for ${type.name}`);
  }
  return y;
}

/**
 * The 16 sub-blocks of 16 of one Q2_K or Q3_K super-block at byte `o`, element by element:
 * `visit(e, scale, min, q)` with e the element's index in the super-block (0..255), scale and min
 * float32 (min 0 for Q3_K), q the integer value (Q2_K: 0..3; Q3_K: −4..3) so that y = f32(scale·q) − min.
 * Shared by the dequantization and the MatMulNBits mapping, which need the same unpacking.
 */
export function forEachK16(
  typeId: number,
  bytes: Uint8Array,
  v: DataView,
  o: number,
  visit: (e: number, scale: number, min: number, q: number) => void,
): void {
  const q2 = typeId === GGML.Q2_K;
  const d = halfTable[v.getUint16(o + (q2 ? 80 : 108), true)];
  const dmin = q2 ? halfTable[v.getUint16(o + 82, true)] : 0;
  const qs = o + (q2 ? 16 : 32);
  for (let n = 0; n < 2; n++) {
    for (let j = 0; j < 4; j++) {
      const shift = 2 * j;
      for (let h = 0; h < 2; h++) {
        const is = 8 * n + 2 * j + h;
        let scale: number;
        let min = 0;
        if (q2) {
          const sc = bytes[o + is];
          scale = f32(d * (sc & 15));
          min = f32(dmin * (sc >> 4));
        } else {
          scale = f32(d * (q3Scale(bytes, o + 96, is) - 32));
        }
        for (let l = 16 * h; l < 16 * h + 16; l++) {
          let q = (bytes[qs + 32 * n + l] >> shift) & 3;
          if (!q2 && !((bytes[o + l] >> (4 * n + j)) & 1)) q -= 4;
          visit(128 * n + 32 * j + l, scale, min, q);
        }
      }
    }
  }
}

/** Q3_K sub-block `is`'s 6-bit scale from the 12 packed bytes at `o`: low 4 bits in bytes 0..7, high 2 in bytes 8..11. */
function q3Scale(b: Uint8Array, o: number, is: number): number {
  const lo = is < 8 ? b[o + is] & 15 : b[o + is - 8] >> 4;
  const hi = (b[o + 8 + (is & 3)] >> (2 * (is >> 2))) & 3;
  return lo | (hi << 4);
}

/**
 * One IQ4_NL / MXFP4 block of 32 or IQ4_XS super-block of 256 at byte `o`, element by element:
 * `visit(e, scale, level)` with e the element's index in the block, scale float32 and level the
 * table's integer, so that y = scale·level (exact in float32: level has at most 7 significant bits).
 * Shared by the dequantization and the MatMulNBits mapping.
 */
export function forEachLevel32(typeId: number, bytes: Uint8Array, v: DataView, o: number, visit: (e: number, scale: number, level: number) => void): void {
  const subBlock = (e0: number, scale: number, qs: number, table: Int8Array) => {
    for (let j = 0; j < 16; j++) {
      visit(e0 + j, scale, table[bytes[qs + j] & 15]);
      visit(e0 + j + 16, scale, table[bytes[qs + j] >> 4]);
    }
  };
  if (typeId === GGML.IQ4_NL) subBlock(0, halfTable[v.getUint16(o, true)], o + 2, KVALUES_IQ4NL);
  else if (typeId === GGML.MXFP4) subBlock(0, e8m0Half(bytes[o]), o + 1, KVALUES_MXFP4);
  else {
    const d = halfTable[v.getUint16(o, true)];
    const high = v.getUint16(o + 2, true);
    for (let ib = 0; ib < 8; ib++) {
      const ls = ((bytes[o + 4 + (ib >> 1)] >> (4 * (ib & 1))) & 15) | (((high >> (2 * ib)) & 3) << 4);
      subBlock(32 * ib, f32(d * (ls - 32)), o + 8 + 16 * ib, KVALUES_IQ4NL);
    }
  }
}

/** Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes at `o` (ggml `get_scale_min_k4`). */
function scaleMinK4(q: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 15) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}
