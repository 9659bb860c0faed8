/**
 * Builds the ONNX decoder graph of a Llama-family model (Llama, Mistral, Qwen2, Qwen3, llama2.c)
 * from its config and canonical weights. The graph follows the contract in `io-names.ts`:
 * RoPE rows come in as inputs (the engine owns positions and the RoPE cache), the KV cache is
 * ONNX Runtime's `com.microsoft.GroupQueryAttention` past/present pair sharing one buffer, and
 * only the last position's logits are computed (a prefill of T tokens costs D×V, not T×D×V).
 *
 * Linear weights stay in their source layout [out, in] and run as `com.microsoft.FusedMatMul`
 * with transB = 1 (ONNX Runtime's CPU kernel prepacks B either way: measured [1, 1024] ×
 * [3072, 1024] at 4.0 ms against 4.0 ms for MatMul over a pre-transposed copy, and 92 against
 * 94 ms for 256 rows), so import copies every float32 weight as it is, never transposing it.
 *
 * Sliding-window layers (`config.slidingWindow`, Mistral) set GroupQueryAttention's
 * `local_window_size` (`localWindow`); the KV cache layout is the same.
 *
 * Per layer (Touvron et al. 2023, "LLaMA"; Qwen2/3 add q/k/v bias and per-head q/k RMSNorm):
 *   h = RMSNorm(x); q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ (+b); [Qwen3] q,k = RMSNorm_head(q,k)
 *   q,k = RoPE(q,k) on the first R dims of each head, in the model's pair layout
 *   x = x + GQA(q,k,v)·Woᵀ;  x = x + (silu(h'·Wgᵀ) ⊙ h'·Wuᵀ)·Wdᵀ with h' = RMSNorm(x)
 */
import { ModelLoadError } from '../errors.ts';
import * as io from './io-names.ts';
import { isQuantized, layerWeight, type ModelConfig, type QuantizedWeight, type WeightSource, type WeightSources } from './manifest.ts';
import { DataType, OnnxGraphBuilder, type BuiltModel, type SegmentData } from './onnx-builder.ts';
import { ACCURACY_LEVEL, halfActivationScales } from './gguf/quantized-weights.ts';

/** File name of the external weight data, beside `model.onnx`. */
export const EXTERNAL_DATA_FILE = 'model.onnx.data';

/**
 * Builds the decoder graph from the weights' shapes; their values are read only when the data
 * file is written (`writeExternalData`), lazy ones in chunks, as they are stored.
 * @param config model shapes; `config.rope.layout` decides how q/k pairs are rotated.
 * @param weights canonical weights (see `ModelWeights`), float32 in memory or lazy (streamed into
 *   the data file in chunks when it is written: `writeExternalData`) or quantized
 *   (`QuantizedTensor`, or `LazyQuantizedTensor` quantized while written; run as
 *   `com.microsoft.MatMulNBits`); Linear weights [out, in].
 *   Quantized ones run at accuracy level 4 (int8 activations, as llama.cpp's dot products),
 *   with llama.cpp's half-precision activation scales where its format has them
 *   (`halfActivationScales`).
 * @returns the serialized model and its external data segments.
 * @throws ModelLoadError when a weight is missing, has the wrong shape, or is quantized where
 *   the graph needs float32 (norms, biases, the embedding).
 */
export function buildDecoderGraph(config: ModelConfig, weights: WeightSources): BuiltModel {
  const c = config;
  const g = new OnnxGraphBuilder(EXTERNAL_DATA_FILE);
  const D = c.hiddenSize;
  const Hq = c.numHeads;
  const Hkv = c.numKvHeads;
  const hd = c.headDim;
  const R = c.rope.rotaryDim;
  const get = (name: string, shape: number[]): WeightSource => requireWeight(weights, name, shape);
  const mm = new QuantizedMatMul(g);

  // 1. inputs
  const inputIds = g.input(io.INPUT_IDS, DataType.INT64, [1, 'T']);
  const cos = g.input(io.ROPE_COS, DataType.FLOAT, ['T', R / 2]);
  const sin = g.input(io.ROPE_SIN, DataType.FLOAT, ['T', R / 2]);
  const seqlensK = g.input(io.SEQLENS_K, DataType.INT32, [1]);
  const totalSeqLen = g.input(io.TOTAL_SEQ_LEN, DataType.INT32, []);

  // cos/sin [T, R/2] reshaped once to broadcast against q/k pairs [1, T, H, …].
  const pairShape = c.rope.layout === 'half' ? [1, -1, 1, 1, R / 2] : [1, -1, 1, R / 2, 1];
  const ropeShape = g.int64(pairShape);
  const cosB = g.op('Reshape', [cos, ropeShape]);
  const sinB = g.op('Reshape', [sin, ropeShape]);

  const shapeHeads = (h: number) => g.int64([1, 0, h, hd]);
  const shapeFlat = g.int64([1, 0, -1]);
  const shapeHq = shapeHeads(Hq);
  const shapeHkv = shapeHeads(Hkv);

  // 2. embedding [V, D] gathered by input_ids → [1, T, D]
  // A quantized embedding is gathered from its blocks (`GatherBlockQuantized`), and a tied
  // classifier multiplies by the same blocks: one copy of [V, D] instead of a float32 one.
  const embedName = 'model.embed_tokens.weight';
  const embedW = requireShape(weights, embedName, [c.vocabSize, D]);
  let x: string;
  if (isQuantized(embedW)) {
    if (!isGatherable(embedW)) throw new ModelLoadError(`weight ${embedName} is quantized as ${embedW.format}, which cannot be gathered; it must be float32`);
    x = gatherBlockQuantized(g, inputIds, embedName, embedW);
  } else {
    g.weight(embedName, [c.vocabSize, D], floatData(embedW));
    x = g.op('Gather', [embedName, inputIds], { axis: 0 });
  }

  const rmsNorm = (input: string, weightName: string, size: number): string => {
    const w = get(weightName, [size]);
    g.weight(weightName, [size], floatData(w));
    return g.op('SimplifiedLayerNormalization', [input, weightName], { axis: -1, epsilon: { float: c.rmsNormEps }, stash_type: 1 });
  };
  const matMul = (input: string, name: string, outDim: number, inDim: number): string => {
    const q = requireShape(weights, name, [outDim, inDim]);
    if (isQuantized(q)) return mm.apply(input, name, q);
    g.weight(name, [outDim, inDim], floatData(q));
    return g.op('FusedMatMul', [input, name], { transB: 1 }, 'com.microsoft');
  };
  const linear = (input: string, name: string, outDim: number, inDim: number, bias: boolean): string => {
    const y = matMul(input, `${name}.weight`, outDim, inDim);
    if (!bias) return y;
    const b = get(`${name}.bias`, [outDim]);
    g.weight(`${name}.bias`, [outDim], floatData(b));
    return g.op('Add', [y, `${name}.bias`]);
  };
  const splitR = R < hd ? g.int64([R, hd - R]) : null;
  const pairSplitShape = c.rope.layout === 'half' ? g.int64([1, 0, 0, 2, R / 2]) : g.int64([1, 0, 0, R / 2, 2]);
  const pairAxis = c.rope.layout === 'half' ? 3 : 4;
  const shapeRot = g.int64([1, 0, 0, R]);

  /** RoPE on heads [1, T, H, hd] (Su et al. 2021): (a, b) → (a·cos − b·sin, b·cos + a·sin). */
  const rope = (heads: string): string => {
    let rot = heads;
    let pass: string | null = null;
    if (splitR) [rot, pass] = g.node('Split', [heads, splitR], 2, { axis: 3 });
    const pairs = g.op('Reshape', [rot, pairSplitShape]);
    const [a, b] = g.node('Split', [pairs], 2, { axis: pairAxis, num_outputs: 2 });
    const ra = g.op('Sub', [g.op('Mul', [a, cosB]), g.op('Mul', [b, sinB])]);
    const rb = g.op('Add', [g.op('Mul', [b, cosB]), g.op('Mul', [a, sinB])]);
    const rotated = g.op('Reshape', [g.op('Concat', [ra, rb], { axis: pairAxis }), shapeRot]);
    return pass ? g.op('Concat', [rotated, pass], { axis: 3 }) : rotated;
  };

  // 3. layers
  for (let i = 0; i < c.numLayers; i++) {
    const L = (s: string) => layerWeight(i, s);
    const h = rmsNorm(x, L('input_layernorm.weight'), D);
    let q = linear(h, L('self_attn.q_proj'), Hq * hd, D, c.attentionBias);
    let k = linear(h, L('self_attn.k_proj'), Hkv * hd, D, c.attentionBias);
    const v = linear(h, L('self_attn.v_proj'), Hkv * hd, D, c.attentionBias);
    let qh = g.op('Reshape', [q, shapeHq]);
    let kh = g.op('Reshape', [k, shapeHkv]);
    if (c.qkNorm) {
      qh = rmsNorm(qh, L('self_attn.q_norm.weight'), hd);
      kh = rmsNorm(kh, L('self_attn.k_norm.weight'), hd);
    }
    q = g.op('Reshape', [rope(qh), shapeFlat]);
    k = g.op('Reshape', [rope(kh), shapeFlat]);
    const pk = g.input(io.pastKey(i), DataType.FLOAT, [1, Hkv, 'C', hd]);
    const pv = g.input(io.pastValue(i), DataType.FLOAT, [1, Hkv, 'C', hd]);
    const [attn] = g.node(
      'GroupQueryAttention',
      [q, k, v, pk, pv, seqlensK, totalSeqLen],
      [g.tmp('attn'), io.presentKey(i), io.presentValue(i)],
      { num_heads: Hq, kv_num_heads: Hkv, scale: { float: 1 / Math.sqrt(hd) }, do_rotary: 0, ...localWindow(c, i) },
      'com.microsoft',
    );
    g.output(io.presentKey(i), DataType.FLOAT, [1, Hkv, 'C', hd]);
    g.output(io.presentValue(i), DataType.FLOAT, [1, Hkv, 'C', hd]);
    // The new rows alone, for backends that write the KV cache themselves (session.ts 'rows').
    g.node('Identity', [k], [io.newKey(i)]);
    g.node('Identity', [v], [io.newValue(i)]);
    g.output(io.newKey(i), DataType.FLOAT, [1, 'T', Hkv * hd]);
    g.output(io.newValue(i), DataType.FLOAT, [1, 'T', Hkv * hd]);
    x = g.op('Add', [x, linear(attn, L('self_attn.o_proj'), D, Hq * hd, false)]);

    const h2 = rmsNorm(x, L('post_attention_layernorm.weight'), D);
    const gate = linear(h2, L('mlp.gate_proj'), c.intermediateSize, D, false);
    const up = linear(h2, L('mlp.up_proj'), c.intermediateSize, D, false);
    const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
    x = g.op('Add', [x, linear(act, L('mlp.down_proj'), D, c.intermediateSize, false)]);
  }

  // 4. last position only → final norm → logits [1, V]
  const last = g.op('Gather', [x, g.int64([-1], [])], { axis: 1 }); // [1, D]
  const normed = rmsNorm(last, 'model.norm.weight', D);
  if (c.tiedEmbeddings && !weights.has('lm_head.weight') && isQuantized(embedW)) {
    g.node('Identity', [mm.apply(normed, embedName, embedW)], [io.LOGITS]);
  } else if (c.tiedEmbeddings && !weights.has('lm_head.weight')) {
    g.node('Gemm', [normed, embedName], [io.LOGITS], { transB: 1 });
  } else if (isQuantized(requireShape(weights, 'lm_head.weight', [c.vocabSize, D]))) {
    g.node('Identity', [matMul(normed, 'lm_head.weight', c.vocabSize, D)], [io.LOGITS]);
  } else {
    const head = get('lm_head.weight', [c.vocabSize, D]);
    g.weight('lm_head.weight', [c.vocabSize, D], floatData(head));
    g.node('Gemm', [normed, 'lm_head.weight'], [io.LOGITS], { transB: 1 });
  }
  g.output(io.LOGITS, DataType.FLOAT, [1, c.vocabSize]);

  return g.build('ropewalk_decoder', { '': 18, 'com.microsoft': 1 }, `Ropewalk ${c.architecture} decoder`);
}

/** A float32 weight's bytes for the data file: its array, or chunks read when the file is written. */
function floatData(w: WeightSource): SegmentData {
  return 'data' in w ? w.data : { chunks: (maxBytes) => w.chunks(Math.max(1, Math.floor(maxBytes / 4))) };
}

/** A quantized weight's scales for the data file: its array, or the lazy weight's, asked for when written. */
function scalesData(w: QuantizedWeight): SegmentData {
  return 'data' in w ? w.scales : () => w.loadScales();
}

function requireShape(weights: WeightSources, name: string, shape: number[]): WeightSource | QuantizedWeight {
  const t = weights.get(name);
  if (!t) throw new ModelLoadError(`missing weight ${name}`);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new ModelLoadError(`weight ${name}: expected shape [${shape.join(', ')}], found [${t.shape.join(', ')}]`);
  }
  return t;
}

function requireWeight(weights: WeightSources, name: string, shape: number[]): WeightSource {
  const t = requireShape(weights, name, shape);
  if (isQuantized(t)) throw new ModelLoadError(`weight ${name} is quantized (${t.format}); the graph needs it as float32`);
  return t;
}

/**
 * A graph `y = x · Wᵀ` (x float32 [M, K] → y [M, N]) over a quantized W, as the decoder graph
 * multiplies it (or at another `accuracyLevel`: 0 computes in float32 on dequantized blocks), for
 * tests and measurements of the MatMulNBits mapping.
 */
export function matMulNBitsGraph(w: QuantizedWeight, accuracyLevel = ACCURACY_LEVEL): BuiltModel {
  const g = new OnnxGraphBuilder(EXTERNAL_DATA_FILE);
  g.input('x', DataType.FLOAT, ['M', w.shape[1]]);
  g.node('Identity', [new QuantizedMatMul(g, accuracyLevel).apply('x', 'w', w)], ['y']);
  g.output('y', DataType.FLOAT, ['M', w.shape[0]]);
  return g.build('matmulnbits', { '': 18, 'com.microsoft': 1 }, 'MatMulNBits probe');
}

/**
 * The quantized matmuls of one graph, at one accuracy level, each weight's activations scaled as
 * llama.cpp's format for it scales them (`halfActivationScales`, at level 4). What an input's
 * activations need (their 32-blocks' scales, the half-scale rescaling, the block sums for block
 * offsets) is built once however many weights read it (q, k and v share theirs).
 */
class QuantizedMatMul {
  private readonly built = new Map<string, string>();
  constructor(
    private readonly g: OnnxGraphBuilder,
    private readonly accuracyLevel = ACCURACY_LEVEL,
  ) {}

  /** y = x · Wᵀ, x [..., K] → [..., N]. */
  apply(input: string, name: string, w: QuantizedWeight): string {
    const llamaCppBlocks = this.accuracyLevel === 4 && halfActivationScales(w);
    const x = llamaCppBlocks ? this.halfScales(input) : input;
    const kBlocks = w.shape[1] / w.blockSize;
    const sums = w.blockOffsets ? (llamaCppBlocks ? this.q8_1Sums(input, kBlocks) : this.blockSums(input, kBlocks, w.blockSize)) : null;
    return matMulNBits(this.g, x, name, w, this.accuracyLevel, sums);
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
   * fp16(d) instead of d, as llama.cpp's `quantize_row_q8_0` stores it. 10 small ops per input;
   * measured 2.8 ms of a 34 ms Q4_0 decode step at Qwen3-0.6B's shapes (28 layers × 4 inputs, 1
   * thread; 31 ms without them).
   */
  private halfScales(input: string): string {
    return this.once(`${input}/half`, () => {
      const g = this.g;
      const { blocks, d } = this.blocks32(input);
      const half = g.op('Cast', [g.op('Cast', [d], { to: FLOAT16 })], { to: DataType.FLOAT });
      const factor = g.op('Div', [half, g.op('Max', [d, this.constant('q8_tiny', 1e-30)])]);
      return g.op('Reshape', [g.op('Mul', [blocks, factor]), g.op('Shape', [input])]);
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
      const sumQ = g.op('ReduceSum', [g.op('Round', [g.op('Mul', [blocks, id])]), g.int64([-1])], { keepdims: 1 });
      const s = g.op('Cast', [g.op('Cast', [g.op('Mul', [d, sumQ])], { to: FLOAT16 })], { to: DataType.FLOAT });
      return g.op('Reshape', [s, g.int64([-1, kBlocks])]);
    });
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

/** ONNX TensorProto.DataType FLOAT16 (Cast's `to`). */
const FLOAT16 = 10;

/**
 * y = x · Wᵀ for a quantized W [N, K] (`com.microsoft.MatMulNBits`: B, scales, zero points as
 * initializers), plus `blockSums` [M, K/bs] · offsetsᵀ when W has block offsets.
 */
function matMulNBits(g: OnnxGraphBuilder, input: string, name: string, w: QuantizedWeight, accuracyLevel: number, blockSums: string | null): string {
  const [n, k] = w.shape;
  const kBlocks = k / w.blockSize;
  const b = blocksInitializer(g, name, w);
  const scales = g.weight(`${name}.scales`, [n * kBlocks], scalesData(w));
  const inputs = [input, b, scales];
  if (w.zeroPoints) inputs.push(g.externalTensor(`${name}.zp`, [w.zeroPoints.length], DataType.UINT8, w.zeroPoints));
  const y = g.op('MatMulNBits', inputs, { K: k, N: n, bits: w.bits, block_size: w.blockSize, accuracy_level: accuracyLevel }, 'com.microsoft');
  if (!w.blockOffsets) return y;
  if (!blockSums) throw new Error(`${name}: block offsets need the input's block sums`);
  // Per-block offsets: y += (Σ of x over each block) · offsetsᵀ, [M, K/bs] · [K/bs, N].
  const offsetsT = g.weight(`${name}.offsets.T`, [kBlocks, n], transpose(w.blockOffsets, n, kBlocks));
  return g.op('Add', [y, g.op('MatMul', [blockSums, offsetsT])]);
}

/** The uint8 blocks [N, K/bs, bs·bits/8] of a quantized weight, registered once per weight (shared by Gather and MatMul). */
function blocksInitializer(g: OnnxGraphBuilder, name: string, w: QuantizedWeight): string {
  const b = `${name}.q${w.bits}`;
  const data: SegmentData = 'data' in w ? w.data : { chunks: (maxBytes) => w.blockChunks(maxBytes) };
  if (!g.has(b)) g.externalTensor(b, [w.shape[0], w.shape[1] / w.blockSize, (w.blockSize * w.bits) / 8], DataType.UINT8, data);
  return b;
}

/**
 * GroupQueryAttention's `local_window_size` for layer `i` of a sliding-window model: W itself,
 * the keys a query sees including its own (measured on ONNX Runtime 1.30's CPU kernel against the
 * reference's window mask, test/integration/sliding-window.test.ts: W − 1 is off by one key from
 * position W on); none for a full-attention layer. @throws ModelLoadError for a window under 2
 * (never tested on the kernel; no real model has one).
 */
export function localWindow(c: ModelConfig, i: number): { local_window_size?: number } {
  const w = c.slidingWindow?.[i] ?? 0;
  if (w === 0) return {};
  if (!Number.isInteger(w) || w < 2) throw new ModelLoadError(`layer ${i}'s sliding window ${w} is not supported: a window must hold at least 2 tokens`);
  return { local_window_size: w };
}

/** True when `GatherBlockQuantized` can read these blocks: no block offsets. */
export function isGatherable(w: QuantizedWeight): boolean {
  return !w.blockOffsets;
}

/**
 * Rows `ids` [1, T] of a quantized [V, D] weight as float32 [1, T, D] (`com.microsoft.
 * GatherBlockQuantized` over the same blocks MatMulNBits reads: [V, D/bs, bs·bits/8], quantized
 * along the last axis with one scale and zero point per block).
 */
function gatherBlockQuantized(g: OnnxGraphBuilder, ids: string, name: string, w: QuantizedWeight): string {
  const [v, d] = w.shape;
  const kBlocks = d / w.blockSize;
  const blocks = blocksInitializer(g, name, w);
  const scales = g.weight(`${name}.gather_scales`, [v, kBlocks, 1], scalesData(w));
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
  const rows = g.op('GatherBlockQuantized', [blocks, ids, scales, zpName], { gather_axis: 0, quantize_axis: 2, block_size: w.blockSize, bits: w.bits }, 'com.microsoft');
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
