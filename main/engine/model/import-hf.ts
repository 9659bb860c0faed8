/**
 * Import of a Hugging Face checkpoint folder (Llama / Mistral / Qwen2 / Qwen3) into the canonical
 * `ImportedModel`. The folder holds:
 *   config.json                       required; validated with zod, mapped to `ModelConfig`
 *   model.safetensors                 or model.safetensors.index.json (`weight_map`) + shards;
 *                                     F32 / F16 / BF16, converted to float32
 *   tokenizer.json                    required (Hugging Face fast tokenizer)
 *   tokenizer_config.json             optional: chat_template, bos/eos tokens, add_bos_token
 *   chat_template.jinja               optional: the template when tokenizer_config has none
 *   generation_config.json            optional: eos_token_id
 *
 * Order of work, cheapest first, so a bad folder fails before gigabytes are read: config (with
 * size limits, `HF_LIMITS`), safetensors headers (every expected tensor present with its
 * expected shape), tokenizer files, then tensor data one tensor at a time, then the content hash.
 * A streamed import (`openHuggingFace`) only checks that tokenizer.json can be read before the
 * weights; the bundle writer parses it once, after the weights, checks it against the config and
 * finds the special tokens (`checkTokenizerJson`), and copies it as it is: its text and parsed
 * form (measured 21 MB of heap for Qwen's 11 MB file, plus the text as a two-byte string) are
 * never held while the weights are written, and the engine gets that one parse instead of
 * reading the bundle's copy again.
 *
 * Sliding window (`parseSlidingWindow`): `sliding_window` with, as transformers reads them,
 * `use_sliding_window` / `max_window_layers` (Qwen2, Qwen3) or `layer_types`, becomes
 * `ModelConfig.slidingWindow` per layer; one that cannot be mapped is refused, never dropped.
 * Deliberately ignored: yarn's DeepSeek-only `mscale` fields, a `sliding_window` in a `llama`
 * config (LlamaConfig has none; transformers ignores it too), and tensors the graph does not use
 * (`rotary_emb.inv_freq`, a duplicate `lm_head.weight` in a tied checkpoint).
 */
import { constants } from 'node:fs';
import { access, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ModelLoadError } from '../errors.ts';
import { hashFiles } from './content-hash.ts';
import {
  isQuantized,
  layerWeight,
  type Architecture,
  type BundleWeights,
  type ImportedModel,
  type LazyTensor32,
  type ModelConfig,
  type ModelWeights,
  type OpenedModel,
  type RopeConfig,
  type RopeScaling,
  type TokenizerFacts,
  type WeightSources,
} from './manifest.ts';
import { MAX_TENSOR_ELEMENTS, openSafetensors, type SafetensorsFile } from './safetensors.ts';
import { gemmaHfOptions, gemmaLayerSlides } from './families.ts';

export const SUPPORTED_MODEL_TYPES = ['llama', 'mistral', 'qwen2', 'qwen3', 'gemma2', 'gemma3_text', 'phi3'] as const;
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
const DEFAULT_CONTEXT: Record<Architecture, number> = { llama: 2048, mistral: 131_072, qwen2: 32_768, qwen3: 32_768, gemma2: 8192, gemma3: 131_072, phi3: 4096 };

/** The architecture a model_type becomes (Gemma 3's text-only `gemma3_text` is `gemma3`). */
const architectureOf = (t: ModelType): Architecture => (t === 'gemma3_text' ? 'gemma3' : t);

const posInt = z.number().int().positive();
const tokenId = z.number().int().nonnegative();
const positive = z.number().positive().optional();
const fraction = z.number().gt(0).lte(1).optional();
const RopeSchema = z.looseObject({
  rope_type: z.string().optional(), type: z.string().optional(), rope_theta: positive, partial_rotary_factor: fraction,
  factor: positive, low_freq_factor: positive, high_freq_factor: positive, original_max_position_embeddings: posInt.optional(),
  beta_fast: positive, beta_slow: positive, attention_factor: positive,
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
});
type HfConfig = z.infer<typeof ConfigSchema>;

function zodMessage(err: z.ZodError): string {
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
  const c = parsed.data;
  const fail = (msg: string): never => {
    throw new ModelLoadError(msg, file);
  };
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
    qkNorm: c.model_type === 'qwen3' || c.model_type === 'gemma3_text',
    ...(c.model_type === 'phi3' ? { fusedProjections: true } : {}),
    rope: parseRope(c, headDim, trainedContext, fail),
    trainedContext,
  };
  const slidingWindow = parseSlidingWindow(c, fail);
  if (slidingWindow) config.slidingWindow = slidingWindow;
  if (gemma) Object.assign(config, gemmaHfOptions(c, config));
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
  const qwen = c.model_type === 'qwen2' || c.model_type === 'qwen3';
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
    case 'yarn': // transformers' defaults: original = max_position_embeddings, β_fast 32, β_slow 1
      rope.scaling = {
        type, factor: need('factor'), originalMaxPositionEmbeddings: rp?.original_max_position_embeddings ?? trainedContext,
        betaFast: rp?.beta_fast ?? 32, betaSlow: rp?.beta_slow ?? 1,
        ...(rp?.attention_factor !== undefined ? { attentionFactor: rp.attention_factor } : {}),
      };
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
    w('self_attn.o_proj.weight', [D, q]);
    w('post_attention_layernorm.weight', [D]);
    if (c.gemma) {
      w('pre_feedforward_layernorm.weight', [D]);
      w('post_feedforward_layernorm.weight', [D]);
    }
    if (c.fusedProjections) w('mlp.gate_up_proj.weight', [2 * c.intermediateSize, D]);
    else {
      w('mlp.gate_proj.weight', [c.intermediateSize, D]);
      w('mlp.up_proj.weight', [c.intermediateSize, D]);
    }
    w('mlp.down_proj.weight', [D, c.intermediateSize]);
  }
  m.set('model.norm.weight', [D]);
  if (!c.tiedEmbeddings) m.set('lm_head.weight', [c.vocabSize, D]);
  return m;
}

// ---- files -------------------------------------------------------------------------------------

/** Text of `file`, or null when it does not exist and `required` is false. */
async function readText(file: string, required: boolean): Promise<string | null> {
  try {
    // One native UTF-8 decode of the whole file: readFile(file, 'utf8') decodes it piece by piece,
    // measured 70–120 ms against 10 ms for an 11 MB tokenizer.json.
    return (await readFile(file)).toString('utf8');
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ModelLoadError(`cannot read ${path.basename(file)}: ${(e as Error).message}`, file, { cause: e });
  }
}

/** Parsed JSON of `file`, or null when it does not exist and `required` is false. */
async function readJson(file: string, required: boolean): Promise<unknown> {
  const text = await readText(file, required);
  return text === null ? null : parseJson(text, file);
}

/**
 * `text` parsed as JSON.
 * @param file the file it came from, named in the error.
 * @throws ModelLoadError when it is not valid JSON.
 */
export function parseJson(text: string, file: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelLoadError(`${path.basename(file)} is not valid JSON: ${(e as Error).message}`, file, { cause: e });
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(() => true, () => false);
}

const TokenizerJsonSchema = z.looseObject({
  added_tokens: z.array(z.looseObject({ id: tokenId, content: z.string() })).default([]),
  // The vocabulary (~150k entries) is checked by hand below: zod would take ~300 ms over it.
  model: z.looseObject({ vocab: z.unknown() }),
});
const TokenString = z.union([z.string(), z.looseObject({ content: z.string() })]).nullish();
const TokenizerConfigSchema = z.looseObject({
  chat_template: z.union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))]).nullish(),
  bos_token: TokenString,
  eos_token: TokenString,
  add_bos_token: z.boolean().nullish(),
});
const GenerationConfigSchema = z.looseObject({ eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish() });

function parseWith<T>(schema: z.ZodType<T>, json: unknown, file: string): T {
  const r = schema.safeParse(json);
  if (!r.success) throw new ModelLoadError(`invalid ${path.basename(file)}: ${zodMessage(r.error)}`, file);
  return r.data;
}

const asList = (v: number | number[] | null | undefined): number[] => (v == null ? [] : Array.isArray(v) ? v : [v]);

type HfTokenIds = { bos_token_id?: number | null; eos_token_id?: number | number[] | null };

/**
 * The tokenizer files besides tokenizer.json read (tokenizer_config.json, generation_config.json,
 * chat_template.jinja), and tokenizer.json checked to be readable; its content is checked later
 * by the returned `check` (`checkTokenizerJson`).
 */
async function readTokenizerFiles(folder: string, config: ModelConfig, hf: HfTokenIds) {
  const tokFile = path.join(folder, 'tokenizer.json');
  const tcFile = path.join(folder, 'tokenizer_config.json');
  const genFile = path.join(folder, 'generation_config.json');
  const jinjaFile = path.join(folder, 'chat_template.jinja');
  await access(tokFile, constants.R_OK).catch((e: Error) => {
    throw new ModelLoadError(`cannot read tokenizer.json: ${e.message}`, tokFile, { cause: e });
  });
  const tcRaw = (await readJson(tcFile, false)) as Record<string, unknown> | null;
  const tc = tcRaw === null ? null : parseWith(TokenizerConfigSchema, tcRaw, tcFile);
  const genRaw = await readJson(genFile, false);
  const gen = genRaw === null ? null : parseWith(GenerationConfigSchema, genRaw, genFile);
  const jinja = await readText(jinjaFile, false);
  const ct = tc?.chat_template;
  // A list of named templates: "default" is the chat one (others are e.g. "tool_use", "rag").
  const chatTemplate = (Array.isArray(ct) ? (ct.find((t) => t.name === 'default') ?? ct[0])?.template : ct) ?? jinja ?? null;
  const addBos = tc?.add_bos_token ?? ['llama', 'mistral', 'gemma2', 'gemma3'].includes(config.architecture);
  const tokenizerConfig = tcRaw ?? { add_bos_token: addBos };
  const check = (json: unknown): TokenizerFacts => checkTokenizerJson(json, { folder, config, hf, tc, gen, addBos });
  return { tokenizerFile: tokFile, tokenizerConfig, chatTemplate, addBos, check };
}

/**
 * Checks a parsed tokenizer.json against the model: every token id below config.json's
 * vocab_size, and the special tokens resolved (BOS = tokenizer_config `bos_token` looked up in
 * tokenizer.json, else config.json `bos_token_id`; EOS = union of config.json and
 * generation_config.json `eos_token_id` and tokenizer_config's `eos_token`).
 * @throws ModelLoadError naming the file for an ill-formed tokenizer.json, a token id outside
 *   vocab_size, a special token that is not in the vocabulary, or add_bos_token without a BOS.
 */
function checkTokenizerJson(
  tokenizerJson: unknown,
  m: {
    folder: string;
    config: ModelConfig;
    hf: HfTokenIds;
    tc: z.infer<typeof TokenizerConfigSchema> | null;
    gen: z.infer<typeof GenerationConfigSchema> | null;
    addBos: boolean;
  },
): TokenizerFacts {
  const { config, hf, tc, gen, addBos } = m;
  const tokFile = path.join(m.folder, 'tokenizer.json');
  const tcFile = path.join(m.folder, 'tokenizer_config.json');
  const tok = parseWith(TokenizerJsonSchema, tokenizerJson, tokFile);
  // model.vocab: { piece: id } (BPE, WordPiece, WordLevel) or [[piece, score], …] (Unigram: id = index).
  const vocab = tok.model.vocab;
  let maxId = tok.added_tokens.reduce((a, t) => Math.max(a, t.id), -1);
  if (Array.isArray(vocab)) {
    maxId = Math.max(maxId, vocab.length - 1);
  } else if (typeof vocab === 'object' && vocab !== null) {
    // for…in over the ~150k pieces: Object.values first copies them into an array, measured
    // 1.5–4× slower here.
    const ids = vocab as Record<string, unknown>;
    for (const piece in ids) {
      const id = ids[piece];
      if (!Number.isSafeInteger(id) || (id as number) < 0) throw new ModelLoadError(`model.vocab holds a bad token id ${JSON.stringify(id)}`, tokFile);
      if ((id as number) > maxId) maxId = id as number;
    }
  } else if (vocab !== undefined) {
    throw new ModelLoadError('model.vocab is neither an object nor a list', tokFile);
  }
  if (maxId >= config.vocabSize) {
    throw new ModelLoadError(`tokenizer.json has token id ${maxId} but config.json vocab_size is ${config.vocabSize}`, tokFile);
  }
  const lookup = (t: z.infer<typeof TokenString>, field: string): number | null => {
    if (t == null) return null;
    const s = typeof t === 'string' ? t : t.content;
    const added = tok.added_tokens.find((a) => a.content === s);
    const inVocab = Array.isArray(vocab)
      ? vocab.findIndex((e) => Array.isArray(e) && e[0] === s)
      : vocab && Object.hasOwn(vocab, s) ? (vocab as Record<string, number>)[s]! : -1;
    const id = added?.id ?? inVocab;
    if (id < 0) throw new ModelLoadError(`${field} ${JSON.stringify(s)} is not a token in tokenizer.json`, tcFile);
    return id;
  };
  const bos = lookup(tc?.bos_token, 'bos_token') ?? hf.bos_token_id ?? null;
  const eosTc = lookup(tc?.eos_token, 'eos_token');
  const eos = [...new Set([...asList(hf.eos_token_id), ...asList(gen?.eos_token_id), ...(eosTc === null ? [] : [eosTc])])];
  for (const id of [...eos, ...(bos === null ? [] : [bos])]) {
    if (id >= config.vocabSize) throw new ModelLoadError(`special token id ${id} is outside vocab_size ${config.vocabSize}`, path.join(m.folder, 'config.json'));
  }
  if (addBos && bos === null) throw new ModelLoadError('add_bos_token is set but no BOS token is defined', tcFile);
  return { specialTokens: { bos, eos }, addBos };
}

const IndexSchema = z.looseObject({ weight_map: z.record(z.string(), z.string()) });

interface OpenWeights {
  /** Every expected tensor, read (as float32) from its shard when loaded; valid until `close`. */
  sources: ReadonlyMap<string, LazyTensor32>;
  close(): Promise<void>;
}

/**
 * Gemma's norm weights as their effective multipliers: transformers' GemmaRMSNorm computes
 * x̂ · (1 + w) in float32 (`modeling_gemma2.py`), so every `*norm.weight` gets 1 added (in float32,
 * as it is read: the same bits as transformers' sum), which is also how llama.cpp's converter
 * stores them in GGUF; the graph's norm is then the plain x̂ · w.
 */
function withNormOffset(sources: ReadonlyMap<string, LazyTensor32>): ReadonlyMap<string, LazyTensor32> {
  const plusOne = (a: Float32Array) => {
    for (let i = 0; i < a.length; i++) a[i] += 1;
    return a;
  };
  const out = new Map<string, LazyTensor32>();
  for (const [name, t] of sources) {
    if (!/norm\.weight$/.test(name)) out.set(name, t);
    else {
      out.set(name, {
        shape: t.shape,
        load: async () => plusOne(await t.load()),
        chunks: async function* (elements) {
          for await (const part of t.chunks(elements)) yield plusOne(part);
        },
      });
    }
  }
  return out;
}


/**
 * Opens the weight files and checks, from their headers only, that every expected tensor is
 * present with its expected shape. Tensor data is read later by `load`.
 */
async function openWeights(folder: string, expected: Map<string, number[]>): Promise<OpenWeights> {
  const indexFile = path.join(folder, 'model.safetensors.index.json');
  const single = path.join(folder, 'model.safetensors');
  const index = await readJson(indexFile, false);
  let whereIs = (_name: string) => 'model.safetensors';
  let shardNames = ['model.safetensors'];
  if (index !== null) {
    const map = parseWith(IndexSchema, index, indexFile).weight_map;
    shardNames = [...new Set(Object.values(map))].sort();
    const bad = shardNames.find((s) => s !== path.basename(s) || s === '..' || s === '.');
    if (bad !== undefined) throw new ModelLoadError(`weight_map names shard ${JSON.stringify(bad)} outside the folder`, indexFile);
    whereIs = (name) => map[name] ?? '';
  } else if (!(await exists(single))) {
    throw new ModelLoadError('no model.safetensors or model.safetensors.index.json in the folder', folder);
  }
  const shards = new Map<string, SafetensorsFile>();
  const close = async () => {
    for (const s of shards.values()) await s.close();
  };
  try {
    for (const s of shardNames) shards.set(s, await openSafetensors(path.join(folder, s)));
    for (const [name, shape] of expected) {
      const shard = shards.get(whereIs(name));
      const entry = shard?.entries.get(name);
      if (!shard || !entry) {
        throw new ModelLoadError(`tensor ${name} is missing`, shard ? shard.file : index !== null ? indexFile : single);
      }
      if (entry.shape.length !== shape.length || entry.shape.some((d, i) => d !== shape[i])) {
        throw new ModelLoadError(`tensor ${name} expected shape [${shape.join(', ')}], found [${entry.shape.join(', ')}]`, shard.file);
      }
    }
  } catch (e) {
    await close();
    throw e;
  }
  const sources = new Map<string, LazyTensor32>();
  for (const [name, shape] of expected) {
    const shard = shards.get(whereIs(name))!;
    sources.set(name, { shape, load: async () => (await shard.load(name)).data, chunks: (elements) => shard.chunks(name, elements) });
  }
  return { sources, close };
}

/**
 * The files whose contents identify a Hugging Face checkpoint folder, sorted by name: config.json,
 * generation_config.json, chat_template.jinja, tokenizer*, *.safetensors and the index. The import
 * cache keys on their hash (`hashFiles`), and so does `manifest.source.sha256`.
 */
export async function hfSourceFiles(folder: string): Promise<string[]> {
  const wanted = (e: string) =>
    e === 'config.json' ||
    e === 'generation_config.json' ||
    e === 'chat_template.jinja' ||
    e.startsWith('tokenizer') ||
    e.endsWith('.safetensors') ||
    e.endsWith('.safetensors.index.json');
  return (await readdir(folder)).sort().filter(wanted).map((e) => path.join(folder, e));
}

/**
 * Imports a Hugging Face checkpoint folder. Weights come back as float32 under canonical names
 * with shapes checked against the config; `manifest.source` is `{ kind: 'hf', path: <absolute
 * folder>, sha256 }`, sha256 being the hash of `hfSourceFiles(folder)`.
 * Special tokens: BOS = tokenizer_config `bos_token` looked up in tokenizer.json, else
 * config.json `bos_token_id`; EOS = union of config.json and generation_config.json
 * `eos_token_id` and tokenizer_config's `eos_token`. addBos = `add_bos_token` ?? (llama/mistral).
 * Chat template: tokenizer_config `chat_template` (a string, or the list entry named "default",
 * else its first), else chat_template.jinja, else null.
 * @param opts.sourceHash the caller's content hash of the folder, when it has one already
 *   (the import cache hashes before importing); skips hashing the weights a second time.
 * @throws ModelLoadError naming the file (and tensor) for anything missing, malformed,
 *   unsupported or over `HF_LIMITS`.
 */
export async function importHuggingFace(folder: string, opts: { sourceHash?: string } = {}): Promise<ImportedModel<ModelWeights>> {
  // Every weight of a Hugging Face checkpoint is float32 (`openHuggingFace`'s sources are LazyTensor32).
  return (await readOpenedModel(await openHuggingFace(folder, opts))) as ImportedModel<ModelWeights>;
}

/**
 * An opened model read whole into memory, then closed: lazy float weights loaded, in-memory ones
 * (float or quantized) as they are, tokenizer.json read and checked when it is a file (which fills
 * in the manifest's special tokens). The in-memory imports (`importHuggingFace`, `importGguf`) for
 * tests and tools; the bundle writer streams the opened model instead.
 * @throws ModelLoadError as the source's reads and checks; for a weight quantized while written
 *   (`LazyQuantizedTensor`), which has no in-memory form.
 */
export async function readOpenedModel(opened: OpenedModel): Promise<ImportedModel> {
  try {
    const { close: _close, tokenizer, weights: sources, ...rest } = opened;
    const tokenizerJson = 'file' in tokenizer ? await readJson(tokenizer.file, true) : tokenizer.json;
    if ('file' in tokenizer) Object.assign(rest.manifest, tokenizer.check(tokenizerJson));
    const weights: BundleWeights = new Map();
    for (const [name, w] of sources) {
      if ('data' in w) weights.set(name, w);
      else if (isQuantized(w)) throw new ModelLoadError(`weight ${name} is quantized while written; it has no in-memory form`);
      else weights.set(name, { shape: w.shape, data: await w.load() });
    }
    return { ...rest, weights, tokenizerJson };
  } finally {
    await opened.close();
  }
}

/**
 * `importHuggingFace` without reading the weights or tokenizer.json: config, headers (every tensor
 * present with its shape) and the other tokenizer files are checked now; tensor data is read
 * when each lazy weight is loaded or read in chunks, and tokenizer.json is a file with its
 * `check` (`TokenizerJsonSource`): `writeBundle` streams the weights, then parses and checks the
 * tokenizer, which fills in `manifest.specialTokens` (until then BOS null, no EOS). The caller
 * must `close()` it.
 * @throws ModelLoadError as `importHuggingFace`.
 */
export async function openHuggingFace(folder: string, opts: { sourceHash?: string } = {}): Promise<OpenedModel<ReadonlyMap<string, LazyTensor32>>> {
  const root = path.resolve(folder);
  const configFile = path.join(root, 'config.json');
  const rawConfig = await readJson(configFile, true);
  const config = parseHfConfig(rawConfig, configFile);
  const hf = rawConfig as { bos_token_id?: number | null; eos_token_id?: number | number[] | null };
  const opened = await openWeights(root, expectedWeights(config));
  if (config.gemma) opened.sources = withNormOffset(opened.sources);
  try {
    const tok = await readTokenizerFiles(root, config, hf);
    const sha256 = opts.sourceHash ?? (await hashFiles(await hfSourceFiles(root)));
    return {
      manifest: {
        format: 'ropewalk-bundle',
        version: 1,
        name: path.basename(root),
        source: { kind: 'hf', path: root, sha256 },
        config,
        specialTokens: { bos: null, eos: [] },
        addBos: tok.addBos,
        chatTemplate: tok.chatTemplate,
        dtype: 'float32',
      },
      weights: opened.sources,
      tokenizer: { file: tok.tokenizerFile, check: tok.check },
      tokenizerConfig: tok.tokenizerConfig,
      close: opened.close,
    };
  } catch (e) {
    await opened.close();
    throw e;
  }
}
