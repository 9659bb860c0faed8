/**
 * The quantized side of the decoder graph: `com.microsoft.MatMulNBits` over a weight's blocks
 * (with llama.cpp's activation arithmetic on float32 CPU/WebGPU graphs: `halfActivationScales`),
 * and `com.microsoft.GatherBlockQuantized` rows of a quantized embedding, for a graph target
 * (graph-target.ts): scales, block offsets and outputs in the target's dtype, and on WebGPU no
 * zero-point input where the blocks use the default (its kernel needs zero points of the
 * scales' shape, which 4-bit bytes cannot have). At accuracy level 0 (graphs without llama.cpp's
 * arithmetic: CUDA's, float16 ones) block offsets are recentred into per-block zero points
 * (`recenteredZeroPoints`). On the float32 CPU graph, weights of one
 * layout that read one input run as one MatMulNBits over their stacked rows (`applyStacked`).
 */
import { ModelLoadError } from '../errors.ts';
import type { LazyQuantizedTensor, QuantizedTensor, QuantizedWeight } from './manifest.ts';
import { asFloat16, DataType, type OnnxGraphBuilder, type SegmentData } from './onnx-builder.ts';
import { ACCURACY_LEVEL, ggufTypesWithLayout, halfActivationScales } from './gguf/quantized-weights.ts';
import { CPU_TARGET, type GraphTarget } from './graph-target.ts';

/** The ONNX element type of a target's activations and float weights. */
export function floatType(t: GraphTarget): number {
  return t.dtype === 'float16' ? DataType.FLOAT16 : DataType.FLOAT;
}

/** A float weight (float32 values as `SegmentData`) stored in the target's dtype. */
export function floatWeight(g: OnnxGraphBuilder, t: GraphTarget, name: string, dims: number[], data: SegmentData): string {
  return t.dtype === 'float16' ? g.externalTensor(name, dims, DataType.FLOAT16, asFloat16(data)) : g.weight(name, dims, data);
}

/** A quantized weight's scales for the data file: its array, or the lazy weight's, asked for when written. */
function scalesData(w: MatMulWeight): SegmentData {
  return 'data' in w ? w.scales : () => w.loadScales();
}

/**
 * The quantized matmuls of one graph, at one accuracy level, each weight's activations scaled as
 * llama.cpp's format for it scales them (`halfActivationScales`, at level 4) in a float32 graph;
 * a float16 graph (CUDA) has none of that emulation: float16 scales, plain block sums. What an input's
 * activations need (their 32-blocks' scales, the half-scale rescaling, the block sums for block
 * offsets) is built once however many weights read it (q, k and v share theirs).
 */
export class QuantizedMatMul {
  private readonly built = new Map<string, string>();
  constructor(
    private readonly g: OnnxGraphBuilder,
    private readonly accuracyLevel = ACCURACY_LEVEL,
    private readonly target: GraphTarget = CPU_TARGET,
  ) {}

  /**
   * y = x · Wᵀ, x [..., K] → [..., N]. `rank` (2: [M, K]; 3: [1, T, K], the decoder's batch of
   * one) lets the half-scale rescaling restore x's shape from a constant; without it, from a
   * Shape node of x.
   */
  apply(input: string, name: string, w: MatMulWeight, rank?: ActivationRank): string {
    const llamaCppArithmetic = this.accuracyLevel === 4 && this.target.dtype === 'float32';
    if (llamaCppArithmetic && this.target.nativeKernels && 'ggufBlocks' in w && w.ggufBlocks && MATMULQ8K_FORMATS.has(w.format)) return matMulQ8K(this.g, input, name, w.shape, w.format, w.ggufBlocks);
    const llamaCppBlocks = llamaCppArithmetic && halfActivationScales(w);
    if (llamaCppBlocks && this.target.nativeKernels && runsOnMatMulQ8(w)) return matMulQ8(this.g, input, name, w);
    const x = llamaCppBlocks ? this.halfScales(input, w.shape[1], rank) : input;
    const kBlocks = w.shape[1] / w.blockSize;
    const sums = w.blockOffsets ? (llamaCppBlocks ? this.q8_1Sums(input, kBlocks) : this.blockSums(input, kBlocks, w.blockSize)) : null;
    return matMulNBits(this.g, this.target, x, name, w, this.accuracyLevel, sums, this.accuracyLevel === 0);
  }

  /**
   * y_i = x · W_iᵀ for weights read by the same input: on a float32 CPU graph, the weights of one
   * layout (`layoutKey`: bits, block size, format, K, zero points or not, block offsets or not) as
   * ONE MatMulNBits over their rows stacked [ΣN_i, K] and a Split of its output (one activation
   * quantization instead of one per weight; with block offsets, one offsets MatMul too); a weight
   * alone in its layout (Q4_K_M's Q6_K v beside Q4_K q and k) and every weight on other targets,
   * one `apply` each. The stacked blocks, scales, zero points and offsets are the weights' own,
   * concatenated (row-major [N, …] arrays, 4-bit zero points packed per row, so rows stack).
   * @returns the outputs in the order of `parts`.
   */
  applyStacked(input: string, name: string, parts: { name: string; w: QuantizedWeight }[], rank?: ActivationRank): string[] {
    if (parts.length < 2 || this.target.ep !== 'cpu' || this.target.dtype !== 'float32') return parts.map((p) => this.apply(input, p.name, p.w, rank));
    const groups = new Map<string, number[]>();
    parts.forEach(({ w }, i) => groups.set(layoutKey(w), [...(groups.get(layoutKey(w)) ?? []), i]));
    const out: string[] = new Array(parts.length);
    for (const members of groups.values()) {
      if (members.length === 1) {
        out[members[0]] = this.apply(input, parts[members[0]].name, parts[members[0]].w, rank);
        continue;
      }
      const ws = members.map((i) => parts[i].w);
      const stackedName = members.length === parts.length ? name : `${name}.part${members.join('_')}`;
      const y = this.apply(input, stackedName, stackedWeight(ws), rank);
      const ys = this.g.node('Split', [y, this.g.int64(ws.map((w) => w.shape[0]))], ws.length, { axis: -1 });
      members.forEach((i, j) => (out[i] = ys[j]));
    }
    return out;
  }

  /** `make()` once per key. */
  private once(key: string, make: () => string): string {
    let out = this.built.get(key);
    if (!out) this.built.set(key, (out = make()));
    return out;
  }

  /** x as 32-blocks [R, 32] and their scales d = max|x_block| / 127 [R, 1] (as llama.cpp's `quantize_row_q8_0`). */
  private blocks32(input: string): { blocks: string; amax: string; d: string } {
    const g = this.g;
    const blocks = this.once(`${input}/blocks32`, () => g.op('Reshape', [input, g.int64([-1, 32])]));
    const amax = this.once(`${input}/amax`, () => g.op('ReduceMax', [g.op('Abs', [blocks]), g.int64([-1])], { keepdims: 1 }));
    const d = this.once(`${input}/d`, () => g.op('Div', [amax, this.constant('q8_127', 127)]));
    return { blocks, amax, d };
  }

  /**
   * x with each 32-block multiplied by fp16(d) / d (1 for an all-zero block): quantizing the
   * result per block (accuracy level 4) gives the same int8 values as quantizing x, with scale
   * fp16(d) instead of d, as llama.cpp's `quantize_row_q8_0` stores it. 10 small nodes per input
   * of known `rank` (11 without: a Shape node to restore x's shape).
   */
  private halfScales(input: string, k: number, rank?: ActivationRank): string {
    return this.once(`${input}/half`, () => {
      const g = this.g;
      const { blocks, d } = this.blocks32(input);
      const half = g.op('Cast', [g.op('Cast', [d], { to: FLOAT16 })], { to: DataType.FLOAT });
      const factor = g.op('Div', [half, g.op('Max', [d, this.constant('q8_tiny', 1e-30)])]);
      const shape = rank === 3 ? g.int64([1, -1, k]) : rank === 2 ? g.int64([-1, k]) : g.op('Shape', [input]);
      return g.op('Reshape', [g.op('Mul', [blocks, factor]), shape]);
    });
  }

  /**
   * Per-block sums of x [M, K/32] as llama.cpp's `block_q8_1` holds them for the offset term of its
   * Q4_1/Q5_1 dot products (`quantize_row_q8_1`: s = fp16(d · Σ round(x / d)), d = max|x| / 127;
   * the dot adds m · s): the sum of the int8 activations, not of x.
   */
  private q8_1Sums(input: string, kBlocks: number): string {
    return this.once(`${input}/q8_1sums`, () => {
      const g = this.g;
      const { blocks, amax, d } = this.blocks32(input);
      const id = g.op('Div', [this.constant('q8_127', 127), g.op('Max', [amax, this.constant('q8_tiny', 1e-30)])]);
      const sumQ = g.op('ReduceSum', [this.round(g.op('Mul', [blocks, id])), g.int64([-1])], { keepdims: 1 });
      const s = g.op('Cast', [g.op('Cast', [g.op('Mul', [d, sumQ])], { to: FLOAT16 })], { to: DataType.FLOAT });
      return g.op('Reshape', [s, g.int64([-1, kBlocks])]);
    });
  }

  /**
   * Round to nearest: ONNX Round (ties to even) where the EP has it; WebGPU has no Round kernel
   * (ONNX Runtime 1.30 placed all 16 of a Q5_1 stories260K graph's on the CPU, with copies around
   * them), so there ⌊x + 0.5⌋, which differs from it only at exact .5 ties.
   */
  private round(x: string): string {
    const g = this.g;
    return this.target.ep === 'webgpu' ? g.op('Floor', [g.op('Add', [x, this.constant('half_0.5', 0.5)])]) : g.op('Round', [x]);
  }

  /** Per-block sums of x in float32 [M, K/bs]. */
  private blockSums(input: string, kBlocks: number, blockSize: number): string {
    return this.once(`${input}/sums${blockSize}`, () => {
      const g = this.g;
      const blocks = g.op('Reshape', [input, g.int64([-1, kBlocks, blockSize])]);
      return g.op('ReduceSum', [blocks, g.int64([-1])], { keepdims: 0 });
    });
  }

  private constant(name: string, value: number): string {
    return this.g.has(name) ? name : this.g.weight(name, [1], new Float32Array([value]));
  }
}

/**
 * Weights stacked by `stackedWeight`: blocks read in chunks as a lazy weight's, zero points,
 * block offsets and GGUF super-blocks (of in-memory weights) concatenated.
 */
interface StackedWeight extends Omit<LazyQuantizedTensor, 'zeroPoints' | 'blockOffsets'> {
  zeroPoints: Uint8Array | null;
  blockOffsets?: Float32Array;
  ggufBlocks?: Uint8Array;
}

/** What MatMulNBits reads: a quantized weight, or weights stacked into one. */
type MatMulWeight = QuantizedWeight | StackedWeight;

/** What weights must share to be stacked into one MatMulNBits (see `applyStacked`). */
function layoutKey(w: QuantizedWeight): string {
  return `${w.bits}/${w.blockSize}/${w.format}/${w.shape[1]}/${w.zeroPoints ? 'zp' : ''}/${w.blockOffsets ? 'offsets' : ''}`;
}

/**
 * Weights [N_i, K] of one layout (`layoutKey`) stacked into one [ΣN_i, K], read when the data file
 * is written: the blocks part after part, in chunks of at most `maxBytes`, and the scales
 * concatenated; zero points, block offsets and GGUF super-blocks (in-memory weights only have
 * them; rows are whole in each, so they stack) concatenated now.
 */
function stackedWeight(ws: QuantizedWeight[]): StackedWeight {
  const [first] = ws;
  const n = ws.reduce((a, w) => a + w.shape[0], 0);
  const layout = { shape: [n, first.shape[1]] as [number, number], bits: first.bits, blockSize: first.blockSize, format: first.format };
  const blocks = {
    async *blockChunks(maxBytes: number) {
      for (const w of ws) {
        if (!('data' in w)) {
          yield* w.blockChunks(maxBytes);
          continue;
        }
        const step = Math.max(1, maxBytes);
        for (let at = 0; at < w.data.length; at += step) yield w.data.subarray(at, Math.min(w.data.length, at + step));
      }
    },
    async loadScales() {
      return concat(await Promise.all(ws.map((w) => ('data' in w ? w.scales : w.loadScales()))), Float32Array);
    },
  };
  // Zero points and offsets exist on in-memory weights only (LazyQuantizedTensor has neither);
  // the blocks themselves stay where they are, read part after part when the file is written.
  const mem = ws as QuantizedTensor[];
  const zeroPoints = first.zeroPoints ? concat(mem.map((w) => w.zeroPoints!), Uint8Array) : null;
  const offsets = first.blockOffsets ? { blockOffsets: concat(mem.map((w) => w.blockOffsets!), Float32Array) } : {};
  const stored = mem.every((w) => w.ggufBlocks) ? { ggufBlocks: concat(mem.map((w) => w.ggufBlocks!), Uint8Array) } : {};
  return { ...layout, zeroPoints, ...offsets, ...stored, ...blocks };
}

/** Arrays of one type end to end. */
function concat<T extends Float32Array | Uint8Array>(parts: T[], Type: { new (n: number): T }): T {
  const out = new Type(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** An activation's rank where the graph knows it: 2 ([M, K]) or 3 ([1, T, K], batch of one). */
export type ActivationRank = 2 | 3;

/**
 * Whether the native addon's `ropewalk.MatMulQ8` computes this weight (native/src/gguf_matmul.h):
 * 4- or 8-bit blocks of 32 at the default zero point (8 / 128), no block offsets, activations in
 * llama.cpp's block_q8_0 (Q8_0, Q4_0, IQ4_NL, MXFP4; `halfActivationScales` says which, the caller
 * checks it).
 */
function runsOnMatMulQ8(w: MatMulWeight): boolean {
  return w.blockSize === 32 && (w.bits === 4 || w.bits === 8) && !w.zeroPoints && !w.blockOffsets;
}

/**
 * The GGUF types whose weights `runsOnMatMulQ8` and get llama.cpp's block_q8_0 activations
 * (`halfActivationScales`), read from the conversion's own layout table: Q8_0, Q4_0, IQ4_NL,
 * MXFP4. A file with none builds the CPU graph for the native backend too (bundle.ts `builtTarget`).
 */
export const MATMULQ8_GGUF_TYPES: ReadonlySet<string> = ggufTypesWithLayout(
  (l) => l.blockSize === 32 && l.zp === (l.bits === 4 ? 8 : 128) && !l.offsets && halfActivationScales({ blockSize: l.blockSize, format: l.format }),
);

/**
 * GGUF types whose block scales are the file's own fp16 d (widened to float32 on import, so fp16
 * holds them exactly): `ropewalk.MatMulQ8` takes these as float16, half the scale bytes a decode
 * step streams (Q4_0: 0.625 → 0.5625 bytes a weight, Q8_0: 1.125 → 1.0625, as in the file). The
 * others it runs keep float32: MXFP4's powers of two reach below fp16's range, IQ4_XS's d · sub-scale
 * and import-time round-to-nearest scales need more than fp16's 11 significant bits.
 */
export const HALF_SCALE_FORMATS: ReadonlySet<string> = new Set(['Q8_0', 'Q4_0', 'IQ4_NL']);

/**
 * y = x · Wᵀ by `ropewalk.MatMulQ8` over MatMulNBits' own blocks (the same initializer) and its
 * scales — as float16 for `HALF_SCALE_FORMATS`, else float32: llama.cpp's int8 dot products on
 * block_q8_0 activations, quantized in the kernel (no half-scale nodes).
 */
function matMulQ8(g: OnnxGraphBuilder, input: string, name: string, w: MatMulWeight): string {
  const [n, k] = w.shape;
  const b = blocksInitializer(g, name, w);
  const dims = [n * (k / w.blockSize)];
  const scales = HALF_SCALE_FORMATS.has(w.format)
    ? g.externalTensor(`${name}.scales`, dims, DataType.FLOAT16, asFloat16(scalesData(w)))
    : g.weight(`${name}.scales`, dims, scalesData(w));
  return g.op('MatMulQ8', [input, b, scales], { K: k, N: n, bits: w.bits, block_size: w.blockSize }, 'ropewalk');
}

/**
 * The formats `ropewalk.MatMulQ8K` multiplies on their GGUF super-blocks (`QuantizedTensor.ggufBlocks`),
 * with their ggml type ids (its `ggml_type` attribute): llama.cpp's own dot products on block_q8_K
 * activations (native/src/gguf_matmul.h), at the file's size (Q4_K 4.5 bits a weight, Q5_K 5.5,
 * Q6_K 6.56; their MatMulNBits forms take 6, 10 and 10 with float32 scales and offsets).
 */
export const MATMULQ8K_FORMATS: ReadonlyMap<string, number> = new Map([
  ['Q4_K', 12],
  ['Q5_K', 13],
  ['Q6_K', 14],
]);

/** The GGUF types the native CPU graph runs on the addon's kernels (`MATMULQ8_GGUF_TYPES` and `MATMULQ8K_FORMATS`). */
export const NATIVE_KERNEL_GGUF_TYPES: ReadonlySet<string> = new Set([...MATMULQ8_GGUF_TYPES, ...MATMULQ8K_FORMATS.keys()]);

/**
 * y = x · Wᵀ by `ropewalk.MatMulQ8K` over the weight's GGUF super-blocks (an initializer of their
 * own, uint8 [N, K/256, bytes]): llama.cpp's K-quant dot products, activations quantized in the kernel.
 */
function matMulQ8K(g: OnnxGraphBuilder, input: string, name: string, [n, k]: [number, number], format: string, superBlocks: Uint8Array): string {
  const blocks = ggufBlocksInitializer(g, name, [n, k], superBlocks);
  return g.op('MatMulQ8K', [input, blocks], { K: k, N: n, ggml_type: MATMULQ8K_FORMATS.get(format)!, row_groups: K_ROW_GROUP }, 'ropewalk');
}

/**
 * Rows a group of MatMulQ8K's and GatherQ8K's initializer holds (their `row_groups` attribute;
 * kKRowGroup in native/src/gguf_matmul.h): the four weight rows a decode step reads at once.
 */
export const K_ROW_GROUP = 4;

/**
 * A K-quant weight's super-blocks [N rows × kb, each `bytes` long, as the GGUF stores them] in the
 * native kernels' grouped layout (native/src/gguf_matmul.h KBlockIndex): rows 4g..4g+3 interleaved
 * by super-block — their block 0, then their block 1, … — and the last N mod 4 rows as they were.
 * One decode step then reads its four rows as one stream, not four short ones (a Q6_K classifier
 * 1,024 wide streams at 8 GB/s the GGUF's way on one thread of this 2-core machine, 16.6 grouped).
 * The same bytes, moved: a new array of blocks.length.
 * @throws ModelLoadError when blocks.length is not N · kb whole super-blocks.
 */
export function groupedSuperBlocks(blocks: Uint8Array, n: number, kb: number): Uint8Array {
  const bytes = blocks.length / (n * kb);
  if (!Number.isInteger(bytes) || bytes <= 0) throw new ModelLoadError(`super-blocks of ${blocks.length} bytes are not ${n} rows of ${kb} whole blocks`);
  const out = new Uint8Array(blocks.length);
  const grouped = n - (n % K_ROW_GROUP);
  for (let g = 0; g < grouped; g += K_ROW_GROUP) {
    for (let r = 0; r < K_ROW_GROUP; r++) {
      for (let i = 0; i < kb; i++) {
        const from = ((g + r) * kb + i) * bytes;
        out.set(blocks.subarray(from, from + bytes), (g * kb + K_ROW_GROUP * i + r) * bytes);
      }
    }
  }
  out.set(blocks.subarray(grouped * kb * bytes), grouped * kb * bytes);
  return out;
}

/** A weight's GGUF super-blocks uint8 [N, K/256, bytes] in the grouped layout, registered once (shared by GatherQ8K and MatMulQ8K). */
function ggufBlocksInitializer(g: OnnxGraphBuilder, name: string, [n, k]: [number, number], superBlocks: Uint8Array): string {
  const blocks = `${name}.gguf`;
  const kb = k / 256;
  if (!g.has(blocks)) g.externalTensor(blocks, [n, kb, superBlocks.length / (n * kb)], DataType.UINT8, () => groupedSuperBlocks(superBlocks, n, kb));
  return blocks;
}

/** ONNX TensorProto.DataType FLOAT16 (Cast's `to`). */
const FLOAT16 = DataType.FLOAT16;

/**
 * y = x · Wᵀ for a quantized W [N, K] (`com.microsoft.MatMulNBits`: B, scales, zero points as
 * initializers), plus `blockSums` [M, K/bs] · offsetsᵀ when W has block offsets; with `recenter`
 * the offsets are first moved into per-block zero points (`recenteredZeroPoints`), written so
 * when the data file is written.
 */
function matMulNBits(g: OnnxGraphBuilder, t: GraphTarget, input: string, name: string, w: MatMulWeight, accuracyLevel: number, blockSums: string | null, recenter: boolean): string {
  const [n, k] = w.shape;
  const kBlocks = k / w.blockSize;
  const b = blocksInitializer(g, name, w);
  const scales = floatWeight(g, t, `${name}.scales`, [n * kBlocks], scalesData(w));
  const inputs = [input, b, scales];
  const centred = recenter && 'data' in w && w.blockOffsets ? w : null;
  if (w.zeroPoints) {
    const zp = centred ? () => recenteredZeroPoints(centred).zeroPoints : w.zeroPoints;
    inputs.push(g.externalTensor(`${name}.zp`, [w.zeroPoints.length], DataType.UINT8, zp));
  }
  const y = g.op('MatMulNBits', inputs, { K: k, N: n, bits: w.bits, block_size: w.blockSize, accuracy_level: accuracyLevel }, 'com.microsoft');
  if (!w.blockOffsets) return y;
  if (!blockSums) throw new ModelLoadError(`weight ${name}: its block offsets need the input's block sums, which this graph did not build`);
  // Per-block offsets: y += (Σ of x over each block) · offsetsᵀ, [M, K/bs] · [K/bs, N].
  const offsets = w.blockOffsets;
  const offsetsT = floatWeight(g, t, `${name}.offsets.T`, [kBlocks, n], centred ? () => transpose(recenteredZeroPoints(centred).offsets, n, kBlocks) : transpose(offsets, n, kBlocks));
  return g.op('Add', [y, g.op('MatMul', [blockSums, offsetsT])]);
}

/**
 * A weight with block offsets (value = d·q + m, q ≥ 0, zero points 0: Q4_1, Q5_1, Q4_K, Q5_K) as
 * d·(q − z) + r, the same values: per block the zero point z = clamp(round(−m / d), 0, 2^bits − 1)
 * (0 where d = 0) and the residual offset r = m + z·d (|r| ≤ |d| / 2 unless clamped). Without it
 * MatMulNBits' sum Σ x·d·q and the offset term Σ_block(x)·m are each many times the result (q
 * centres near 16 on Q5_1) and cancel, so a float16 graph, which rounds each before they meet,
 * loses digits of the result; with it the offset term is small and MatMulNBits' own float32
 * accumulation does the cancelling. Zero points in MatMulNBits' uint8 layout (4-bit ones two a
 * byte per row, low nibble first); offsets float32 [N · K/bs] as `blockOffsets`.
 * @throws ModelLoadError when the weight has zero points other than 0 (no format makes them).
 */
export function recenteredZeroPoints(w: { shape: [number, number]; bits: 4 | 8; blockSize: number; scales: Float32Array; zeroPoints: Uint8Array | null; blockOffsets?: Float32Array }): { zeroPoints: Uint8Array; offsets: Float32Array } {
  const [n, k] = w.shape;
  const kBlocks = k / w.blockSize;
  const m = w.blockOffsets ?? new Float32Array(n * kBlocks);
  if (w.zeroPoints?.some((z) => z !== 0)) throw new ModelLoadError(`a ${w.bits}-bit weight with block offsets has non-zero zero points; only zero ones can be recentred`);
  const qMax = (1 << w.bits) - 1;
  const perRow = w.bits === 8 ? kBlocks : Math.ceil(kBlocks / 2);
  const zeroPoints = new Uint8Array(n * perRow);
  const offsets = new Float32Array(n * kBlocks);
  for (let r = 0; r < n; r++) {
    for (let b = 0; b < kBlocks; b++) {
      const i = r * kBlocks + b;
      const d = w.scales[i];
      const z = d === 0 ? 0 : Math.min(qMax, Math.max(0, Math.round(-m[i] / d)));
      offsets[i] = m[i] + z * d;
      if (w.bits === 8) zeroPoints[r * perRow + b] = z;
      else zeroPoints[r * perRow + (b >> 1)] |= z << (4 * (b & 1));
    }
  }
  return { zeroPoints, offsets };
}

/** The uint8 blocks [N, K/bs, bs·bits/8] of a quantized weight, registered once per weight (shared by Gather and MatMul). */
function blocksInitializer(g: OnnxGraphBuilder, name: string, w: MatMulWeight): string {
  const b = `${name}.q${w.bits}`;
  const data: SegmentData = 'data' in w ? w.data : { chunks: (maxBytes) => w.blockChunks(maxBytes) };
  if (!g.has(b)) g.externalTensor(b, [w.shape[0], w.shape[1] / w.blockSize, (w.blockSize * w.bits) / 8], DataType.UINT8, data);
  return b;
}

/**
 * Rows `ids` [1, T] of a quantized [V, D] weight as [1, T, D] in the target's dtype
 * (`com.microsoft.GatherBlockQuantized` over the same blocks MatMulNBits reads:
 * [V, D/bs, bs·bits/8], quantized along the last axis with one scale and zero point per block;
 * on WebGPU the zero points are left to the kernel's default, see the file comment). Blocks with
 * offsets (Q4_K, Q5_K, Q4_1, Q5_1, Q2_K: value = scale·q + offset) are gathered at zero point 0
 * and each row's block offsets, gathered beside them ([V, D/bs, 1]), added: f32(scale·q) + offset,
 * ggml's own dequantization order, so the rows are exact; on WebGPU (default zero points only)
 * at the default zero point z with offset + z·scale instead (within float rounding). On the native
 * CPU target, Q4_K, Q5_K and Q6_K rows come from their GGUF super-blocks (`ropewalk.GatherQ8K`:
 * ggml's dequantize_row_*), the initializer MatMulQ8K reads for a tied classifier.
 * @throws ModelLoadError on WebGPU for 4-bit blocks with their own zero points and no offsets
 *   (none of the formats has them: Q4_0 and rtn use the default 8).
 */
export function gatherBlockQuantized(g: OnnxGraphBuilder, t: GraphTarget, ids: string, name: string, w: QuantizedWeight): string {
  const [v, d] = w.shape;
  if (t.nativeKernels && 'ggufBlocks' in w && w.ggufBlocks && MATMULQ8K_FORMATS.has(w.format)) {
    // The native graph: rows dequantized from the GGUF super-blocks MatMulQ8K reads (one copy for a tied classifier).
    const blocks = ggufBlocksInitializer(g, name, w.shape, w.ggufBlocks);
    return g.op('Reshape', [g.op('GatherQ8K', [blocks, ids], { D: d, ggml_type: MATMULQ8K_FORMATS.get(w.format)!, row_groups: K_ROW_GROUP }, 'ropewalk'), g.int64([1, -1, d])]);
  }
  const kBlocks = d / w.blockSize;
  const blocks = blocksInitializer(g, name, w);
  const scales = floatWeight(g, t, `${name}.gather_scales`, [v, kBlocks, 1], scalesData(w));
  const attrs = { gather_axis: 0, quantize_axis: 2, block_size: w.blockSize, bits: w.bits };
  const withOffsets = (rows: string, offsets: Float32Array): string => {
    const o = floatWeight(g, t, `${name}.gather_offsets`, [v, kBlocks, 1], offsets);
    return g.op('Reshape', [g.op('Add', [rows, g.op('Gather', [o, ids], { axis: 0 })]), g.int64([1, -1, d])]);
  };
  if (t.ep === 'webgpu') {
    // WebGPU reads 4-bit zero points as packed nibbles of the scales' shape; the default ones
    // (8 for 4 bits, 128 for 8) are what it assumes without the input.
    if (w.blockOffsets) {
      const z = w.bits === 4 ? 8 : 128;
      const shifted = w.blockOffsets.map((m, b) => m + z * w.scales[b]); // scale·(q − z) + (offset + z·scale)
      return withOffsets(g.op('GatherBlockQuantized', [blocks, ids, scales], attrs, 'com.microsoft'), shifted);
    }
    if (w.zeroPoints !== null && w.bits === 4) throw new ModelLoadError(`weight ${name}: 4-bit blocks with their own zero points cannot be gathered on WebGPU`);
    const inputs = [blocks, ids, scales];
    if (w.zeroPoints !== null) inputs.push(g.externalTensor(`${name}.gather_zp`, [v, kBlocks, 1], DataType.UINT8, w.zeroPoints as Uint8Array));
    return g.op('Reshape', [g.op('GatherBlockQuantized', inputs, attrs, 'com.microsoft'), g.int64([1, -1, d])]);
  }
  const zeroPoints = () => {
    const zp = new Uint8Array(v * kBlocks);
    if (w.zeroPoints === null) zp.fill(w.bits === 4 ? 8 : 128);
    else if (w.bits === 8) zp.set(w.zeroPoints as Uint8Array);
    else {
      // MatMulNBits packs 4-bit zero points two a byte per row; here it is one per byte.
      const perRow = Math.ceil(kBlocks / 2);
      for (let r = 0; r < v; r++) for (let b = 0; b < kBlocks; b++) zp[r * kBlocks + b] = (w.zeroPoints[r * perRow + (b >> 1)] >> (4 * (b & 1))) & 15;
    }
    return zp;
  };
  const zpName = g.externalTensor(`${name}.gather_zp`, [v, kBlocks, 1], DataType.UINT8, zeroPoints);
  const rows = g.op('GatherBlockQuantized', [blocks, ids, scales, zpName], attrs, 'com.microsoft');
  if (w.blockOffsets) return withOffsets(rows, w.blockOffsets);
  return g.op('Reshape', [rows, g.int64([1, -1, d])]);
}

/**
 * [rows, cols] row-major → [cols, rows] (float32), in 64 × 64 tiles so reads and writes both stay
 * within a few cache lines (a row-by-row loop strides the output by `rows` floats on every write;
 * measured on [3072, 1024]: 152 → 123 ms, on the shared 2-core machine). The graph transposes only
 * small block offsets with it now; the bench's baseline import (every Linear weight transposed,
 * as bundle builder 5 and older stored them) does the old work with it.
 */
export function transpose(a: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(a.length);
  const B = 64;
  for (let r0 = 0; r0 < rows; r0 += B) {
    const r1 = Math.min(r0 + B, rows);
    for (let c0 = 0; c0 < cols; c0 += B) {
      const c1 = Math.min(c0 + B, cols);
      for (let r = r0; r < r1; r++) {
        for (let c = c0; c < c1; c++) out[c * rows + r] = a[r * cols + c];
      }
    }
  }
  return out;
}
