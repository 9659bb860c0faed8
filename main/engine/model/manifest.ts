/**
 * The model bundle's manifest and the in-memory form of a model that import produces and the
 * graph builder consumes. A bundle is a folder:
 *   model.onnx        the decoder graph (graph contract: see `io-names.ts`)
 *   model.onnx.data   weights as ONNX external data: float32, or 4/8-bit blocks (`QuantizedTensor`)
 *   tokenizer.json    Hugging Face tokenizer
 *   manifest.json     this `ModelManifest`
 */

/** RoPE scaling variants, as Hugging Face `config.json` `rope_scaling` names them. */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | {
      type: 'llama3';
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    }
  | {
      type: 'yarn';
      factor: number;
      originalMaxPositionEmbeddings: number;
      betaFast: number;
      betaSlow: number;
      /** Multiplier on cos/sin; default 0.1·ln(factor)+1 (YaRN paper, eq. 22 / HF `get_mscale`). */
      attentionFactor?: number;
      /**
       * Whether the ramp's ends are rounded to whole dims (floor / ceil), as transformers does
       * unless `rope_scaling.truncate` is false (gpt-oss's configs) and llama.cpp always does.
       * Absent: true.
       */
      truncate?: boolean;
    }
  | { type: 'dynamic'; factor: number; originalMaxPositionEmbeddings: number }
  | {
      /**
       * LongRoPE (Phi-3; Ding et al. 2024): per-pair divisors of the inverse frequencies, the
       * long ones when the context exceeds the original one (chosen once, by the max context,
       * as llama.cpp chooses them by its context size), and a multiplier on cos/sin.
       */
      type: 'longrope';
      shortFactor: number[];
      longFactor: number[];
      originalMaxPositionEmbeddings: number;
      /** Multiplier on cos/sin: √(1 + ln(s)/ln(orig)) with s = max_position_embeddings / orig (transformers' default). */
      attentionFactor: number;
    };

/** RoPE parameters of one model (Su et al. 2021, "RoFormer"). */
export interface RopeConfig {
  /** Base θ of the inverse frequencies θ^(-2i/R). */
  theta: number;
  /** R: number of rotated dimensions of each head (≤ headDim, even). Partial rotary: R < headDim. */
  rotaryDim: number;
  /**
   * How the R rotated dims pair up. `interleaved`: (x0,x1),(x2,x3)… as llama2.c `run.c`;
   * `half`: (x_i, x_{i+R/2}) as Hugging Face `rotate_half`.
   */
  layout: 'interleaved' | 'half';
  scaling?: RopeScaling;
  /**
   * [R/2] per-pair divisors of the inverse frequencies, applied after `scaling`: GGUF's
   * `rope_freqs.weight` (llama.cpp's rope `freq_factors`; Llama 3.1 files carry their llama3
   * scaling this way instead of as metadata). Absent: 1.
   */
  frequencyFactors?: number[];
}

export type Architecture = 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'qwen3moe' | 'gemma2' | 'gemma3' | 'phi3' | 'gpt-oss';

/** Shapes and hyper-parameters of a decoder-only transformer. */
export interface ModelConfig {
  architecture: Architecture;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  rmsNormEps: number;
  /** Classifier shares the embedding matrix. */
  tiedEmbeddings: boolean;
  /** q/k/v projections carry a bias (Qwen2). */
  attentionBias: boolean;
  /** Per-head RMSNorm on q and k before RoPE (Qwen3). */
  qkNorm: boolean;
  /**
   * q/k/v in one `self_attn.qkv_proj.weight` [(Hq + 2·Hkv)·headDim, D] (rows q, then k, then v) and
   * gate/up in one `mlp.gate_up_proj.weight` [2·I, D] (gate rows first), as Phi-3 stores them.
   */
  fusedProjections?: boolean;
  rope: RopeConfig;
  /** Context length the model was trained with (`max_position_embeddings` / llama2.c seq_len). */
  trainedContext: number;
  /**
   * Sliding-window attention, per layer [numLayers]: W > 0 lets a query at position i see the
   * keys at positions i − W + 1 … i (W tokens, itself included: transformers' `sliding_window`
   * mask kv > q − W; llama.cpp's `n_swa`, masked when q − kv ≥ W); 0 = full causal attention.
   * Positions are those of the tokens in the KV cache (after a context shift, its slots).
   * Absent: every layer full (llama2.c, Llama, and models without a window).
   */
  slidingWindow?: number[];
  /**
   * RoPE of the sliding-window layers where it differs from `rope` (Gemma 3: base 10,000 on local
   * layers, 1,000,000 and maybe linear scaling on global ones); same rotaryDim and layout. The
   * RoPE rows then carry both tables side by side, [T, R] (see `ropeColumns`).
   */
  localRope?: RopeConfig;
  /** Gemma 2/3 block variants (`gemmaOptions` of families.ts); absent: Llama's block. */
  gemma?: GemmaOptions;
  /**
   * Attention sinks (gpt-oss; Xiao et al. 2023, "Efficient Streaming Language Models with
   * Attention Sinks"): weight `model.layers.{i}.self_attn.sinks` [numHeads] float32, one learned
   * logit per query head that joins every softmax of that head as an extra, value-less key:
   * p_j = exp(s_j) / (exp(sink_h) + Σ_k exp(s_k)) over the (scaled, soft-capped) scores s, the
   * sink itself neither scaled nor capped (gpt-oss `sdpa`; transformers `eager_attention_forward`
   * of `modeling_gpt_oss.py`). Run as GroupQueryAttention's `head_sink` input. Absent: none.
   */
  attentionSinks?: boolean;
  /**
   * `model.layers.{i}.self_attn.o_proj.bias` [hiddenSize] (Llama / Qwen3 with `attention_bias`,
   * where transformers gives o_proj the bias too; gpt-oss; GGUF `attn_output.bias`). Absent: none.
   */
  outputBias?: boolean;
  /**
   * The dense FFN's activation is gpt-oss's clamped SwiGLU (block-variants.ts
   * `applyGatedActivation`, `GPT_OSS_SWIGLU`) instead of SiLU. Absent: SiLU (Gemma: GELU-tanh).
   */
  clampedSwiglu?: { alpha: number; limit: number };
  /**
   * Mixture-of-Experts MLP on every layer (Qwen3-MoE; moe-block.ts): a router and
   * `numExperts` SwiGLU experts instead of the dense MLP; `intermediateSize` is then unused.
   */
  moe?: MoeOptions;
}

/**
 * A Mixture-of-Experts MLP (Shazeer et al. 2017; Qwen3-MoE: transformers `Qwen3MoeSparseMoeBlock`,
 * llama.cpp `build_moe_ffn`): router logits r = h·W_routerᵀ (+ bias) [T, E]; each token's
 * `expertsPerToken` experts and weights by `routing`; y = Σ_selected w_e · expert_e(h), each expert
 * a gated MLP of width `expertIntermediateSize` (`activation`). Weights (Hugging Face names):
 *   model.layers.{i}.mlp.gate.weight [E, D]                      (router; .bias [E] with `routerBias`)
 *   model.layers.{i}.mlp.experts.{e}.{gate,up}_proj.weight [I, D], down_proj.weight [D, I]
 *                                                                (.bias [I] / [D] with `expertBias`)
 */
export interface MoeOptions {
  /** E: experts per layer. */
  numExperts: number;
  /** k: experts each token uses (`num_experts_per_tok`, GGUF `expert_used_count`). */
  expertsPerToken: number;
  /** I: each expert's hidden width (`moe_intermediate_size`, GGUF `expert_feed_forward_length`). */
  expertIntermediateSize: number;
  /**
   * `softmax-topk`: p = softmax(r) over all E, the k largest p (Qwen3-MoE, Mixtral);
   * `topk-softmax`: the k largest r, softmax over those k (gpt-oss).
   */
  routing: 'softmax-topk' | 'topk-softmax';
  /** `softmax-topk` only: the k weights divided by their sum (`norm_topk_prob`). */
  normalizeTopK: boolean;
  /** The router has a bias (gpt-oss). */
  routerBias: boolean;
  /** The experts' gate/up/down projections have biases (gpt-oss). */
  expertBias: boolean;
  /**
   * The expert's gate activation: `silu` is SwiGLU, silu(gate) ⊙ up (Qwen3-MoE);
   * `swiglu-clamped` is gpt-oss's clamped SwiGLU with `swiglu` = its α and limit
   * (block-variants.ts `applyGatedActivation`, `GPT_OSS_SWIGLU`: α 1.702, limit 7).
   */
  activation: 'silu' | 'swiglu-clamped';
  /** `swiglu-clamped` only: α and clamp limit (required there). */
  swiglu?: { alpha: number; limit: number };
}

/**
 * What Gemma 2 and 3 change in the Llama block (transformers `modeling_gemma2.py`,
 * `modeling_gemma3.py`; llama.cpp `llm_build_gemma2_iswa` / `llm_build_gemma3_iswa`):
 * the embedding times sqrt(hidden) (`embeddingScale`), norms after attention and after the MLP
 * as well as before them (weights `post_attention_layernorm` — after attention here —,
 * `pre_feedforward_layernorm`, `post_feedforward_layernorm`), a GELU-tanh gated MLP, q·k scaled
 * by `attentionScale` (query_pre_attn_scalar^-0.5) and optionally soft-capped. Norm weights are
 * stored as their effective multipliers (1 + w of a Hugging Face checkpoint; GGUF stores them so).
 */
export interface GemmaOptions {
  /** Multiplier on the gathered embedding rows: sqrt(hidden_size) (float32). */
  embeddingScale: number;
  /** Scale of q·k before the softmax (GroupQueryAttention `scale`). */
  attentionScale: number;
  /** c in c·tanh(s / c) on the scaled attention logits (Gemma 2: 50); 0 = none. */
  attentionSoftcap: number;
  /** c in c·tanh(l / c) on the output logits (Gemma 2: 30); 0 = none. */
  finalLogitSoftcap: number;
}

/**
 * Columns of the RoPE cache the graph takes (rope_cos_cache / rope_sin_cache [C_rope, columns]): R/2, or R when the
 * sliding-window layers have a RoPE of their own (`localRope`: global pairs, then local pairs).
 */
export function ropeColumns(c: Pick<ModelConfig, 'rope' | 'localRope'>): number {
  return c.localRope ? c.rope.rotaryDim : c.rope.rotaryDim / 2;
}

export interface SpecialTokens {
  bos: number | null;
  /** Any of these ends generation. */
  eos: number[];
}

export interface ModelManifest {
  format: 'ropewalk-bundle';
  version: 1;
  name: string;
  source: { kind: 'llama2c' | 'hf' | 'gguf' | 'bundle'; path: string; sha256: string };
  config: ModelConfig;
  specialTokens: SpecialTokens;
  /** Prepend BOS when encoding a prompt. */
  addBos: boolean;
  /** Jinja chat template, when the model has one (stories260K has none: plain completion). */
  chatTemplate: string | null;
  /** Activations, non-quantized weights and the KV cache of `model.onnx` (other KV dtypes: `kvGraphs`). */
  dtype: 'float32' | 'float16';
  /**
   * Graphs of this bundle with another KV dtype than `dtype`'s, by dtype: file names beside
   * `model.onnx`, over the same data file (bundle.ts `KV_FLOAT16_MODEL_FILE`); absent: none.
   */
  kvGraphs?: { float16?: string };
  /**
   * The execution provider and dtype the graph was built for (graph-target.ts); absent for the
   * CPU float32 graph, which every bundle had before targets.
   */
  graphTarget?: { ep: 'cpu' | 'webgpu' | 'cuda'; dtype: 'float32' | 'float16'; nativeKernels?: boolean };
  /**
   * Storage of each weight as written to the bundle (`float32`, or `q4`/`q8` MatMulNBits blocks
   * with the source format, e.g. `q4 (Q4_0)`), with totals; absent in bundles written before it.
   */
  weights?: WeightsSummary;
}

/** The dtype of the KV cache of a bundle's `model.onnx` (past/present/new rows): its `dtype`. */
export function manifestKvDtype(m: Pick<ModelManifest, 'dtype'>): 'float32' | 'float16' {
  return m.dtype === 'float16' ? 'float16' : 'float32';
}

/** What the bundle's weights are stored as, and how many bytes they take. */
export interface WeightsSummary {
  /** weight name → format (`float32`, `q4 (Q4_0)`, `q8 (Q8_0)`, …). */
  formats: Record<string, string>;
  /** Count of weights per format. */
  counts: Record<string, number>;
  /** Bytes of all weights as stored (what ONNX Runtime keeps resident). */
  bytes: number;
  /** Bytes they would take as float32. */
  float32Bytes: number;
}

/** One weight: row-major float32 data with its shape (Hugging Face layout: Linear is [out, in]). */
export interface Tensor32 {
  shape: number[];
  data: Float32Array;
}

/**
 * A linear weight [N = out, K = in] kept as ONNX Runtime `com.microsoft.MatMulNBits` blocks:
 * value[n, k] = (q[n, k] − zp[n, b]) · scale[n, b] with b = ⌊k / blockSize⌋.
 *   data        uint8 [N, K/blockSize, blockSize·bits/8]; 4-bit: element 2i in the low nibble
 *   scales      float32 [N · K/blockSize]
 *   zeroPoints  null (the default 8 for 4-bit, 128 for 8-bit) or uint8 (one per block, 4-bit ones
 *               packed two a byte per row, low nibble first). Never float: ONNX Runtime 1.30's CPU
 *               kernel runs float zero points on its float32 path, 40× slower; a per-block min
 *               goes to `blockOffsets` instead.
 * `format` names where the blocks came from (`Q4_0`, `Q6_K`, … or `rtn` for import-time
 * round-to-nearest).
 */
export interface QuantizedTensor {
  shape: [number, number];
  bits: 4 | 8;
  blockSize: number;
  data: Uint8Array;
  scales: Float32Array;
  zeroPoints: Uint8Array | null;
  /**
   * float32 [N · K/blockSize] added to every value of its block (formats with a per-block min,
   * y = d·q + m): the graph adds Σ_block(x) · offset, which equals adding the offset to each
   * weight (llama.cpp's Q4_1/Q5_1 dot products take Σ_block(x) from the int8 activations: see
   * `halfActivationScales`).
   */
  blockOffsets?: Float32Array;
  format: string;
  /**
   * The GGUF tensor's own super-blocks, uint8 [N, K/256, bytes] as stored in the file, for the
   * formats the native addon's `ropewalk.MatMulQ8K` reads (Q4_K, Q5_K, Q6_K: quantized-matmul.ts
   * `MATMULQ8K_FORMATS`); the native CPU graph multiplies by these instead of the MatMulNBits
   * blocks above (which the other graphs, and a quantized embedding's Gather, read).
   */
  ggufBlocks?: Uint8Array;
}

/**
 * A linear weight [N, K] quantized while it is written (import-time round-to-nearest from a float
 * source that is read as it goes): the layout of `QuantizedTensor` without the arrays, which are
 * produced one row chunk at a time. No zero points (every block has the default) and no offsets.
 */
export interface LazyQuantizedTensor {
  shape: [number, number];
  bits: 4 | 8;
  blockSize: number;
  zeroPoints: null;
  blockOffsets?: undefined;
  format: string;
  /**
   * The blocks, as `QuantizedTensor.data` (uint8 [N, K/blockSize, blockSize·bits/8]), in
   * consecutive chunks of whole rows, as many as `maxBytes` of their float32 values hold (at
   * least one); each chunk is valid until the next is asked for. A pass also computes the scales.
   */
  blockChunks(maxBytes: number): AsyncIterable<Uint8Array>;
  /** float32 [N · K/blockSize], as `QuantizedTensor.scales`: kept from the last `blockChunks` pass, else computed by a pass of their own. */
  loadScales(): Promise<Float32Array>;
}

/** A quantized weight, in memory or quantized while written. */
export type QuantizedWeight = QuantizedTensor | LazyQuantizedTensor;

/** True for a quantized weight (`QuantizedTensor` or `LazyQuantizedTensor`). */
export function isQuantized(t: Tensor32 | LazyTensor32 | QuantizedWeight): t is QuantizedWeight {
  return 'bits' in t;
}

/**
 * Bytes of a quantized weight as stored: blocks, scales, zero points and block offsets; for a
 * weight imported for the native CPU target with its GGUF super-blocks (`ggufBlocks`), those,
 * which that graph stores instead.
 */
export function quantizedBytes(t: QuantizedWeight): number {
  const [n, k] = t.shape;
  if (!('data' in t)) return (n * k * t.bits) / 8 + ((n * k) / t.blockSize) * 4;
  if (t.ggufBlocks) return t.ggufBlocks.byteLength;
  return t.data.byteLength + t.scales.byteLength + (t.zeroPoints?.byteLength ?? 0) + (t.blockOffsets?.byteLength ?? 0);
}

/**
 * Weights under canonical Hugging Face Llama names:
 *   model.embed_tokens.weight [V, D]
 *   model.layers.{i}.input_layernorm.weight [D]
 *   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight [out, in]   (+ .bias for q,k,v when attentionBias,
 *                                                                 for o when outputBias)
 *   model.layers.{i}.self_attn.{q,k}_norm.weight [headDim]       (qkNorm)
 *   model.layers.{i}.self_attn.sinks [numHeads]                   (attentionSinks)
 *   model.layers.{i}.post_attention_layernorm.weight [D]           (Gemma: after attention, and
 *   model.layers.{i}.{pre,post}_feedforward_layernorm.weight [D]  these two around the MLP)
 *   model.layers.{i}.mlp.{gate,up,down}_proj.weight [out, in]
 *   model.norm.weight [D]
 *   lm_head.weight [V, D]                                        (absent when tiedEmbeddings, unless
 *                                                                the blocks of a quantized embedding
 *                                                                that cannot be gathered)
 * q/k rows stay in the source's RoPE layout; `config.rope.layout` says which.
 */
export type ModelWeights = Map<string, Tensor32>;

/** Weights as import hands them to the graph builder: linear ones may be quantized. */
export type BundleWeights = Map<string, Tensor32 | QuantizedTensor>;

/** A float32 weight whose values are read when needed: import streams these into the bundle. */
export interface LazyTensor32 {
  shape: number[];
  /** The values, row-major float32 [∏shape]; a fresh array each call. */
  load(): Promise<Float32Array>;
  /**
   * The values in consecutive chunks of `elements` (the last one shorter), each a view of a
   * buffer reused for the next: valid until the next chunk is asked for.
   */
  chunks(elements: number): AsyncIterable<Float32Array>;
}

/** A float32 weight in memory or read on demand. */
export type WeightSource = Tensor32 | LazyTensor32;

/** What the graph builder takes: float32 weights in memory or read on demand, or quantized ones. */
export type WeightSources = ReadonlyMap<string, WeightSource | QuantizedWeight>;

/** A float32 weight's values, read if it is lazy. */
export function weightValues(w: WeightSource): Float32Array | Promise<Float32Array> {
  return 'data' in w ? w.data : w.load();
}

/** A float32 weight's values in consecutive chunks of `elements` (views; see `LazyTensor32.chunks`). */
export async function* weightChunks(w: WeightSource, elements: number): AsyncIterable<Float32Array> {
  if (!('data' in w)) {
    yield* w.chunks(elements);
    return;
  }
  for (let i = 0; i < w.data.length; i += elements) yield w.data.subarray(i, i + elements);
}

/** What a tokenizer.json gives the manifest. */
export interface TokenizerFacts {
  specialTokens: SpecialTokens;
  addBos: boolean;
}

/**
 * A bundle's tokenizer.json: its content, or a file that the bundle writer reads after the
 * weights (so it is parsed once and never held while they are written), checks with `check`
 * (which throws a ModelLoadError for a bad one and gives the manifest's special tokens), and
 * copies as it is.
 */
export type TokenizerJsonSource = { json: unknown } | { file: string; check(json: unknown): TokenizerFacts };

/**
 * An imported model whose weights stay in the source files until written (`writeBundle`),
 * so an import holds one tensor at a time; its tokenizer.json may be a file to copy, so the
 * parsed JSON is not held while the weights are written. `close()` releases the source files.
 */
export interface OpenedModel<W extends WeightSources = WeightSources> extends Omit<ImportedModel, 'weights' | 'tokenizerJson'> {
  weights: W;
  tokenizer: TokenizerJsonSource;
  close(): Promise<void>;
}

/** An in-memory import as an `OpenedModel` (nothing to close). */
export function openedFromMemory(m: ImportedModel): OpenedModel {
  const { tokenizerJson, ...rest } = m;
  return { ...rest, tokenizer: { json: tokenizerJson }, close: async () => {} };
}

/** A model as import produces it, before it is written as a bundle. */
export interface ImportedModel<W extends BundleWeights = BundleWeights> {
  manifest: ModelManifest;
  weights: W;
  /** Hugging Face tokenizer.json content. */
  tokenizerJson: unknown;
  /** tokenizer_config.json content, or a minimal one. */
  tokenizerConfig: Record<string, unknown>;
}

/** Storage format and bytes of every weight, for the manifest (`ModelManifest.weights`). */
export function summarizeWeights(weights: WeightSources): WeightsSummary {
  const formats: Record<string, string> = {};
  const counts: Record<string, number> = {};
  let bytes = 0;
  let float32Bytes = 0;
  for (const [name, t] of weights) {
    const elements = t.shape.reduce((a, b) => a * b, 1);
    const format = isQuantized(t) ? `q${t.bits} (${t.format})` : 'float32';
    formats[name] = format;
    counts[format] = (counts[format] ?? 0) + 1;
    bytes += isQuantized(t) ? quantizedBytes(t) : elements * 4;
    float32Bytes += elements * 4;
  }
  return { formats, counts, bytes, float32Bytes };
}

/** The name of layer i's weight `suffix`, e.g. layerWeight(0, 'self_attn.q_proj.weight'). */
export function layerWeight(i: number, suffix: string): string {
  return `model.layers.${i}.${suffix}`;
}
