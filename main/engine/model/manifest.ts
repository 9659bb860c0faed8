/**
 * The model bundle's manifest and the in-memory form of a model that import produces and the
 * graph builder consumes. A bundle is a folder:
 *   model.onnx        the decoder graph (graph contract: see `io-names.ts`)
 *   model.onnx.data   float32 weights as ONNX external data
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
    }
  | { type: 'dynamic'; factor: number; originalMaxPositionEmbeddings: number };

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
}

export type Architecture = 'llama' | 'mistral' | 'qwen2' | 'qwen3';

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
  rope: RopeConfig;
  /** Context length the model was trained with (`max_position_embeddings` / llama2.c seq_len). */
  trainedContext: number;
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
  source: { kind: 'llama2c' | 'hf' | 'bundle'; path: string; sha256: string };
  config: ModelConfig;
  specialTokens: SpecialTokens;
  /** Prepend BOS when encoding a prompt. */
  addBos: boolean;
  /** Jinja chat template, when the model has one (stories260K has none: plain completion). */
  chatTemplate: string | null;
  dtype: 'float32';
}

/** One weight: row-major float32 data with its shape (Hugging Face layout: Linear is [out, in]). */
export interface Tensor32 {
  shape: number[];
  data: Float32Array;
}

/**
 * Weights under canonical Hugging Face Llama names:
 *   model.embed_tokens.weight [V, D]
 *   model.layers.{i}.input_layernorm.weight [D]
 *   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight [out, in]   (+ .bias for q,k,v when attentionBias)
 *   model.layers.{i}.self_attn.{q,k}_norm.weight [headDim]       (qkNorm)
 *   model.layers.{i}.post_attention_layernorm.weight [D]
 *   model.layers.{i}.mlp.{gate,up,down}_proj.weight [out, in]
 *   model.norm.weight [D]
 *   lm_head.weight [V, D]                                        (absent when tiedEmbeddings)
 * q/k rows stay in the source's RoPE layout; `config.rope.layout` says which.
 */
export type ModelWeights = Map<string, Tensor32>;

/** A model as import produces it, before it is written as a bundle. */
export interface ImportedModel {
  manifest: ModelManifest;
  weights: ModelWeights;
  /** Hugging Face tokenizer.json content. */
  tokenizerJson: unknown;
  /** tokenizer_config.json content, or a minimal one. */
  tokenizerConfig: Record<string, unknown>;
}

/** The name of layer i's weight `suffix`, e.g. layerWeight(0, 'self_attn.q_proj.weight'). */
export function layerWeight(i: number, suffix: string): string {
  return `model.layers.${i}.${suffix}`;
}
