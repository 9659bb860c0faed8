/**
 * Builds the ONNX decoder graph of a Llama-family model (Llama, Mistral, Qwen2, Qwen3, llama2.c)
 * from its config and canonical weights. The graph follows the contract in `io-names.ts`:
 * the RoPE cache comes in whole as inputs (the engine owns it; the graph gathers the step's rows at
 * positions it derives from seqlens_k, `stepRopeRows`), the KV cache is
 * ONNX Runtime's `com.microsoft.GroupQueryAttention` past/present pair sharing one buffer, and
 * only the last position's logits are computed (a prefill of T tokens costs D×V, not T×D×V).
 *
 * Linear weights stay in their source layout [out, in] and run as `com.microsoft.FusedMatMul`
 * with transB = 1 (ONNX Runtime's CPU kernel prepacks B either way: measured [1, 1024] ×
 * [3072, 1024] at 4.0 ms against 4.0 ms for MatMul over a pre-transposed copy, and 92 against
 * 94 ms for 256 rows), so import copies every float32 weight as it is, never transposing it.
 * The graph target (graph-target.ts) changes that where an EP needs it: WebGPU has no
 * FusedMatMul, so its graph stores linear weights transposed [in, out] (transposed as they are
 * written) under MatMul. A float16 target (CUDA) is mixed precision: float16 where the bytes or
 * the kernels are (float weights and the matmuls over them, GroupQueryAttention's q/k/v, output
 * and KV cache: CUDA has no float32 GroupQueryAttention), float32 for the rest, the "spine": the
 * embedding rows, residual stream, RMSNorms (float32 weights), RoPE, the gated activation,
 * quantized matmuls (MatMulNBits on float32 activations with float32 scales) and the classifier
 * (a float weight's Gemm on a float32 Cast of it), so the logits are float32 from end to end. Each
 * part was measured by promoting it alone to float32 with CUDA's rounding on the CPU EP
 * (test/helpers/cuda-arithmetic.ts), stories260K and its Q8_0 / Q4_0 / Q5_1 files, max |Δ log p|
 * over the float32 top-8, 64 steps: all float16 3.05 / 3.55 / 4.79 / 3.51e-2; the spine (RoPE in
 * it: 4.74e-2 on Q4_0 without) 2.04 / 2.02 / 1.55 / 2.47e-2; quantized matmuls on float32
 * activations 1.19 / 1.33 / 1.54e-2 (GGUF); the classifier in float32 1.54e-2 (stories260K); the
 * float16 KV cache alone, all else float32, 1.39 / 0.87 / 1.50 / 1.29e-2.
 * That last variant is a graph of its own on the CPU (`GraphTarget.kvDtype` float16 under float32
 * activations, the KV cache setting): q/k/v (and attention sinks) are cast to float16 before
 * GroupQueryAttention and its output back to float32; everything else is the float32 graph, native
 * kernels included, over the same initializers in the same order, so both graphs read one data file
 * (bundle.ts writes them side by side).
 *
 * The native CPU target (`nativeKernels`) runs a float classifier (one row: the last position) as
 * the addon's `ropewalk.MatMulF32` (native/src/float_matmul.h) over the same [V, D] weight: no
 * prepacked copy beside it (ONNX Runtime's Gemm keeps one, so a tied embedding was held twice), and
 * a faster decode step (docs/benchmarks.md). Float linears stay on FusedMatMul: MLAS prepacks their
 * B once, which a prefill needs (on MatMulF32, FusedMatMul through InvokeOp packed B on every call:
 * prefill 0.88×).
 *
 * On the CPU float32 target, quantized q/k/v (and gate/up) of one layout (zero points and block
 * offsets included) run as one stacked MatMulNBits, split after (`QuantizedMatMul.applyStacked`):
 * one activation quantization for the three (two) instead of one each; one of another layout
 * (Q4_K_M's Q6_K v) runs alone.
 *
 * Sliding-window layers (`config.slidingWindow`, Mistral, Gemma) set GroupQueryAttention's
 * `local_window_size` (`localWindow`); their KV buffers ([1, Hkv, C_window, headDim]) hold only
 * the last rows, with GroupQueryAttention lengths of their own (`seqlens_k_window`,
 * `total_seq_len_window`: cache/kv-window.ts). Family variants are
 * small named steps in block-variants.ts (Gemma 2/3: embedding scale, norms after attention and
 * MLP, GELU-tanh, q·k scale and soft-caps); a model whose sliding layers have a RoPE of their own
 * (`config.localRope`, Gemma 3) takes a RoPE cache [C_rope, R], global pairs then local ones. Attention
 * sinks (`config.attentionSinks`, gpt-oss) are GroupQueryAttention's `head_sink` input.
 * A Mixture-of-Experts layer (`config.moe`, Qwen3-MoE) has moe-block.ts's router and expert
 * dispatch in place of the dense MLP.
 *
 * Per layer (Touvron et al. 2023, "LLaMA"; Qwen2/3 add q/k/v bias and per-head q/k RMSNorm):
 *   h = RMSNorm(x); q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ (+b); [Qwen3] q,k = RMSNorm_head(q,k)
 *   q,k = RoPE(q,k) on the first R dims of each head, in the model's pair layout
 *   x = x + GQA(q,k,v)·Woᵀ;  x = x + (silu(h'·Wgᵀ) ⊙ h'·Wuᵀ)·Wdᵀ with h' = RMSNorm(x)
 */
import { ModelLoadError } from '../errors.ts';
import * as io from './io-names.ts';
import { isQuantized, layerWeight, ropeColumns, weightValues, type ModelConfig, type QuantizedWeight, type WeightSource, type WeightSources } from './manifest.ts';
import { DataType, OnnxGraphBuilder, type BuiltModel, type SegmentData } from './onnx-builder.ts';
import { ACCURACY_LEVEL } from './gguf/quantized-weights.ts';
import { CPU_TARGET, emulatesLlamaCpp, halfKvOnly, type GraphTarget } from './graph-target.ts';
import { attentionAttributes, attentionSinkInputs, gatedActivation, scaleEmbedding, softcapLogits } from './block-variants.ts';
import { moeBlock, type MoeContext } from './moe-block.ts';
import { floatType, floatWeight, gatherBlockQuantized, QuantizedMatMul, transpose } from './quantized-matmul.ts';

export { transpose } from './quantized-matmul.ts';
export { localWindow } from './block-variants.ts';

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
 *   (`halfActivationScales`), in a float32 graph; at level 0 on float32 activations and scales
 *   in a float16 one, block offsets recentred (quantized-matmul.ts `recenteredZeroPoints`).
 * @param target the EP and dtype the graph is for (`CPU_TARGET`: the graph every bundle had before
 *   targets, byte for byte).
 * @returns the serialized model and its external data segments.
 * @throws ModelLoadError when a weight is missing, has the wrong shape, or is quantized where
 *   the graph needs float32 (norms, biases, the embedding).
 */
export function buildDecoderGraph(config: ModelConfig, weights: WeightSources, target: GraphTarget = CPU_TARGET): BuiltModel {
  const c = config;
  const g = new OnnxGraphBuilder(EXTERNAL_DATA_FILE);
  const D = c.hiddenSize;
  const Hq = c.numHeads;
  const Hkv = c.numKvHeads;
  const hd = c.headDim;
  const R = c.rope.rotaryDim;
  const get = (name: string, shape: number[]): WeightSource => requireWeight(weights, name, shape);
  // A float16 or CUDA graph multiplies its activations by the dequantized blocks (accuracy level
  // 0), as ONNX Runtime's CUDA MatMulNBits does; llama.cpp's int8 activations are a CPU affair.
  const F = floatType(target);
  const half = target.dtype === 'float16';
  // Mixed precision (see the file comment): a float16 graph keeps float32 everywhere but in its
  // float-weight matmuls, attention and KV cache; quantized matmuls run on float32 activations.
  const spine: GraphTarget = half ? { ep: target.ep, dtype: 'float32' } : target; // a float32 target keeps its native kernels
  const mm = new QuantizedMatMul(g, emulatesLlamaCpp(target) ? ACCURACY_LEVEL : 0, half ? spine : target);
  const halfValues = new Set<string>();
  const casts = new Map<string, string>();
  /** `v` as float16 in a float16 graph (one Cast per value), else `v`. */
  const toHalf = (v: string): string => {
    if (!half || halfValues.has(v)) return v;
    let h = casts.get(v);
    if (!h) casts.set(v, (h = g.op('Cast', [v], { to: F })));
    halfValues.add(h);
    return h;
  };
  /** A float16 value `v` as float32 (one Cast per value); float32 values as they are. */
  const toSpine = (v: string): string => {
    if (!halfValues.has(v)) return v;
    let s = casts.get(v);
    if (!s) casts.set(v, (s = g.op('Cast', [v], { to: DataType.FLOAT })));
    return s;
  };
  const halfValue = (v: string) => (half && halfValues.add(v), v);
  const float = (name: string, dims: number[], data: SegmentData) => floatWeight(g, target, name, dims, data);
  // Float16 KV under float32 activations (graph-target.ts `halfKvOnly`): attention runs in
  // float16, q/k/v cast to it and its output cast back (ONNX Runtime's CPU GroupQueryAttention
  // types q/k/v, past/present and output by one T).
  const kvOnlyHalf = halfKvOnly(target);
  const KV = half || kvOnlyHalf ? DataType.FLOAT16 : DataType.FLOAT;
  /** A float32 value of the attention's inputs in the KV dtype. */
  const toKv = (v: string): string => (kvOnlyHalf ? g.op('Cast', [v], { to: DataType.FLOAT16 }) : toHalf(v));

  // 1. inputs; the step's RoPE rows [1, T, R/2] gathered from the whole cache at its positions
  const inputIds = g.input(io.INPUT_IDS, DataType.INT64, [1, 'T']);
  const cosCache = g.input(io.ROPE_COS_CACHE, DataType.FLOAT, ['C_rope', ropeColumns(c)]);
  const sinCache = g.input(io.ROPE_SIN_CACHE, DataType.FLOAT, ['C_rope', ropeColumns(c)]);
  const seqlensK = g.input(io.SEQLENS_K, DataType.INT32, [1]);
  const totalSeqLen = g.input(io.TOTAL_SEQ_LEN, DataType.INT32, []);
  const fusedRope = usesRotaryEmbedding(c, target);
  const [cos, sin] = fusedRope ? [cosCache, sinCache] : stepRopeRows(g, c, inputIds, seqlensK, cosCache, sinCache);
  const positionIds = fusedRope ? stepPositions(g, c, inputIds, seqlensK, DataType.INT64) : '';
  // Sliding-window layers' own lengths: their KV buffers hold only the last rows (io-names.ts).
  const windowed = (i: number) => (c.slidingWindow?.[i] ?? 0) > 0;
  const anyWindowed = Array.from({ length: c.numLayers }, (_, i) => windowed(i)).some(Boolean);
  const seqlensKWindow = anyWindowed ? g.input(io.SEQLENS_K_WINDOW, DataType.INT32, [1]) : seqlensK;
  const totalSeqLenWindow = anyWindowed ? g.input(io.TOTAL_SEQ_LEN_WINDOW, DataType.INT32, []) : totalSeqLen;

  // cos/sin [1, T, R/2] reshaped once to broadcast against q/k pairs [1, T, H, …].
  const pairShape = c.rope.layout === 'half' ? [1, -1, 1, 1, R / 2] : [1, -1, 1, R / 2, 1];
  const ropeShape = g.int64(pairShape);
  const scalar = (v: number) => g.float32([v]);
  // [global, local] cos/sin tables: the same one twice unless sliding layers have their own RoPE.
  const [cosG, cosL] = c.localRope ? g.node('Split', [cos], 2, { axis: 2, num_outputs: 2 }) : [cos, cos];
  const [sinG, sinL] = c.localRope ? g.node('Split', [sin], 2, { axis: 2, num_outputs: 2 }) : [sin, sin];
  // The pair chain's broadcast tables (none with RotaryEmbedding, which reads the caches itself).
  const ropeTables = (cs: string, sn: string) => ({ cosB: g.op('Reshape', [cs, ropeShape]), sinB: g.op('Reshape', [sn, ropeShape]) });
  const globalTables = fusedRope ? null : ropeTables(cosG, sinG);
  const localTables = c.localRope ? ropeTables(cosL, sinL) : globalTables;

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
    x = gatherBlockQuantized(g, spine, inputIds, embedName, embedW);
  } else {
    float(embedName, [c.vocabSize, D], floatData(embedW));
    x = toSpine(halfValue(g.op('Gather', [embedName, inputIds], { axis: 0 })));
  }
  x = scaleEmbedding(g, x, c, scalar);

  const rmsNorm = (input: string, weightName: string, size: number): string => {
    const w = get(weightName, [size]);
    g.weight(weightName, [size], floatData(w));
    return g.op('SimplifiedLayerNormalization', [input, weightName], { axis: -1, epsilon: { float: c.rmsNormEps }, stash_type: 1 });
  };
  /** A [n] weight in the graph's float type (the attention sinks, which GroupQueryAttention reads) as a graph initializer; its name. */
  const vector = (name: string, n: number): string => {
    float(name, [n], floatData(get(name, [n])));
    // Float16 KV under float32: a Cast, not a float16 copy, so the data file is the float32-KV graph's.
    return kvOnlyHalf ? g.op('Cast', [name], { to: DataType.FLOAT16 }) : name;
  };
  /** A float32 [n] weight added on the float32 spine (a bias: matMul's output is float32) as a graph initializer; its name. */
  const spineVector = (name: string, n: number): string => {
    g.weight(name, [n], floatData(get(name, [n])));
    return name;
  };
  // The linear steps over one QuantizedMatMul: the main graph's, and a fresh one per MoE expert
  // branch (moe-block.ts), whose activation steps must be built inside that branch.
  // `rank`: the activations' (3: the decoder's [1, T, K]; 2: an expert branch's gathered rows [n, K]).
  const linearsWith = (mm: QuantizedMatMul, rank: 2 | 3) => {
    /** x · Wᵀ, float32 out: quantized W on float32 x, a float W in the graph's dtype (`toHalf`). Activations are [1, T, K] but for the classifier's last position [1, D] (rank 2). */
    const matMul = (input: string, name: string, outDim: number, inDim: number): string => {
      const q = requireShape(weights, name, [outDim, inDim]);
      if (isQuantized(q)) return mm.apply(toSpine(input), name, q, rank);
      if (target.ep === 'webgpu') {
        float(name, [inDim, outDim], transposedData(q, outDim, inDim));
        return toSpine(halfValue(g.op('MatMul', [toHalf(input), name])));
      }
      float(name, [outDim, inDim], floatData(q));
      return toSpine(halfValue(g.op('FusedMatMul', [toHalf(input), name], { transB: 1 }, 'com.microsoft')));
    };
    const linear = (input: string, name: string, outDim: number, inDim: number, bias: boolean): string => {
      const y = matMul(input, `${name}.weight`, outDim, inDim);
      return bias ? g.op('Add', [y, spineVector(`${name}.bias`, outDim)]) : y;
    };
    /**
     * Linears that read the same input (q/k/v, gate/up): quantized ones of one layout run as one
     * stacked MatMulNBits (`QuantizedMatMul.applyStacked`: one activation quantization), the rest
     * one by one; biases added after.
     */
    const linears = (input: string, outs: [string, number][], inDim: number, bias: boolean, stackedName: string): string[] => {
      const ws = outs.map(([name, n]) => ({ name: `${name}.weight`, w: requireShape(weights, `${name}.weight`, [n, inDim]) }));
      if (!ws.every((p) => isQuantized(p.w))) return outs.map(([name, n]) => linear(input, name, n, inDim, bias));
      const ys = mm.applyStacked(toSpine(input), `${stackedName}.weight`, ws as { name: string; w: QuantizedWeight }[], rank);
      if (!bias) return ys;
      return ys.map((y, i) => g.op('Add', [y, spineVector(`${outs[i][0]}.bias`, outs[i][1])]));
    };
    return { linear, linears };
  };
  const { linear, linears } = linearsWith(mm, 3);
  // The MoE block works on the float32 spine (float16 graphs too: see the contract above).
  const moeContext: MoeContext = {
    linears, scalar, floatType: DataType.FLOAT,
    branchLinears: () => linearsWith(new QuantizedMatMul(g, emulatesLlamaCpp(target) ? ACCURACY_LEVEL : 0, half ? spine : target), 2).linears,
  };
  const splitR = R < hd ? g.int64([R, hd - R]) : null;
  const pairSplitShape = c.rope.layout === 'half' ? g.int64([1, 0, 0, 2, R / 2]) : g.int64([1, 0, 0, R / 2, 2]);
  const pairAxis = c.rope.layout === 'half' ? 3 : 4;
  const shapeRot = g.int64([1, 0, 0, R]);

  /** RoPE on heads [1, T, H, hd] (Su et al. 2021): (a, b) → (a·cos − b·sin, b·cos + a·sin). */
  const rope = (heads: string, { cosB, sinB }: { cosB: string; sinB: string }): string => {
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

  /** RoPE on [1, T, heads·hd] by RotaryEmbedding over the whole cache (`usesRotaryEmbedding`). */
  const rotaryEmbedding = (flat: string, heads: number): string =>
    g.op('RotaryEmbedding', [flat, positionIds, cos, sin], { interleaved: c.rope.layout === 'half' ? 0 : 1, num_heads: heads, rotary_embedding_dim: R }, 'com.microsoft');

  // 3. layers
  for (let i = 0; i < c.numLayers; i++) {
    const L = (s: string) => layerWeight(i, s);
    const h = rmsNorm(x, L('input_layernorm.weight'), D);
    let [q, k, v] = c.fusedProjections
      ? g.node('Split', [linear(h, L('self_attn.qkv_proj'), (Hq + 2 * Hkv) * hd, D, false), g.int64([Hq * hd, Hkv * hd, Hkv * hd])], 3, { axis: 2 })
      : linears(h, [[L('self_attn.q_proj'), Hq * hd], [L('self_attn.k_proj'), Hkv * hd], [L('self_attn.v_proj'), Hkv * hd]], D, c.attentionBias, L('self_attn.qkv_proj'));
    // Qwen3's q/k norms are per head: [1, T, H, hd] and back.
    const headNorm = (flat: string, shape: string, norm: string) => g.op('Reshape', [rmsNorm(g.op('Reshape', [flat, shape]), L(norm), hd), shapeFlat]);
    if (usesQkNormRope(c, target)) {
      // One node for both norms and both rotations (native/src/qk_norm_rope.h), on the caches as RotaryEmbedding reads them.
      const norms = ['self_attn.q_norm.weight', 'self_attn.k_norm.weight'].map((n) => {
        g.weight(L(n), [hd], floatData(get(L(n), [hd])));
        return L(n);
      });
      const attrs = { num_heads: Hq, kv_num_heads: Hkv, interleaved: c.rope.layout === 'half' ? 0 : 1, epsilon: { float: c.rmsNormEps } };
      [q, k] = g.node('QkNormRope', [q, k, positionIds, cos, sin, ...norms], 2, attrs, 'ropewalk');
      [q, k] = [toKv(q), toKv(k)];
    } else if (fusedRope) {
      if (c.qkNorm) [q, k] = [headNorm(q, shapeHq, 'self_attn.q_norm.weight'), headNorm(k, shapeHkv, 'self_attn.k_norm.weight')];
      q = toKv(rotaryEmbedding(q, Hq));
      k = toKv(rotaryEmbedding(k, Hkv));
    } else {
      let qh = g.op('Reshape', [q, shapeHq]);
      let kh = g.op('Reshape', [k, shapeHkv]);
      if (c.qkNorm) {
        qh = rmsNorm(qh, L('self_attn.q_norm.weight'), hd);
        kh = rmsNorm(kh, L('self_attn.k_norm.weight'), hd);
      }
      const tables = (windowed(i) ? localTables : globalTables)!;
      q = toKv(g.op('Reshape', [rope(qh, tables), shapeFlat]));
      k = toKv(g.op('Reshape', [rope(kh, tables), shapeFlat]));
    }
    v = toKv(v);
    // The new rows alone, for backends that write the KV cache themselves (js-session.ts 'rows'):
    // k and v themselves (in the KV cache's dtype), renamed to the outputs' names (no Identity
    // node to copy them out).
    k = g.rename(k, io.newKey(i));
    v = g.rename(v, io.newValue(i));
    const C = windowed(i) ? 'C_window' : 'C';
    const pk = g.input(io.pastKey(i), KV, [1, Hkv, C, hd]);
    const pv = g.input(io.pastValue(i), KV, [1, Hkv, C, hd]);
    const [lens, total] = windowed(i) ? [seqlensKWindow, totalSeqLenWindow] : [seqlensK, totalSeqLen];
    // The native CPU graph's plain attention is the addon's DecodeAttention (its own decode step,
    // ONNX Runtime's GroupQueryAttention for a prefill: usesDecodeAttention); the rest is ONNX Runtime's.
    const own = usesDecodeAttention(c, i, target);
    const [attn] = g.node(
      own ? 'DecodeAttention' : 'GroupQueryAttention',
      [q, k, v, pk, pv, lens, total, ...attentionSinkInputs(c, i, (name) => vector(name, Hq))],
      [g.tmp('attn'), io.presentKey(i), io.presentValue(i)],
      own ? { num_heads: Hq, kv_num_heads: Hkv, scale: attentionAttributes(c, i).scale } : { num_heads: Hq, kv_num_heads: Hkv, do_rotary: 0, ...attentionAttributes(c, i) },
      own ? 'ropewalk' : 'com.microsoft',
    );
    g.output(io.presentKey(i), KV, [1, Hkv, C, hd]);
    g.output(io.presentValue(i), KV, [1, Hkv, C, hd]);
    g.output(io.newKey(i), KV, [1, 'T', Hkv * hd]);
    g.output(io.newValue(i), KV, [1, 'T', Hkv * hd]);
    const attnOut = kvOnlyHalf ? g.op('Cast', [attn], { to: DataType.FLOAT }) : halfValue(attn);
    // Gemma normalizes each sub-block's output too (post_attention / post_feedforward norms).
    const post = (y: string, norm: string) => (c.gemma ? rmsNorm(y, L(norm), D) : y);
    x = g.op('Add', [x, post(linear(attnOut, L('self_attn.o_proj'), D, Hq * hd, c.outputBias ?? false), 'post_attention_layernorm.weight')]);

    const h2 = rmsNorm(x, L(c.gemma ? 'pre_feedforward_layernorm.weight' : 'post_attention_layernorm.weight'), D);
    if (c.moe) {
      x = g.op('Add', [x, moeBlock(g, c, i, h2, moeContext)]);
      continue;
    }
    // Phi-3's gate_up_proj: one matmul, its output split in halves (gate first).
    const [gate, up] = c.fusedProjections
      ? g.node('Split', [linear(h2, L('mlp.gate_up_proj'), 2 * c.intermediateSize, D, false)], 2, { axis: 2, num_outputs: 2 })
      : linears(h2, [[L('mlp.gate_proj'), c.intermediateSize], [L('mlp.up_proj'), c.intermediateSize]], D, false, L('mlp.gate_up_proj'));
    const act = gatedActivation(g, gate, up, c, scalar);
    x = g.op('Add', [x, post(linear(act, L('mlp.down_proj'), D, c.intermediateSize, false), 'post_feedforward_layernorm.weight')]);
  }

  // 4. last position only → final norm → logits [1, V]
  const last = g.op('Gather', [x, g.int64([-1], [])], { axis: 1 }); // [1, D]
  const normed = rmsNorm(last, 'model.norm.weight', D);
  // float32 logits out: Identity (or the Gemm itself) after a float32 classifier; a float weight's
  // Gemm in a float16 graph runs in float16 (its weight is the largest there is), its output cast.
  // A quantized classifier runs in float32 (its scales in float32: 2 bytes more per block).
  // A soft-capped model (Gemma 2) caps the classifier's output first.
  const capped = (c.gemma?.finalLogitSoftcap ?? 0) > 0;
  const logits = (y: string) => g.node('Identity', [softcapLogits(g, y, c, scalar)], [io.LOGITS]);
  // On the native target a float classifier is ropewalk.MatMulF32 (see the file comment).
  const gemm = (b: string) => {
    if (target.nativeKernels) {
      const shape = { K: D, N: c.vocabSize };
      return capped ? logits(g.op('MatMulF32', [normed, b], shape, 'ropewalk')) : g.node('MatMulF32', [normed, b], [io.LOGITS], shape, 'ropewalk');
    }
    const w = half ? g.op('Cast', [b], { to: DataType.FLOAT }) : b;
    return half || capped ? logits(g.op('Gemm', [normed, w], { transB: 1 })) : g.node('Gemm', [normed, w], [io.LOGITS], { transB: 1 });
  };
  const head = requireShape(weights, c.tiedEmbeddings && !weights.has('lm_head.weight') ? embedName : 'lm_head.weight', [c.vocabSize, D]);
  if (c.tiedEmbeddings && !weights.has('lm_head.weight') && isQuantized(head)) {
    logits(mm.apply(normed, embedName, head, 2));
  } else if (c.tiedEmbeddings && !weights.has('lm_head.weight')) {
    gemm(embedName);
  } else if (isQuantized(head)) {
    logits(mm.apply(normed, 'lm_head.weight', head, 2));
  } else {
    float('lm_head.weight', [c.vocabSize, D], floatData(head as WeightSource));
    gemm('lm_head.weight');
  }
  g.output(io.LOGITS, DataType.FLOAT, [1, c.vocabSize]);

  return g.build('ropewalk_decoder', { '': 18, 'com.microsoft': 1, ...(target.nativeKernels ? { ropewalk: 1 } : {}) }, `Ropewalk ${c.architecture} decoder`);
}

/**
 * The step's RoPE rows, gathered in the graph from the whole RoPE cache (rope_cos_cache /
 * rope_sin_cache [C_rope, columns], bound once per growth) at the step's positions P … P+T−1,
 * derived from seqlens_k = P + T − 1 (io-names.ts):
 *   ones [1, T]  = Gather(one per token id, float32 [V], input_ids)
 *   back [1, T]  = CumSum(ones, axis 1, exclusive, reverse) = T − 1 − t
 *   pos  [1, T]  = int32(float(seqlens_k) − back)            = P + t
 *   cos, sin [1, T, columns] = Gather(cache, pos, axis 0)
 * Gather copies the cache's floats, so the rows are bit for bit those `RopeCache.rows(P, T)` gives.
 * Why so: T exists only as input_ids' shape, and a Shape node's output (or a Cast of the int64
 * ids) is CPU memory to ONNX Runtime's WebGPU and CUDA providers, which then place the arithmetic
 * after it on the CPU (measured on lavapipe: Cast(input_ids) lands on the CPU, this chain is all
 * on WebGPU); a float32 CumSum has a kernel on every provider (ONNX Runtime's WebGPU CumSum is
 * registered for float types, webgpu/math/cum_sum.cc). float32 holds positions exactly below 2^24. GroupQueryAttention's own rotary
 * (do_rotary with cos/sin caches) would do the same, but it needs head_size % 16 = 0
 * (stories260K's is 8) and one table per layer's call, and it rotates inside the kernel, after
 * which new_key_* would not hold the rotated keys.
 */
function stepRopeRows(g: OnnxGraphBuilder, c: ModelConfig, inputIds: string, seqlensK: string, cosCache: string, sinCache: string): [string, string] {
  const positions = stepPositions(g, c, inputIds, seqlensK, DataType.INT32);
  return [g.op('Gather', [cosCache, positions], { axis: 0 }), g.op('Gather', [sinCache, positions], { axis: 0 })];
}

/** The step's positions P … P+T−1 [1, T] as `stepRopeRows` derives them (see there), of type `to`. */
function stepPositions(g: OnnxGraphBuilder, c: ModelConfig, inputIds: string, seqlensK: string, to: number): string {
  const oneTable = g.externalTensor('rope.ones_per_token', [c.vocabSize], DataType.FLOAT, () => new Float32Array(c.vocabSize).fill(1));
  const ones = g.op('Gather', [oneTable, inputIds], { axis: 0 });
  const back = g.op('CumSum', [ones, g.int64([1], [])], { exclusive: 1, reverse: 1 });
  const last = g.op('Cast', [seqlensK], { to: DataType.FLOAT });
  return g.op('Cast', [g.op('Sub', [last, back])], { to });
}

/**
 * Whether q and k are rotated by ONNX Runtime's RotaryEmbedding (com.microsoft, CPU kernel
 * contrib_ops/cpu/bert/rotary_embedding.cc: out[i] = x[i]·cos + sign·x[j]·sin over the cache
 * rows at position_ids), one node each on [1, T, H·hd], instead of the pair chain (Reshape,
 * Split, four Mul, Sub, Add, Concat, Reshape: ten nodes each, 16 of ~40 a layer's step runs): on
 * the CPU, for a whole-head rotary (its partial form leaves the unrotated lanes unwritten in
 * some versions) and one RoPE table (Gemma's local and global tables share one cache input).
 */
export function usesRotaryEmbedding(c: Pick<ModelConfig, 'rope' | 'localRope' | 'headDim'>, target: GraphTarget): boolean {
  return target.ep === 'cpu' && !c.localRope && c.rope.rotaryDim === c.headDim;
}

/**
 * Whether q and k go through the native addon's `ropewalk.QkNormRope` (native/src/qk_norm_rope.h:
 * per-head RMS norms, then RoPE, one node for both) rather than ONNX Runtime's eight nodes a
 * layer (Reshape, SimplifiedLayerNormalization, Reshape and RotaryEmbedding, for each): on the
 * native CPU target's float32 graphs, for a model with per-head q/k norms (Qwen3) whose RoPE is
 * RotaryEmbedding's (`usesRotaryEmbedding`: a whole-head rotary, one table).
 */
export function usesQkNormRope(c: ModelConfig, target: GraphTarget): boolean {
  return !!target.nativeKernels && target.dtype === 'float32' && !!c.qkNorm && usesRotaryEmbedding(c, target);
}

/**
 * Whether layer `i`'s attention is the native addon's `ropewalk.DecodeAttention`
 * (native/src/attention.h: one pass over a KV head's rows for all of its query heads in a decode
 * step; ONNX Runtime's GroupQueryAttention for a prefill) rather than GroupQueryAttention itself:
 * on the native CPU target's graphs (float32 KV, and the float16-KV graph beside it: the op's
 * float16 form) for a layer with full attention and none of GroupQueryAttention's extras (no
 * soft-cap, no sliding window, no attention sinks), at most 64 query heads a KV head; not with
 * `target.ortAttention` (tests and benches).
 */
export function usesDecodeAttention(c: ModelConfig, i: number, target: GraphTarget): boolean {
  // GroupQueryAttention's extras for the layer are what attentionAttributes adds beside the scale.
  const { scale: _scale, ...extras } = attentionAttributes(c, i);
  const plain = !c.attentionSinks && Object.keys(extras).length === 0;
  return !!target.nativeKernels && !target.ortAttention && target.dtype === 'float32' && plain && c.numHeads / c.numKvHeads <= MAX_ATTENTION_GROUP;
}

/** The most query heads a KV head may serve in `ropewalk.DecodeAttention` (attention.h kMaxAttentionGroup). */
const MAX_ATTENTION_GROUP = 64;

/** A float32 weight's bytes for the data file: its array, or chunks read when the file is written. */
function floatData(w: WeightSource): SegmentData {
  return 'data' in w ? w.data : { chunks: (maxBytes) => w.chunks(Math.max(1, Math.floor(maxBytes / 4))) };
}

/**
 * A float32 [rows, cols] weight's bytes transposed to [cols, rows], read whole and transposed
 * when the data file is written (one tensor in memory, as an in-memory weight is).
 */
function transposedData(w: WeightSource, rows: number, cols: number): SegmentData {
  return async () => transpose(await weightValues(w), rows, cols);
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
