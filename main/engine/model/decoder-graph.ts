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
 * The graph target (graph-target.ts) changes that where an EP needs it: WebGPU has no
 * FusedMatMul, so its graph stores linear weights transposed [in, out] (transposed as they are
 * written) under MatMul; a float16 target (CUDA) stores float weights and runs activations and
 * the KV cache in float16, casting the RoPE rows in and the logits out.
 *
 * On the CPU float32 target, quantized q/k/v (and gate/up) of one layout run as one stacked
 * MatMulNBits, split after (`QuantizedMatMul.applyStacked`): one activation quantization for the
 * three (two) instead of one each.
 *
 * Sliding-window layers (`config.slidingWindow`, Mistral, Gemma) set GroupQueryAttention's
 * `local_window_size` (`localWindow`); the KV cache layout is the same. Family variants are
 * small named steps in block-variants.ts (Gemma 2/3: embedding scale, norms after attention and
 * MLP, GELU-tanh, q·k scale and soft-caps); a model whose sliding layers have a RoPE of their own
 * (`config.localRope`, Gemma 3) takes RoPE rows [T, R], global pairs then local ones. A
 * Mixture-of-Experts layer (`config.moe`, Qwen3-MoE) has moe-block.ts's router and expert
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
import { CPU_TARGET, emulatesLlamaCpp, type GraphTarget } from './graph-target.ts';
import { attentionAttributes, gatedActivation, scaleEmbedding, softcapLogits } from './block-variants.ts';
import { moeBlock, type MoeContext } from './moe-block.ts';
import { floatType, floatWeight, gatherBlockQuantized, isGatherable, QuantizedMatMul, transpose } from './quantized-matmul.ts';

export { isGatherable, transpose } from './quantized-matmul.ts';
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
 *   (`halfActivationScales`), in a float32 graph; at level 0 with float16 scales in a float16 one.
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
  const mm = new QuantizedMatMul(g, emulatesLlamaCpp(target) ? ACCURACY_LEVEL : 0, target);
  const F = floatType(target);
  const half = target.dtype === 'float16';
  const float = (name: string, dims: number[], data: SegmentData) => floatWeight(g, target, name, dims, data);

  // 1. inputs
  const inputIds = g.input(io.INPUT_IDS, DataType.INT64, [1, 'T']);
  const cos = g.input(io.ROPE_COS, DataType.FLOAT, ['T', ropeColumns(c)]);
  const sin = g.input(io.ROPE_SIN, DataType.FLOAT, ['T', ropeColumns(c)]);
  const seqlensK = g.input(io.SEQLENS_K, DataType.INT32, [1]);
  const totalSeqLen = g.input(io.TOTAL_SEQ_LEN, DataType.INT32, []);

  // cos/sin [T, R/2] reshaped once to broadcast against q/k pairs [1, T, H, …].
  const pairShape = c.rope.layout === 'half' ? [1, -1, 1, 1, R / 2] : [1, -1, 1, R / 2, 1];
  const ropeShape = g.int64(pairShape);
  const toF = (v: string) => (half ? g.op('Cast', [v], { to: F }) : v);
  const scalar = (v: number) => toF(g.float32([v]));
  // [global, local] cos/sin tables: the same one twice unless sliding layers have their own RoPE.
  const [cosG, cosL] = c.localRope ? g.node('Split', [cos], 2, { axis: 1, num_outputs: 2 }) : [cos, cos];
  const [sinG, sinL] = c.localRope ? g.node('Split', [sin], 2, { axis: 1, num_outputs: 2 }) : [sin, sin];
  const ropeTables = (cs: string, sn: string) => ({ cosB: toF(g.op('Reshape', [cs, ropeShape])), sinB: toF(g.op('Reshape', [sn, ropeShape])) });
  const globalTables = ropeTables(cosG, sinG);
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
    if (!isGatherable(embedW)) throw new ModelLoadError(`weight ${embedName} is quantized as ${embedW.format}, which cannot be gathered; it must be float32`);
    x = gatherBlockQuantized(g, target, inputIds, embedName, embedW);
  } else {
    float(embedName, [c.vocabSize, D], floatData(embedW));
    x = g.op('Gather', [embedName, inputIds], { axis: 0 });
  }
  x = scaleEmbedding(g, x, c, scalar);

  const rmsNorm = (input: string, weightName: string, size: number): string => {
    const w = get(weightName, [size]);
    float(weightName, [size], floatData(w));
    return g.op('SimplifiedLayerNormalization', [input, weightName], { axis: -1, epsilon: { float: c.rmsNormEps }, stash_type: 1 });
  };
  // The linear steps over one QuantizedMatMul: the main graph's, and a fresh one per MoE expert
  // branch (moe-block.ts), whose activation steps must be built inside that branch.
  const linearsWith = (mm: QuantizedMatMul) => {
    const matMul = (input: string, name: string, outDim: number, inDim: number): string => {
      const q = requireShape(weights, name, [outDim, inDim]);
      if (isQuantized(q)) return mm.apply(input, name, q);
      if (target.ep === 'webgpu') {
        float(name, [inDim, outDim], transposedData(q, outDim, inDim));
        return g.op('MatMul', [input, name]);
      }
      float(name, [outDim, inDim], floatData(q));
      return g.op('FusedMatMul', [input, name], { transB: 1 }, 'com.microsoft');
    };
    const linear = (input: string, name: string, outDim: number, inDim: number, bias: boolean): string => {
      const y = matMul(input, `${name}.weight`, outDim, inDim);
      if (!bias) return y;
      const b = get(`${name}.bias`, [outDim]);
      float(`${name}.bias`, [outDim], floatData(b));
      return g.op('Add', [y, `${name}.bias`]);
    };
    /**
     * Linears that read the same input (q/k/v, gate/up): quantized ones of one layout run as one
     * stacked MatMulNBits (`QuantizedMatMul.applyStacked`: one activation quantization), the rest
     * one by one; biases added after.
     */
    const linears = (input: string, outs: [string, number][], inDim: number, bias: boolean, stackedName: string): string[] => {
      const ws = outs.map(([name, n]) => ({ name: `${name}.weight`, w: requireShape(weights, `${name}.weight`, [n, inDim]) }));
      if (!ws.every((p) => isQuantized(p.w))) return outs.map(([name, n]) => linear(input, name, n, inDim, bias));
      const ys = mm.applyStacked(input, `${stackedName}.weight`, ws as { name: string; w: QuantizedWeight }[]);
      if (!bias) return ys;
      return ys.map((y, i) => {
        const [name, n] = outs[i];
        float(`${name}.bias`, [n], floatData(get(`${name}.bias`, [n])));
        return g.op('Add', [y, `${name}.bias`]);
      });
    };
    return { matMul, linear, linears };
  };
  const { matMul, linear, linears } = linearsWith(mm);
  const moeContext: MoeContext = {
    linears, scalar, floatType: F,
    branchLinears: () => linearsWith(new QuantizedMatMul(g, emulatesLlamaCpp(target) ? ACCURACY_LEVEL : 0, target)).linears,
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

  // 3. layers
  for (let i = 0; i < c.numLayers; i++) {
    const L = (s: string) => layerWeight(i, s);
    const h = rmsNorm(x, L('input_layernorm.weight'), D);
    let [q, k, v] = c.fusedProjections
      ? g.node('Split', [linear(h, L('self_attn.qkv_proj'), (Hq + 2 * Hkv) * hd, D, false), g.int64([Hq * hd, Hkv * hd, Hkv * hd])], 3, { axis: 2 })
      : linears(h, [[L('self_attn.q_proj'), Hq * hd], [L('self_attn.k_proj'), Hkv * hd], [L('self_attn.v_proj'), Hkv * hd]], D, c.attentionBias, L('self_attn.qkv_proj'));
    let qh = g.op('Reshape', [q, shapeHq]);
    let kh = g.op('Reshape', [k, shapeHkv]);
    if (c.qkNorm) {
      qh = rmsNorm(qh, L('self_attn.q_norm.weight'), hd);
      kh = rmsNorm(kh, L('self_attn.k_norm.weight'), hd);
    }
    const tables = (c.slidingWindow?.[i] ?? 0) > 0 ? localTables : globalTables;
    q = g.op('Reshape', [rope(qh, tables), shapeFlat]);
    k = g.op('Reshape', [rope(kh, tables), shapeFlat]);
    const pk = g.input(io.pastKey(i), F, [1, Hkv, 'C', hd]);
    const pv = g.input(io.pastValue(i), F, [1, Hkv, 'C', hd]);
    const [attn] = g.node(
      'GroupQueryAttention',
      [q, k, v, pk, pv, seqlensK, totalSeqLen],
      [g.tmp('attn'), io.presentKey(i), io.presentValue(i)],
      { num_heads: Hq, kv_num_heads: Hkv, do_rotary: 0, ...attentionAttributes(c, i) },
      'com.microsoft',
    );
    g.output(io.presentKey(i), F, [1, Hkv, 'C', hd]);
    g.output(io.presentValue(i), F, [1, Hkv, 'C', hd]);
    // The new rows alone, for backends that write the KV cache themselves (js-session.ts 'rows').
    g.node('Identity', [k], [io.newKey(i)]);
    g.node('Identity', [v], [io.newValue(i)]);
    g.output(io.newKey(i), F, [1, 'T', Hkv * hd]);
    g.output(io.newValue(i), F, [1, 'T', Hkv * hd]);
    // Gemma normalizes each sub-block's output too (post_attention / post_feedforward norms).
    const post = (y: string, norm: string) => (c.gemma ? rmsNorm(y, L(norm), D) : y);
    x = g.op('Add', [x, post(linear(attn, L('self_attn.o_proj'), D, Hq * hd, false), 'post_attention_layernorm.weight')]);

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
  // float32 logits out: Identity (or the Gemm itself) in a float32 graph, a Cast in a float16 one.
  // A soft-capped model (Gemma 2) caps the classifier's output first.
  const capped = (c.gemma?.finalLogitSoftcap ?? 0) > 0;
  const logits = (y: string) => g.node(half ? 'Cast' : 'Identity', [softcapLogits(g, y, c, scalar)], [io.LOGITS], half ? { to: DataType.FLOAT } : {});
  const gemm = (b: string) => (half || capped ? logits(g.op('Gemm', [normed, b], { transB: 1 })) : g.node('Gemm', [normed, b], [io.LOGITS], { transB: 1 }));
  if (c.tiedEmbeddings && !weights.has('lm_head.weight') && isQuantized(embedW)) {
    logits(mm.apply(normed, embedName, embedW));
  } else if (c.tiedEmbeddings && !weights.has('lm_head.weight')) {
    gemm(embedName);
  } else if (isQuantized(requireShape(weights, 'lm_head.weight', [c.vocabSize, D]))) {
    logits(matMul(normed, 'lm_head.weight', c.vocabSize, D));
  } else {
    const head = get('lm_head.weight', [c.vocabSize, D]);
    float('lm_head.weight', [c.vocabSize, D], floatData(head));
    gemm('lm_head.weight');
  }
  g.output(io.LOGITS, DataType.FLOAT, [1, c.vocabSize]);

  return g.build('ropewalk_decoder', { '': 18, 'com.microsoft': 1 }, `Ropewalk ${c.architecture} decoder`);
}

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
