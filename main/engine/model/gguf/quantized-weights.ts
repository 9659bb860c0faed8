/**
 * GGUF quantized blocks → ONNX Runtime `MatMulNBits` blocks (`QuantizedTensor`), and
 * round-to-nearest quantization of float32 weights into the same layout (HF `--quantize`).
 *
 * MatMulNBits computes value = (q − zp) · scale per block. The mappings (definitions in quants.ts):
 *   Q8_0 → 8-bit, block 32: q = int8 + 128, scale d, zp 128            exact
 *   Q4_0 → 4-bit, block 32: q as stored (nibbles repacked), zp 8        exact
 *   Q5_0 → 8-bit, block 32: q = 5-bit value, zp 16                      exact
 *   Q6_K → 8-bit, block 16: q = 6-bit value, scale d·sc, zp 32          exact
 *   Q4_1, Q4_K → 4-bit, Q5_1, Q5_K → 8-bit, block 32: y = d·q + b as zero point 0, scale d and the
 *     offset b kept apart as `blockOffsets`; the graph adds Σ_block(x)·b, so the weights are exact
 *     (only the summation order differs). Not a float zero point −b/d: ONNX Runtime 1.30's CPU
 *     kernel takes those only for 4 bits and then computes in float32 at any accuracy level,
 *     40× slower than with integer zero points ([1, 1024] × [1024, 3072], 1 thread: 9.6 vs 0.23 ms).
 *   Q3_K → 4-bit, block 16: q = 3-bit value (low 2 bits | 3rd bit · 4), scale d·(sc − 32), zp 4   exact
 *   Q2_K → 4-bit, block 16: q = 2-bit value, scale d·sc, offset −dmin·mn (block offsets, as Q4_K)  exact
 *   IQ4_NL, IQ4_XS, MXFP4 → 8-bit, block 32: q = level + 128, zp 128, scale d (IQ4_NL), d·(sc − 32)
 *     (IQ4_XS), 2^(e − 128) (MXFP4)                                                                exact
 *     Their 16 levels are integers (IQ4: −127…113; MXFP4: E2M1 doubled, −12…12) but not evenly
 *     spaced, and MatMulNBits has no lookup table: as 4-bit blocks they would need a dequantizing
 *     Gather to float32 in the graph (the whole weight per step). 8-bit blocks hold every level
 *     exactly and run on the int8 kernel, at twice the 4-bit size (9 bits per weight with the
 *     float32 scale, against the file's 4.25–4.5).
 * Other types (F32/F16/BF16) are not mapped: the importer dequantizes them to float32.
 *
 * Activations (`halfActivationScales`): llama.cpp's CPU dot products quantize the activations
 * too, so a quantized file's logits there differ from its exact dequantization; MatMulNBits'
 * `accuracy_level` 4 does the same, per block of the weight's block size, with float32 scales.
 */
import { forEachK16, forEachLevel32, GGML, ggmlTypeName, halfToFloat, type GgmlType } from './quants.ts';
import {
  isQuantized,
  weightChunks,
  type LazyQuantizedTensor,
  type QuantizedTensor,
  type QuantizedWeight,
  type Tensor32,
  type WeightSource,
  type WeightSources,
} from '../manifest.ts';

/** MatMulNBits' `accuracy_level` for every quantized weight (see `halfActivationScales`). */
export const ACCURACY_LEVEL = 4;

/**
 * Whether a quantized weight's input activations get half-precision block scales, as llama.cpp's
 * `block_q8_0` / `block_q8_1` store them (`quantize_row_q8_0`: d = fp16(max|x| / 127),
 * q = round(x · 127 / max|x|)): the graph multiplies each 32-block by fp16(d) / d first, which leaves
 * q and turns the kernel's float32 scale into fp16(d).
 * Accuracy level 4: int8 activations, quantized per block of the weight's block size (scale =
 * max|x| / 127, round to nearest even; measured equal to that within float32 rounding on ONNX
 * Runtime 1.30's CPU kernel, 4- and 8-bit, M = 1 and 5); level 0 computes in float32 on dequantized
 * blocks. Every quantized weight runs at level 4 (int8 activations, as llama.cpp's CPU dot products); level 0
 * is ~30× slower for 8-bit blocks on ONNX Runtime 1.30's CPU kernel ([1, 1024] × [1024, 3072]: 87
 * vs 2.9 ms) and 1.6× slower for 4-bit (Qwen3-0.6B's 28-layer decode step: 71 vs 43.5 ms).
 * Half scales where llama.cpp's activation blocks are 32 wide with an fp16 scale (its `vec_dot_type`):
 *   Q8_0, Q5_0, Q4_0, IQ4_NL, MXFP4 (`block_q8_0`), Q5_1, Q4_1 (`block_q8_1`).
 *   Q6_K, Q5_K, Q4_K, Q3_K, Q2_K, IQ4_XS (`block_q8_K`: one float32 scale per 256) and rtn (no
 *   llama.cpp counterpart): the kernel's float32 scale per block.
 * Block offsets (Q4_1, Q5_1) multiply llama.cpp's `block_q8_1` sums s = fp16(d · Σq) of the int8
 * activations, built in the graph (Q4_K, Q5_K: float32 sums of x; llama.cpp's Q8_K `bsums` are per
 * 16 under one float32 scale per 256, which MatMulNBits' per-block scales cannot express).
 * Measured (stories260K fixtures; llama.cpp with a float32 KV cache and flash attention off, so
 * its attention computes in float32 as ours does): every quantized matmul alone matches llama.cpp
 * to 6e-6 in log-probabilities, against 2–7e-2 at level 0; whole models stay that close until the
 * first activation whose rounding is a near tie (float32 summation order differs), after which
 * the two int8 roundings part as two independent ones would. Greedy agreement over 10 prompts
 * (200 tokens each): mean 156 tokens on Q8_0, 148 on Q4_0, 155 on Q5_1 (level 0: 89 on Q4_0; Q5_1
 * with float32 block sums: 82).
 * Without the half scales (level 4, the kernel's float32 activation scales; 2026-12-02, issue 23):
 * mean 101.5 on Q8_0, 79.4 on Q4_0 (Q5_1 30.3, float32 block sums), under the agreement test's bars
 * of 150 and 100, and teacher-forced log-probabilities 3.5e-2 to 2.2e-1 off llama.cpp's at all 16
 * steps of Q8_0 (with them: 1e-6). So they stay, at 10 small nodes per matmul input, about a quarter of
 * a Qwen3-0.6B Q4_0 decode step's node time (ONNX Runtime's profiler: 1,155 nodes per step without
 * them, 2,285 with; MatMulNBits 76 % of the node time without, 56 % with).
 */
export function halfActivationScales(w: Pick<QuantizedWeight, 'blockSize' | 'format'>): boolean {
  return w.blockSize === 32 && HALF_SCALE_FORMATS.has(w.format);
}
const HALF_SCALE_FORMATS = new Set(['Q8_0', 'Q5_0', 'Q5_1', 'Q4_0', 'Q4_1', 'IQ4_NL', 'MXFP4']);

/** Canonical names of the weights that go through MatMul (Linear layers, MoE experts' too, and the classifier; not a MoE router). */
export function isLinearWeight(name: string): boolean {
  return /\.(self_attn\.([qkvo]|qkv)_proj|mlp\.(experts\.\d+\.)?(gate|up|down|gate_up)_proj)\.weight$/.test(name) || name === 'lm_head.weight';
}

const f32 = Math.fround;

/** Collects blocks of one weight: q values (one per element, unpacked), a scale and (when set) an offset per block. */
class BlockWriter {
  readonly q: Uint8Array;
  readonly scales: Float32Array;
  offsets: Float32Array | null = null;
  constructor(
    readonly n: number,
    readonly k: number,
    readonly blockSize: number,
  ) {
    this.q = new Uint8Array(n * k);
    this.scales = new Float32Array((n * k) / blockSize);
  }

  /** Block `b` as value = scale·q + offset, the offset applied apart (see `QuantizedTensor.blockOffsets`). */
  withOffset(b: number, scale: number, offset: number): void {
    this.offsets ??= new Float32Array(this.scales.length);
    this.scales[b] = scale;
    this.offsets[b] = offset;
  }

  /** The MatMulNBits tensor, `zp` every block's integer zero point (none stored when it is MatMulNBits' default). */
  build(bits: 4 | 8, format: string, zp: number): QuantizedTensor {
    const { n, k, blockSize } = this;
    const data = bits === 8 ? this.q : packNibbles(this.q);
    const zeroPoints = zp === (bits === 4 ? 8 : 128) ? null : uint8ZeroPoints(zp, n, k / blockSize, bits);
    return { shape: [n, k], bits, blockSize, data, scales: this.scales, zeroPoints, format, ...(this.offsets ? { blockOffsets: this.offsets } : {}) };
  }
}

/** Element pairs → bytes, element 2i in the low nibble (MatMulNBits' 4-bit packing). */
function packNibbles(q: Uint8Array): Uint8Array {
  const out = new Uint8Array(q.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = q[2 * i] | (q[2 * i + 1] << 4);
  return out;
}

/** The same integer zero point for every block, in MatMulNBits' packed uint8 layout. */
function uint8ZeroPoints(zp: number, n: number, kBlocks: number, bits: 4 | 8): Uint8Array {
  if (bits === 8) return new Uint8Array(n * kBlocks).fill(zp);
  return new Uint8Array(n * Math.ceil(kBlocks / 2)).fill(zp | (zp << 4));
}

/**
 * The MatMulNBits layout of each mapped GGUF type: bits, block size, integer zero point, whether
 * block offsets are kept. The one table: `quantizedFromGguf` builds its blocks from it and
 * `matMulNBitsBytes` sizes them from it (the header's memory estimate).
 * Tried and reverted (2026-12-02, issue 23): 8-bit blocks shifted to the default zero point (q + 128 − zp,
 * the same q − zp, no zero-point bytes to read): ONNX Runtime 1.30's level-4 kernel then no longer
 * matched llama.cpp on stories260K Q5_1 (greedy mean 154.9 → 99, teacher-forced 0 of 16 steps within
 * 1e-4, distances 3e-2..1.6e-1), so its arithmetic with a default zero point is not that with an explicit one.
 */
const MATMULNBITS_LAYOUT: Record<number, { bits: 4 | 8; blockSize: number; zp: number; offsets: boolean }> = {
  [GGML.Q8_0]: { bits: 8, blockSize: 32, zp: 128, offsets: false },
  [GGML.Q4_0]: { bits: 4, blockSize: 32, zp: 8, offsets: false },
  [GGML.Q4_1]: { bits: 4, blockSize: 32, zp: 0, offsets: true },
  [GGML.Q5_0]: { bits: 8, blockSize: 32, zp: 16, offsets: false },
  [GGML.Q5_1]: { bits: 8, blockSize: 32, zp: 0, offsets: true },
  [GGML.Q4_K]: { bits: 4, blockSize: 32, zp: 0, offsets: true },
  [GGML.Q5_K]: { bits: 8, blockSize: 32, zp: 0, offsets: true },
  [GGML.Q6_K]: { bits: 8, blockSize: 16, zp: 32, offsets: false },
  [GGML.Q2_K]: { bits: 4, blockSize: 16, zp: 0, offsets: true },
  [GGML.Q3_K]: { bits: 4, blockSize: 16, zp: 4, offsets: false },
  [GGML.IQ4_NL]: { bits: 8, blockSize: 32, zp: 128, offsets: false },
  [GGML.IQ4_XS]: { bits: 8, blockSize: 32, zp: 128, offsets: false },
  [GGML.MXFP4]: { bits: 8, blockSize: 32, zp: 128, offsets: false },
};

/** Names of the mapped GGUF types whose `MATMULNBITS_LAYOUT` entry satisfies `keep` (bits, block size, zero point, offsets; the name for `halfActivationScales`). */
export function ggufTypesWithLayout(keep: (layout: { bits: 4 | 8; blockSize: number; zp: number; offsets: boolean; format: string }) => boolean): Set<string> {
  const names = new Set<string>();
  for (const [id, layout] of Object.entries(MATMULNBITS_LAYOUT)) {
    const format = ggmlTypeName(Number(id));
    if (keep({ ...layout, format })) names.add(format);
  }
  return names;
}

/**
 * A GGUF tensor's raw blocks as a MatMulNBits weight, or null when its type has no mapping.
 * @param shape [N, K] row-major (blocks run along K).
 * @param opts.ggufBlocks keep the stored super-blocks too (`QuantizedTensor.ggufBlocks`) for the
 *   types the native graph reads that way (Q4_K, Q5_K, Q6_K): `raw` itself, not a copy.
 */
export function quantizedFromGguf(type: GgmlType, raw: Uint8Array, shape: number[], opts: { ggufBlocks?: boolean } = {}): QuantizedTensor | null {
  if (shape.length !== 2) return null;
  const layout = MATMULNBITS_LAYOUT[type.id];
  if (!layout) return null;
  const [n, k] = shape;
  const v = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const half = (o: number) => halfToFloat(v.getUint16(o, true));
  const blocks = (n * k) / type.blockSize;
  const w = new BlockWriter(n, k, layout.blockSize);
  const { zp } = layout; // signed levels are stored as level + zp
  switch (type.id) {
    case GGML.Q8_0: {
      for (let b = 0; b < blocks; b++) {
        const o = b * 34;
        w.scales[b] = half(o);
        for (let j = 0; j < 32; j++) w.q[b * 32 + j] = v.getInt8(o + 2 + j) + zp;
      }
      break;
    }
    case GGML.Q4_0:
    case GGML.Q4_1: {
      const hasMin = type.id === GGML.Q4_1;
      for (let b = 0; b < blocks; b++) {
        const o = b * type.blockBytes;
        const qs = o + (hasMin ? 4 : 2);
        for (let j = 0; j < 16; j++) {
          w.q[b * 32 + j] = raw[qs + j] & 15;
          w.q[b * 32 + j + 16] = raw[qs + j] >> 4;
        }
        if (hasMin) w.withOffset(b, half(o), half(o + 2));
        else w.scales[b] = half(o);
      }
      break;
    }
    case GGML.Q5_0:
    case GGML.Q5_1: {
      const hasMin = type.id === GGML.Q5_1;
      for (let b = 0; b < blocks; b++) {
        const o = b * type.blockBytes;
        const qh = v.getUint32(o + (hasMin ? 4 : 2), true);
        const qs = o + (hasMin ? 8 : 6);
        for (let j = 0; j < 16; j++) {
          w.q[b * 32 + j] = (raw[qs + j] & 15) | (((qh >>> j) & 1) << 4);
          w.q[b * 32 + j + 16] = (raw[qs + j] >> 4) | (((qh >>> (j + 16)) & 1) << 4);
        }
        if (hasMin) w.withOffset(b, half(o), half(o + 2));
        else w.scales[b] = half(o);
      }
      break;
    }
    case GGML.Q4_K:
    case GGML.Q5_K: {
      const five = type.id === GGML.Q5_K;
      for (let sb = 0; sb < blocks; sb++) {
        const o = sb * type.blockBytes;
        const d = half(o);
        const dmin = half(o + 2);
        const qh = o + 16;
        for (let sub = 0; sub < 8; sub++) {
          const j = sub >> 1;
          const hi = sub & 1;
          const ql = o + (five ? 48 : 16) + 32 * j;
          const [s, mn] = scaleMinK4(raw, o + 4, sub);
          const b = sb * 8 + sub;
          for (let l = 0; l < 32; l++) {
            let q = (raw[ql + l] >> (4 * hi)) & 15;
            if (five && (raw[qh + l] >> sub) & 1) q += 16;
            w.q[b * 32 + l] = q;
          }
          w.withOffset(b, f32(d * s), -f32(dmin * mn));
        }
      }
      break;
    }
    case GGML.Q6_K: {
      for (let sb = 0; sb < blocks; sb++) {
        const o = sb * 210;
        const d = half(o + 208);
        for (let n128 = 0; n128 < 2; n128++) {
          const ql = o + 64 * n128;
          const qh = o + 128 + 32 * n128;
          const out = sb * 256 + 128 * n128;
          for (let l = 0; l < 32; l++) {
            const h = raw[qh + l];
            w.q[out + l] = (raw[ql + l] & 15) | ((h & 3) << 4);
            w.q[out + l + 32] = (raw[ql + l + 32] & 15) | (((h >> 2) & 3) << 4);
            w.q[out + l + 64] = (raw[ql + l] >> 4) | (((h >> 4) & 3) << 4);
            w.q[out + l + 96] = (raw[ql + l + 32] >> 4) | (((h >> 6) & 3) << 4);
          }
          // 16-element sub-blocks: element e of this half uses scale index 8·n128 + e/16.
          for (let s = 0; s < 8; s++) w.scales[(out >> 4) + s] = f32(d * v.getInt8(o + 192 + 8 * n128 + s));
        }
      }
      break;
    }
    case GGML.Q2_K:
    case GGML.Q3_K: {
      const q2 = type.id === GGML.Q2_K;
      for (let sb = 0; sb < blocks; sb++) {
        forEachK16(type.id, raw, v, sb * type.blockBytes, (e, scale, min, q) => {
          const i = sb * 256 + e;
          w.q[i] = q2 ? q : q + zp;
          if (q2) w.withOffset(i >> 4, scale, -min);
          else w.scales[i >> 4] = scale;
        });
      }
      break;
    }
    case GGML.IQ4_NL:
    case GGML.IQ4_XS:
    case GGML.MXFP4: {
      for (let b = 0; b < blocks; b++) {
        forEachLevel32(type.id, raw, v, b * type.blockBytes, (e, scale, level) => {
          const i = b * type.blockSize + e;
          w.q[i] = level + zp;
          w.scales[i >> 5] = scale;
        });
      }
      break;
    }
    default:
      return null;
  }
  if ((w.offsets !== null) !== layout.offsets) throw new Error(`internal: ${type.name}'s conversion and its layout disagree on block offsets`);
  const built = w.build(layout.bits, type.name, zp);
  // The super-blocks as stored, for the native graph's ropewalk.MatMulQ8K (K a multiple of 256 by the type).
  return opts.ggufBlocks && KEEP_GGUF_BLOCKS.has(type.id) ? { ...built, ggufBlocks: raw } : built;
}

/** GGUF types whose stored blocks a `QuantizedTensor` keeps beside its MatMulNBits form (`ggufBlocks`). */
const KEEP_GGUF_BLOCKS = new Set<number>([GGML.Q4_K, GGML.Q5_K, GGML.Q6_K]);

/**
 * Bytes the MatMulNBits form of a [N, K] GGUF tensor of type `typeId` takes, without reading it
 * (what `quantizedBytes` gives for `quantizedFromGguf`'s result: packed data, float32 scales,
 * zero points unless MatMulNBits' default, float32 block offsets), and whether it keeps offsets
 * (an embedding's are then added to its gathered rows); null when the type has no mapping.
 */
export function matMulNBitsBytes(typeId: number, n: number, k: number): { bytes: number; offsets: boolean } | null {
  const m = MATMULNBITS_LAYOUT[typeId];
  if (!m) return null;
  const kBlocks = k / m.blockSize;
  const zeroPoints = m.zp === (m.bits === 4 ? 8 : 128) ? 0 : m.bits === 8 ? n * kBlocks : n * Math.ceil(kBlocks / 2);
  const bytes = (n * k * m.bits) / 8 + n * kBlocks * 4 + zeroPoints + (m.offsets ? n * kBlocks * 4 : 0);
  return { bytes, offsets: m.offsets };
}

/** Q4_K/Q5_K sub-block j's 6-bit scale and min (ggml `get_scale_min_k4`). */
function scaleMinK4(q: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 15) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}

/**
 * `--quantize`: every float32 Linear weight and the embedding, where K is a multiple of 32,
 * becomes round-to-nearest blocks (`quantizeRtnLazy`: quantized while the bundle is written, one
 * row chunk at a time, so a streamed source is never held whole); norms, biases and the rest
 * stay as they are.
 */
export function quantizeLinearWeights(weights: WeightSources, bits: 4 | 8): WeightSources {
  const out = new Map<string, WeightSource | QuantizedWeight>();
  for (const [name, t] of weights) {
    const q = (isLinearWeight(name) || name === 'model.embed_tokens.weight') && !isQuantized(t) ? quantizeRtnLazy(t, bits) : null;
    out.set(name, q ?? t);
  }
  return out;
}

/** Bytes of one row of blocks: K values at `bits` each. */
const rowBytes = (k: number, bits: 4 | 8) => (k * bits) / 8;

/**
 * Round-to-nearest symmetric block quantization of a float32 Linear weight [N, K] (K a multiple
 * of 32), block 32: scale = max|w| / 7 (4-bit, q ∈ −8…7 stored +8) or / 127 (8-bit, stored +128),
 * as onnxruntime-genai's builder and llama.cpp's Q4_0/Q8_0 quantizers do it.
 * @returns null when K is not a multiple of 32 (the weight then stays float32).
 */
export function quantizeRtn(w: Tensor32, bits: 4 | 8): QuantizedTensor | null {
  const [n, k] = w.shape;
  if (w.shape.length !== 2 || k % 32 !== 0) return null;
  const data = new Uint8Array(n * rowBytes(k, bits));
  const scales = new Float32Array((n * k) / 32);
  quantizeRtnBlocks(w.data, bits, data, scales);
  return { shape: [n, k], bits, blockSize: 32, data, scales, zeroPoints: null, format: 'rtn' };
}

/**
 * `quantizeRtn` done while the bundle is written: the blocks come in chunks of whole rows, each
 * quantized from the rows the source yields (a lazy source is read a chunk at a time), and the
 * scales are gathered on the way. Same bytes as `quantizeRtn`.
 * @returns null when the weight is not [N, K] with K a multiple of 32.
 */
export function quantizeRtnLazy(w: WeightSource, bits: 4 | 8): LazyQuantizedTensor | null {
  const [n, k] = w.shape;
  if (w.shape.length !== 2 || k % 32 !== 0) return null;
  let scales: Float32Array | null = null;
  /**
   * One pass over the rows, as many at a time as `maxBytes` of float32 holds (so the values read
   * are bounded, not only the blocks written): their blocks, in a buffer reused per chunk, and
   * all the scales.
   */
  async function* pass(maxBytes: number): AsyncGenerator<Uint8Array> {
    const rows = Math.max(1, Math.min(n, Math.floor(maxBytes / (4 * k))));
    const all = new Float32Array((n * k) / 32);
    const blocks = new Uint8Array(rows * rowBytes(k, bits));
    let row = 0;
    for await (const values of weightChunks(w, rows * k)) {
      const r = values.length / k;
      quantizeRtnBlocks(values, bits, blocks, all.subarray((row * k) / 32, ((row + r) * k) / 32));
      row += r;
      yield blocks.subarray(0, r * rowBytes(k, bits));
    }
    scales = all;
  }
  return {
    shape: [n, k],
    bits,
    blockSize: 32,
    zeroPoints: null,
    format: 'rtn',
    blockChunks: pass,
    async loadScales() {
      if (scales === null) for await (const _ of pass(32 * 1024 * 1024));
      return scales!;
    },
  };
}

/**
 * The kernel of `quantizeRtn`: whole blocks of 32 values of `values` into `blocks` (8-bit: one
 * byte each; 4-bit: element 2i in the low nibble) and one scale each into `scales`.
 */
function quantizeRtnBlocks(values: Float32Array, bits: 4 | 8, blocks: Uint8Array, scales: Float32Array): void {
  const qmax = bits === 4 ? 7 : 127;
  const zp = bits === 4 ? 8 : 128;
  const q = new Uint8Array(32);
  for (let b = 0; b < values.length / 32; b++) {
    const o = b * 32;
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[o + j]));
    const scale = f32(amax / qmax);
    scales[b] = scale;
    const inv = scale ? 1 / scale : 0;
    for (let j = 0; j < 32; j++) q[j] = Math.max(-qmax - 1, Math.min(qmax, Math.round(values[o + j] * inv))) + zp;
    if (bits === 8) blocks.set(q, o);
    else for (let j = 0; j < 16; j++) blocks[o / 2 + j] = q[2 * j] | (q[2 * j + 1] << 4);
  }
}
