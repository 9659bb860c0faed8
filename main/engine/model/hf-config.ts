/**
 * A Hugging Face `config.json` → `ModelConfig` (import-hf.ts reads the folder; this maps the
 * config): zod-validated fields per family (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3 text,
 * Phi-3), size limits checked before any weight is read (`HF_LIMITS`), RoPE and its scaling
 * variants, the per-layer sliding window, and the canonical weight list the config implies
 * (`expectedWeights`; a MoE layer's router and experts: moe.ts). import-hf.ts re-exports everything here.
 */
import { z } from 'zod';
import { ModelLoadError } from '../errors.ts';
import { layerWeight, type Architecture, type ModelConfig, type RopeConfig, type RopeScaling } from './manifest.ts';
import { MAX_TENSOR_ELEMENTS } from './safetensors.ts';
import { gemmaHfOptions, gemmaLayerSlides } from './families.ts';
import { hfMoeOptions, moeLayerWeights, MOE_MODEL_TYPES } from './moe.ts';
import { gptOssHfOptions } from './gpt-oss-hf.ts';

export const SUPPORTED_MODEL_TYPES = ['llama', 'mistral', 'qwen2', 'qwen3', 'qwen3_moe', 'gemma2', 'gemma3_text', 'phi3', 'gpt_oss'] as const;
type ModelType = (typeof SUPPORTED_MODEL_TYPES)[number];

/**
 * Upper bounds on config sizes, checked before any weight is read. Each is several times the
 * largest real model of these families (Llama 3.1 405B: hidden 16,384, intermediate 53,248,
 * 126 layers, 128 heads; vocabularies up to ~256k). `maxTotalParams` = 2^33 (32 GiB as float32)
 * admits 8B models, which is already more than a desktop holds comfortably in float32.
 */
export const HF_LIMITS = {
  hiddenSize: 65_536,
  intermediateSize: 262_144,
  numLayers: 1_024,
  numHeads: 1_024,
  headDim: 1_024,
  vocabSize: 4_194_304,
  maxPositionEmbeddings: 16_777_216,
  maxTensorElements: MAX_TENSOR_ELEMENTS,
  maxTotalParams: 2 ** 33,
} as const;

/** transformers' defaults for `max_position_embeddings` when a config omits it. */
const DEFAULT_CONTEXT: Record<Architecture, number> = { llama: 2048, mistral: 131_072, qwen2: 32_768, qwen3: 32_768, qwen3moe: 32_768, gemma2: 8192, gemma3: 131_072, phi3: 4096, 'gpt-oss': 131_072 };

/** The architecture a model_type becomes (Gemma 3's text-only `gemma3_text` is `gemma3`). */
const architectureOf = (t: ModelType): Architecture => (t === 'gemma3_text' ? 'gemma3' : t === 'qwen3_moe' || t === 'gpt_oss' ? MOE_MODEL_TYPES[t] : t);

const posInt = z.number().int().positive();
export const tokenId = z.number().int().nonnegative();
const positive = z.number().positive().optional();
const fraction = z.number().gt(0).lte(1).optional();
const RopeSchema = z.looseObject({
  rope_type: z.string().optional(), type: z.string().optional(), rope_theta: positive, partial_rotary_factor: fraction,
  factor: positive, low_freq_factor: positive, high_freq_factor: positive, original_max_position_embeddings: posInt.optional(),
  beta_fast: positive, beta_slow: positive, attention_factor: positive, truncate: z.boolean().optional(),
  mscale: z.number().nonnegative().optional(), mscale_all_dim: z.number().nonnegative().optional(),
  long_factor: z.array(z.number().positive()).optional(), short_factor: z.array(z.number().positive()).optional(),
});
const ConfigSchema = z.object({
  model_type: z.enum(SUPPORTED_MODEL_TYPES),
  hidden_size: posInt, intermediate_size: posInt, num_hidden_layers: posInt, num_attention_heads: posInt, vocab_size: posInt,
  num_key_value_heads: posInt.nullish(), head_dim: posInt.nullish(),
  rms_norm_eps: z.number().positive().default(1e-6), hidden_act: z.string().nullish(), hidden_activation: z.string().nullish(),
  tie_word_embeddings: z.boolean().optional(), attention_bias: z.boolean().default(false), mlp_bias: z.boolean().default(false),
  rope_theta: positive, partial_rotary_factor: fraction, rope_scaling: RopeSchema.nullish(), rope_parameters: RopeSchema.nullish(),
  max_position_embeddings: posInt.optional(), original_max_position_embeddings: posInt.optional(),
  bos_token_id: tokenId.nullish(), eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  sliding_window: z.number().int().nullish(), use_sliding_window: z.boolean().nullish(),
  max_window_layers: z.number().int().nonnegative().nullish(), layer_types: z.array(z.string()).nullish(),
  // Gemma 2 / 3 (families.ts)
  query_pre_attn_scalar: z.number().positive().nullish(), attn_logit_softcapping: z.number().positive().nullish(),
  final_logit_softcapping: z.number().positive().nullish(), rope_local_base_freq: z.number().positive().nullish(),
  sliding_window_pattern: z.number().int().positive().nullish(),
  // Qwen3-MoE (moe.ts)
  num_experts: posInt.nullish(), num_experts_per_tok: posInt.nullish(), moe_intermediate_size: posInt.nullish(),
  norm_topk_prob: z.boolean().nullish(), decoder_sparse_step: z.number().int().nullish(),
  mlp_only_layers: z.array(z.number().int()).nullish(), shared_expert_intermediate_size: z.number().int().nullish(),
  // gpt-oss (gpt-oss-hf.ts)
  num_local_experts: posInt.nullish(), swiglu_limit: z.number().positive().nullish(),
  quantization_config: z.looseObject({ quant_method: z.string().optional() }).nullish(),
});
type HfConfig = z.infer<typeof ConfigSchema>;

/** A zod error as one line: each issue's path and message. */
export function zodMessage(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}

/**
 * Maps a parsed `config.json` to `ModelConfig` (RoPE layout 'half', as Hugging Face's
 * `rotate_half`) and enforces `HF_LIMITS`, including the element count of every weight the
 * config implies, so absurd configs fail without allocating.
 * @param file the config's path, quoted in errors.
 * @throws ModelLoadError for an unsupported model_type, activation, MLP bias or RoPE type, a
 *   missing/ill-typed field, inconsistent head counts, an odd rotary dim, or a size over a limit.
 */
export function parseHfConfig(json: unknown, file: string): ModelConfig {
  const modelType = (json as { model_type?: unknown } | null)?.model_type;
  if (!SUPPORTED_MODEL_TYPES.includes(modelType as ModelType)) {
    throw new ModelLoadError(`unsupported model_type ${JSON.stringify(modelType)}; supported: ${SUPPORTED_MODEL_TYPES.join(', ')}`, file);
  }
  const parsed = ConfigSchema.safeParse(json);
  if (!parsed.success) throw new ModelLoadError(`invalid config.json: ${zodMessage(parsed.error)}`, file);
  const fail = (msg: string): never => {
    throw new ModelLoadError(msg, file);
  };
  const c = withRopeByLayerType(parsed.data, fail);
  const limit = (field: string, value: number, max: number) => {
    if (value > max) fail(`${field} ${value} exceeds the supported limit ${max}`);
  };
  limit('hidden_size', c.hidden_size, HF_LIMITS.hiddenSize);
  limit('intermediate_size', c.intermediate_size, HF_LIMITS.intermediateSize);
  limit('num_hidden_layers', c.num_hidden_layers, HF_LIMITS.numLayers);
  limit('num_attention_heads', c.num_attention_heads, HF_LIMITS.numHeads);
  limit('vocab_size', c.vocab_size, HF_LIMITS.vocabSize);
  const gemma = c.model_type === 'gemma2' || c.model_type === 'gemma3_text';
  // Gemma's MLP reads hidden_activation (transformers' Gemma2MLP), the others hidden_act.
  const act = (gemma ? (c.hidden_activation ?? c.hidden_act) : c.hidden_act) ?? (gemma ? 'gelu_pytorch_tanh' : 'silu');
  const wantAct = gemma ? 'gelu_pytorch_tanh' : 'silu';
  if (act !== wantAct) fail(`${gemma ? 'hidden_activation' : 'hidden_act'} ${act} is not supported; supported: ${wantAct}`);
  if (c.mlp_bias) fail('mlp_bias true is not supported');
  if (c.moe_intermediate_size) limit('moe_intermediate_size', c.moe_intermediate_size, HF_LIMITS.intermediateSize);
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0) {
    fail(`num_attention_heads ${c.num_attention_heads} is not a multiple of num_key_value_heads ${numKvHeads}`);
  }
  if (c.head_dim == null && c.hidden_size % c.num_attention_heads !== 0) {
    fail(`hidden_size ${c.hidden_size} is not divisible by num_attention_heads ${c.num_attention_heads} and head_dim is not given`);
  }
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  limit('head_dim', headDim, HF_LIMITS.headDim);
  const architecture = architectureOf(c.model_type);
  const trainedContext = c.max_position_embeddings ?? DEFAULT_CONTEXT[architecture];
  limit('max_position_embeddings', trainedContext, HF_LIMITS.maxPositionEmbeddings);
  const config: ModelConfig = {
    architecture,
    hiddenSize: c.hidden_size, intermediateSize: c.intermediate_size, numLayers: c.num_hidden_layers,
    numHeads: c.num_attention_heads, numKvHeads, headDim, vocabSize: c.vocab_size,
    // Gemma's configs tie by default (Gemma2Config / Gemma3TextConfig), the others do not.
    rmsNormEps: c.rms_norm_eps, tiedEmbeddings: c.tie_word_embeddings ?? gemma,
    // Qwen2 always has q/k/v biases; Mistral never; Llama and Qwen3 follow the flag.
    attentionBias: c.model_type === 'qwen2' || (c.model_type !== 'mistral' && c.attention_bias),
    // transformers' Llama, Qwen3 and Gemma give o_proj the same bias flag (Qwen2's o_proj has none, Phi-3's neither).
    ...(['llama', 'qwen3', 'gemma2', 'gemma3_text', 'gpt_oss'].includes(c.model_type) && c.attention_bias ? { outputBias: true } : {}),
    ...(c.model_type === 'gpt_oss' ? { attentionSinks: true } : {}),
    qkNorm: c.model_type === 'qwen3' || c.model_type === 'qwen3_moe' || c.model_type === 'gemma3_text',
    ...(c.model_type === 'phi3' ? { fusedProjections: true } : {}),
    rope: parseRope(c, headDim, trainedContext, fail),
    trainedContext,
  };
  const slidingWindow = parseSlidingWindow(c, fail);
  if (slidingWindow) config.slidingWindow = slidingWindow;
  if (gemma) Object.assign(config, gemmaHfOptions(c, config));
  if (c.model_type === 'qwen3_moe') config.moe = hfMoeOptions(c, fail);
  if (c.model_type === 'gpt_oss') config.moe = gptOssHfOptions(c, fail);
  let total = 0;
  for (const [name, shape] of expectedWeights(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    if (n > HF_LIMITS.maxTensorElements) fail(`tensor ${name} would have shape [${shape.join(', ')}], more than ${HF_LIMITS.maxTensorElements} elements`);
    total += n;
  }
  if (total > HF_LIMITS.maxTotalParams) {
    fail(`the config describes ${total} parameters (${(total * 4 / 2 ** 30).toFixed(1)} GiB as float32), more than the ${HF_LIMITS.maxTotalParams} supported`);
  }
  return config;
}

const LAYER_TYPES = ['full_attention', 'sliding_attention'] as const;

/**
 * transformers ≥ 5 writes the RoPE of a model with two kinds of layers per layer type (Gemma 3's
 * `Gemma3TextConfig.save_pretrained`: `rope_parameters: { full_attention: {rope_type 'linear',
 * factor 8, rope_theta 1e6}, sliding_attention: {rope_type 'default', rope_theta 1e4} }`, where
 * transformers 4 wrote `rope_theta`, `rope_scaling` and `rope_local_base_freq`). Returns the config
 * with the full layers' set as `rope_parameters` and the sliding layers' `rope_theta` as
 * `rope_local_base_freq`; a config without per-type sets unchanged.
 * @throws (via `fail`) a per-type set on a family other than Gemma 3 (whose sliding layers would
 *   need their own RoPE), one without `full_attention`, or sliding layers with a RoPE type other
 *   than default (Gemma 3's local layers have unscaled RoPE).
 */
function withRopeByLayerType(c: HfConfig, fail: (m: string) => never): HfConfig {
  const rp = c.rope_parameters as Record<string, unknown> | null | undefined;
  if (!rp || !LAYER_TYPES.some((k) => k in rp)) return c;
  const other = Object.keys(rp).find((k) => !(LAYER_TYPES as readonly string[]).includes(k));
  if (other !== undefined) fail(`rope_parameters mixes per-layer-type sets with ${JSON.stringify(other)}`);
  if (c.model_type !== 'gemma3_text') fail(`rope_parameters per layer type (${Object.keys(rp).join(', ')}) is supported for gemma3_text only, not ${c.model_type}`);
  const set = (k: (typeof LAYER_TYPES)[number]) => {
    const r = RopeSchema.safeParse(rp[k]);
    if (!r.success) fail(`invalid rope_parameters.${k}: ${zodMessage(r.error)}`);
    return r.data;
  };
  if (!rp.full_attention) fail('rope_parameters per layer type has no full_attention set');
  const full = set('full_attention')!;
  const local = rp.sliding_attention ? set('sliding_attention') : undefined;
  const localType = local?.rope_type ?? local?.type ?? 'default';
  if (localType !== 'default') fail(`rope_parameters.sliding_attention rope_type ${JSON.stringify(localType)} is not supported; Gemma 3's sliding layers run default RoPE`);
  return { ...c, rope_parameters: full, rope_local_base_freq: local?.rope_theta ?? c.rope_local_base_freq };
}

/** RoPE from `rope_parameters` (transformers ≥ 5) merged over `rope_scaling`, then top-level fields. */
/**
 * The per-layer window (`ModelConfig.slidingWindow`), as transformers decides it: Mistral's
 * `sliding_window` (null: none) windows every layer; Qwen2/Qwen3 window only with
 * `use_sliding_window`, and then the layers from `max_window_layers` on (`Qwen2Config`:
 * "sliding_attention" if i ≥ max_window_layers); Gemma 2 every even layer, Gemma 3 all but every
 * `sliding_window_pattern`-th (families.ts `gemmaLayerSlides`; window 4096 when absent) (Qwen2:
 * "sliding_attention" if i ≥ max_window_layers); an explicit `layer_types` ("sliding_attention" /
 * "full_attention" per layer) decides over both. Llama: none. null when no layer is windowed.
 * @throws (via `fail`) for a window under 2, a `layer_types` of the wrong length or with another
 *   kind of layer, or sliding layers without a window.
 */
function parseSlidingWindow(c: HfConfig, fail: (m: string) => never): number[] | null {
  if (c.model_type === 'llama') return null;
  const qwen = c.model_type === 'qwen2' || c.model_type === 'qwen3' || c.model_type === 'qwen3_moe';
  const gemma = c.model_type === 'gemma2' || c.model_type === 'gemma3_text';
  // Gemma2Config / Gemma3TextConfig default to a 4096-token window when the field is absent.
  const window = qwen && !c.use_sliding_window ? null : c.sliding_window === undefined && gemma ? 4096 : (c.sliding_window ?? null);
  const n = c.num_hidden_layers;
  let sliding: boolean[];
  if (c.layer_types) {
    if (c.layer_types.length !== n) fail(`layer_types has ${c.layer_types.length} entries for ${n} layers`);
    const other = c.layer_types.find((t) => t !== 'sliding_attention' && t !== 'full_attention');
    if (other !== undefined) fail(`layer_types ${JSON.stringify(other)} is not supported; supported: sliding_attention, full_attention`);
    sliding = c.layer_types.map((t) => t === 'sliding_attention');
    if (window === null && sliding.some(Boolean)) fail('layer_types names sliding_attention layers but the config has no sliding_window');
  } else if (c.model_type === 'gpt_oss') {
    sliding = Array.from({ length: n }, (_, i) => window !== null && i % 2 === 0); // GptOssConfig's default layer_types
  } else if (c.model_type === 'gemma2' || c.model_type === 'gemma3_text') {
    sliding = Array.from({ length: n }, (_, i) => window !== null && gemmaLayerSlides(c.model_type, i, c.sliding_window_pattern));
  } else {
    const from = qwen ? (c.max_window_layers ?? 0) : 0;
    sliding = Array.from({ length: n }, (_, i) => window !== null && i >= from);
  }
  if (window === null || !sliding.some(Boolean)) return null;
  if (window < 2) fail(`sliding_window ${window} is not supported: a window must hold at least 2 tokens`);
  return sliding.map((s) => (s ? window : 0));
}

function parseRope(c: HfConfig, headDim: number, trainedContext: number, fail: (m: string) => never): RopeConfig {
  const rp = c.rope_scaling || c.rope_parameters ? { ...c.rope_scaling, ...c.rope_parameters } : undefined;
  const theta = c.rope_theta ?? rp?.rope_theta ?? 10000;
  const fraction = c.partial_rotary_factor ?? rp?.partial_rotary_factor ?? 1;
  const rotaryDim = Math.floor(headDim * fraction);
  if (rotaryDim < 2 || rotaryDim % 2 !== 0) {
    fail(`partial_rotary_factor ${fraction} gives rotary dim ${rotaryDim} for head_dim ${headDim}; it must be even and at least 2`);
  }
  const rope: RopeConfig = { theta, rotaryDim, layout: 'half' };
  const type = rp?.rope_type ?? rp?.type ?? 'default';
  const need = <K extends 'factor' | 'low_freq_factor' | 'high_freq_factor' | 'original_max_position_embeddings'>(k: K): number =>
    rp?.[k] ?? fail(`rope_scaling type ${type} needs ${k}`);
  switch (type) {
    case 'default':
      break;
    case 'linear':
      rope.scaling = { type, factor: need('factor') };
      break;
    case 'llama3':
      rope.scaling = {
        type, factor: need('factor'), lowFreqFactor: need('low_freq_factor'), highFreqFactor: need('high_freq_factor'),
        originalMaxPositionEmbeddings: need('original_max_position_embeddings'),
      };
      break;
    case 'yarn':
      rope.scaling = yarn(rp!, need('factor'), trainedContext);
      break;
    case 'dynamic':
      rope.scaling = { type, factor: need('factor'), originalMaxPositionEmbeddings: rp?.original_max_position_embeddings ?? trainedContext };
      break;
    case 'longrope': // Phi-3 (older configs name it 'su')
    case 'su':
      rope.scaling = longRope(c, rp!, rotaryDim, trainedContext, fail);
      break;
    default:
      fail(`unsupported rope_scaling type ${JSON.stringify(type)}; supported: default, linear, llama3, yarn, dynamic, longrope`);
  }
  return rope;
}

/**
 * YaRN as transformers' `_compute_yarn_parameters` reads a config: original context
 * `original_max_position_embeddings` (else max_position_embeddings), β_fast 32 and β_slow 1 when
 * absent, `truncate` (default true); the attention factor `attention_factor`, else — DeepSeek's
 * configs — get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both are given
 * and non-zero (get_mscale(s, m) = 0.1·m·ln s + 1, 1 for s ≤ 1), else inv-freq.ts's default
 * get_mscale(factor, 1).
 */
function yarn(rp: z.infer<typeof RopeSchema>, factor: number, trainedContext: number): RopeScaling {
  const mscale = (m: number) => (factor <= 1 ? 1 : 0.1 * m * Math.log(factor) + 1);
  const attentionFactor = rp.attention_factor ?? (rp.mscale && rp.mscale_all_dim ? mscale(rp.mscale) / mscale(rp.mscale_all_dim) : undefined);
  return {
    type: 'yarn', factor, originalMaxPositionEmbeddings: rp.original_max_position_embeddings ?? trainedContext,
    betaFast: rp.beta_fast ?? 32, betaSlow: rp.beta_slow ?? 1,
    ...(attentionFactor !== undefined ? { attentionFactor } : {}),
    ...(rp.truncate === false ? { truncate: false } : {}),
  };
}

/**
 * LongRoPE as transformers' `_compute_longrope_parameters` reads a Phi-3 config: the original
 * context is the config's top-level `original_max_position_embeddings` (else the scaling's, else
 * max_position_embeddings), s = max_position_embeddings / original, and the attention factor, when
 * not given, √(1 + ln s / ln original) (1 for s ≤ 1).
 * @throws (via `fail`) when short_factor / long_factor are not rotaryDim / 2 positive numbers.
 */
function longRope(c: HfConfig, rp: z.infer<typeof RopeSchema>, rotaryDim: number, trainedContext: number, fail: (m: string) => never): RopeScaling {
  const half = rotaryDim / 2;
  for (const k of ['short_factor', 'long_factor'] as const) {
    if (rp[k]?.length !== half) fail(`rope_scaling.${k} must hold ${half} numbers (rotary dim / 2), found ${rp[k]?.length ?? 'none'}`);
  }
  const orig = c.original_max_position_embeddings ?? rp.original_max_position_embeddings ?? trainedContext;
  const s = trainedContext / orig;
  const attentionFactor = rp.attention_factor ?? (s <= 1 ? 1 : Math.sqrt(1 + Math.log(s) / Math.log(orig)));
  return { type: 'longrope', shortFactor: rp.short_factor!, longFactor: rp.long_factor!, originalMaxPositionEmbeddings: orig, attentionFactor };
}

/**
 * Every canonical weight name (manifest.ts `ModelWeights`) the config requires, with its shape
 * in Hugging Face layout (Linear = [out, in]), in load order.
 */
export function expectedWeights(c: ModelConfig): Map<string, number[]> {
  const D = c.hiddenSize;
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const m = new Map<string, number[]>([['model.embed_tokens.weight', [c.vocabSize, D]]]);
  for (let i = 0; i < c.numLayers; i++) {
    const w = (suffix: string, shape: number[]) => m.set(layerWeight(i, suffix), shape);
    w('input_layernorm.weight', [D]);
    if (c.fusedProjections) w('self_attn.qkv_proj.weight', [q + 2 * kv, D]);
    else {
      w('self_attn.q_proj.weight', [q, D]);
      w('self_attn.k_proj.weight', [kv, D]);
      w('self_attn.v_proj.weight', [kv, D]);
    }
    if (c.attentionBias) {
      w('self_attn.q_proj.bias', [q]);
      w('self_attn.k_proj.bias', [kv]);
      w('self_attn.v_proj.bias', [kv]);
    }
    if (c.qkNorm) {
      w('self_attn.q_norm.weight', [c.headDim]);
      w('self_attn.k_norm.weight', [c.headDim]);
    }
    if (c.attentionSinks) w('self_attn.sinks', [c.numHeads]);
    w('self_attn.o_proj.weight', [D, q]);
    if (c.outputBias) w('self_attn.o_proj.bias', [D]);
    w('post_attention_layernorm.weight', [D]);
    if (c.gemma) {
      w('pre_feedforward_layernorm.weight', [D]);
      w('post_feedforward_layernorm.weight', [D]);
    }
    if (c.moe) for (const [name, shape] of moeLayerWeights(c, c.moe, i)) m.set(name, shape);
    else if (c.fusedProjections) w('mlp.gate_up_proj.weight', [2 * c.intermediateSize, D]);
    else {
      w('mlp.gate_proj.weight', [c.intermediateSize, D]);
      w('mlp.up_proj.weight', [c.intermediateSize, D]);
    }
    if (!c.moe) w('mlp.down_proj.weight', [D, c.intermediateSize]);
  }
  m.set('model.norm.weight', [D]);
  if (!c.tiedEmbeddings) m.set('lm_head.weight', [c.vocabSize, D]);
  return m;
}
