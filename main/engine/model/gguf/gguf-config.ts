/**
 * A GGUF file's model config and llama.cpp's tensor names, from its metadata and tensor list
 * alone: shared by the import (import-gguf.ts, an open file) and the model library (a header
 * read by gguf-header.ts). Imports no GGUF parser, so the app's main bundle can use it.
 */
import { ModelLoadError } from '../../errors.ts';
import { HF_LIMITS } from '../hf-config.ts';
import { gemmaGgufOptions } from '../families.ts';
import { GGUF_MOE_NAMES, ggufMoeOptions } from '../moe.ts';
import type { Architecture, ModelConfig, RopeConfig, RopeScaling } from '../manifest.ts';
import type { GgufFile } from './gguf-file.ts';

export const GGUF_ARCHITECTURES = ['llama', 'qwen2', 'qwen3', 'qwen3moe', 'gemma2', 'gemma3', 'phi3', 'gpt-oss'] as const;

/**
 * Canonical (Hugging Face) weight name → GGUF tensor name (llama.cpp `llama-arch.cpp` names).
 * Gemma (`c.gemma`): `post_attention_layernorm` follows attention (`post_attention_norm`), and the
 * MLP's norms are `ffn_norm` (pre) and `post_ffw_norm`. gpt-oss (`LLM_ARCH_OPENAI_MOE`): the norm
 * before the MLP is `post_attention_norm` (llama.cpp's `attn_post_norm`).
 */
export function ggufTensorName(canonical: string, c?: Pick<ModelConfig, 'gemma' | 'architecture'>): string {
  const top: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight',
    'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight',
  };
  if (top[canonical]) return top[canonical];
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(canonical);
  if (!m) throw new ModelLoadError(`no GGUF name for weight ${canonical}`);
  const per: Record<string, string> = {
    'input_layernorm.weight': 'attn_norm.weight',
    'self_attn.q_proj.weight': 'attn_q.weight', 'self_attn.k_proj.weight': 'attn_k.weight', 'self_attn.v_proj.weight': 'attn_v.weight',
    'self_attn.q_proj.bias': 'attn_q.bias', 'self_attn.k_proj.bias': 'attn_k.bias', 'self_attn.v_proj.bias': 'attn_v.bias',
    'self_attn.o_proj.bias': 'attn_output.bias',
    'self_attn.q_norm.weight': 'attn_q_norm.weight', 'self_attn.k_norm.weight': 'attn_k_norm.weight',
    'self_attn.o_proj.weight': 'attn_output.weight', 'self_attn.sinks': 'attn_sinks.weight',
    'post_attention_layernorm.weight': 'ffn_norm.weight',
    'mlp.gate_proj.weight': 'ffn_gate.weight', 'mlp.up_proj.weight': 'ffn_up.weight', 'mlp.down_proj.weight': 'ffn_down.weight',
    // Phi-3's fused weights: llama.cpp's attn_qkv, and ffn_up holding gate and up rows.
    'self_attn.qkv_proj.weight': 'attn_qkv.weight', 'mlp.gate_up_proj.weight': 'ffn_up.weight',
  };
  if (c?.gemma) Object.assign(per, GEMMA_NORM_NAMES);
  if (c?.architecture === 'gpt-oss') per['post_attention_layernorm.weight'] = 'post_attention_norm.weight';
  Object.assign(per, GGUF_MOE_NAMES); // a MoE layer's router; its experts: moe.ts `ggufExpertTensor`
  const suffix = per[m[2]];
  if (!suffix) throw new ModelLoadError(`no GGUF name for weight ${canonical}`);
  return `blk.${m[1]}.${suffix}`;
}

/** Gemma's norms under llama.cpp's names (`LLM_ARCH_GEMMA2` tensors). */
const GEMMA_NORM_NAMES: Record<string, string> = {
  'post_attention_layernorm.weight': 'post_attention_norm.weight',
  'pre_feedforward_layernorm.weight': 'ffn_norm.weight',
  'post_feedforward_layernorm.weight': 'post_ffw_norm.weight',
};

/**
 * Whether layer `i` of a GGUF file with a sliding window is a windowed one, by llama.cpp's fixed
 * pattern for the architecture (`set_swa_pattern(n)`: layer i slides when i % n < n − 1): Gemma 2
 * and gpt-oss (`LLM_ARCH_OPENAI_MOE`, as transformers' `GptOssConfig.layer_types`) every even
 * layer, Gemma 3 five of every six; any other architecture every layer (Mistral-style).
 */
export function ggufLayerSlides(arch: string, i: number): boolean {
  if (arch === 'gemma2' || arch === 'gpt-oss') return i % 2 === 0;
  return arch === 'gemma3' ? i % 6 < 5 : true;
}

/**
 * A GGUF file's YaRN as llama.cpp applies it (`llama_context` constructor; ggml `rope_yarn`,
 * `ggml_rope_yarn_corr_dims`): the ramp's ends always floored / ceiled (its corr dims), β from
 * `rope.scaling.yarn_beta_fast` / `_slow` (32 / 1), and cos/sin times get_mscale(factor) =
 * 0.1·ln(factor) + 1 times `rope.scaling.attn_factor` (default 1; llama.cpp's
 * `yarn_attn_factor` is recomputed for YaRN, so `rope.scaling.yarn_attn_factor` is not read).
 * Except: `rope.scaling.yarn_truncate` = false (what llama.cpp's converter writes for gpt-oss, from
 * its config's `truncate: false`) keeps the ramp's ends fractional, as transformers and the model's
 * training do; Debian's llama.cpp 0.7.0 does not read the key and rounds them anyway (its logits
 * part from transformers' at the first token: test/integration/transformers-oracle.test.ts).
 * @throws (via `fail`) for `rope.scaling.yarn_ext_factor` other than 1 (a partial ramp) or a
 *   non-zero `rope.scaling.yarn_log_multiplier` (DeepSeek-2's mscale ratio): neither is run.
 */
function ggufYarn(
  meta: Readonly<Record<string, unknown>>, arch: string, factor: number, original: number,
  num: (key: string, fallback?: number) => number, fail: (msg: string) => never,
): RopeScaling {
  const ext = meta[`${arch}.rope.scaling.yarn_ext_factor`];
  if (ext !== undefined && Number(ext) !== 1) fail(`GGUF metadata ${arch}.rope.scaling.yarn_ext_factor = ${String(ext)} is not supported (only 1, the full YaRN ramp)`);
  const logMul = meta[`${arch}.rope.scaling.yarn_log_multiplier`];
  if (logMul !== undefined && Number(logMul) !== 0) fail(`GGUF metadata ${arch}.rope.scaling.yarn_log_multiplier = ${String(logMul)} is not supported`);
  const attn = meta[`${arch}.rope.scaling.attn_factor`] === undefined ? undefined : num('rope.scaling.attn_factor');
  const truncate = meta[`${arch}.rope.scaling.yarn_truncate`];
  if (truncate !== undefined && typeof truncate !== 'boolean') fail(`GGUF metadata ${arch}.rope.scaling.yarn_truncate = ${JSON.stringify(truncate)} is not a boolean`);
  return {
    type: 'yarn', factor, originalMaxPositionEmbeddings: original, ...(truncate === false ? { truncate: false } : {}),
    betaFast: num('rope.scaling.yarn_beta_fast', 32), betaSlow: num('rope.scaling.yarn_beta_slow', 1),
    ...(attn !== undefined ? { attentionFactor: (factor <= 1 ? 1 : 0.1 * Math.log(factor) + 1) * attn } : {}),
  };
}

/**
 * The model config from a GGUF file's metadata and tensor list (an open file, or a header read
 * by `readGgufHeader`). `{arch}.attention.sliding_window` (llama.cpp's n_swa; 0 = none) windows
 * every layer (`config.slidingWindow`); a per-layer pattern key is refused.
 * @throws ModelLoadError for an unsupported architecture or RoPE scaling, a missing or bad
 *   hyper-parameter, a sliding window it cannot honour, or sizes over `HF_LIMITS`.
 */
export function ggufConfig(g: Pick<GgufFile, 'file' | 'tensors'> & { metadata: Readonly<Record<string, unknown>> }): ModelConfig {
  const meta = g.metadata;
  const fail = (msg: string): never => {
    throw new ModelLoadError(msg, g.file);
  };
  const arch = meta['general.architecture'] as string;
  if (!GGUF_ARCHITECTURES.includes(arch as (typeof GGUF_ARCHITECTURES)[number])) {
    fail(`unsupported GGUF architecture ${JSON.stringify(arch)}; supported: ${GGUF_ARCHITECTURES.join(', ')}`);
  }
  const num = (key: string, fallback?: number): number => {
    const v = meta[`${arch}.${key}`];
    if (v === undefined) return fallback ?? fail(`GGUF metadata ${arch}.${key} is missing`);
    const x = Number(v);
    if (!(x > 0) || !Number.isFinite(x)) fail(`GGUF metadata ${arch}.${key} = ${String(v)} is not a positive number`);
    return x;
  };
  const int = (key: string, limit: number, fallback?: number): number => {
    const x = num(key, fallback);
    if (!Number.isInteger(x) || x > limit) fail(`GGUF metadata ${arch}.${key} = ${x} is not an integer in 1 … ${limit}`);
    return x;
  };
  const embd = g.tensors.get('token_embd.weight') ?? fail('GGUF has no token_embd.weight tensor');
  const hiddenSize = int('embedding_length', HF_LIMITS.hiddenSize);
  const numHeads = int('attention.head_count', HF_LIMITS.numHeads);
  const numKvHeads = int('attention.head_count_kv', HF_LIMITS.numHeads, numHeads);
  const headDim = int('attention.key_length', HF_LIMITS.headDim, hiddenSize / numHeads);
  if (numHeads % numKvHeads !== 0) fail(`GGUF head_count ${numHeads} is not a multiple of head_count_kv ${numKvHeads}`);
  const rotaryDim = int('rope.dimension_count', HF_LIMITS.headDim, headDim);
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim) fail(`GGUF rope.dimension_count ${rotaryDim} is odd or larger than the head size ${headDim}`);
  const trainedContext = int('context_length', HF_LIMITS.maxPositionEmbeddings);
  const rope: RopeConfig = { theta: num('rope.freq_base', 10000), rotaryDim, layout: arch === 'llama' ? 'interleaved' : 'half' };
  const gemma = arch === 'gemma2' || arch === 'gemma3';
  const scalingType = meta[`${arch}.rope.scaling.type`];
  if (scalingType !== undefined && scalingType !== 'none') {
    const factor = num('rope.scaling.factor');
    const original = int('rope.scaling.original_context_length', HF_LIMITS.maxPositionEmbeddings, trainedContext);
    if (scalingType === 'linear') rope.scaling = { type: 'linear', factor };
    else if (scalingType === 'yarn') rope.scaling = ggufYarn(meta, arch, factor, original, num, fail);
    else fail(`unsupported GGUF rope.scaling.type ${JSON.stringify(scalingType)}; supported: none, linear, yarn`);
  }
  // Phi-3's LongRoPE: its factors are tensors (read by import-gguf.ts `readLongRopeFactors`).
  if (g.tensors.has('rope_factors_long.weight') || g.tensors.has('rope_factors_short.weight')) {
    if (rope.scaling) fail(`GGUF has LongRoPE factor tensors and rope.scaling.type ${JSON.stringify(scalingType)}; only one can apply`);
    rope.scaling = {
      type: 'longrope', shortFactor: [], longFactor: [],
      originalMaxPositionEmbeddings: int('rope.scaling.original_context_length', HF_LIMITS.maxPositionEmbeddings, trainedContext),
      attentionFactor: num('rope.scaling.attn_factor', 1),
    };
  }
  const phi3 = arch === 'phi3';
  if (phi3 && !g.tensors.has('blk.0.attn_qkv.weight')) fail('GGUF phi3 file without blk.0.attn_qkv.weight (separate q/k/v tensors) is not supported');
  const numLayers = int('block_count', HF_LIMITS.numLayers);
  // Sliding window (llama.cpp's n_swa: a query sees the W tokens up to itself; 0 = none), on every
  // layer, or on Gemma's layers as llama.cpp's fixed pattern for the architecture says; a pattern
  // key in the metadata (`sliding_window_pattern`, gpt-oss's and Gemma 3n's way) is refused rather
  // than guessed. llama.cpp's Gemma 2 windows 4096 tokens where a file does not say.
  const defaultWindow = arch === 'gemma2' ? 4096 : undefined;
  const window = Number(meta[`${arch}.attention.sliding_window`] ?? defaultWindow ?? 0) === 0 ? undefined : (meta[`${arch}.attention.sliding_window`] ?? defaultWindow);
  const pattern = Object.keys(meta).find((k) => k.startsWith(`${arch}.attention.sliding_window_`));
  if (window !== undefined && pattern) fail(`GGUF metadata ${pattern} (a per-layer sliding-window pattern) is not supported`);
  const w = window === undefined ? 0 : int('attention.sliding_window', HF_LIMITS.maxPositionEmbeddings, defaultWindow);
  const slidingWindow = window === undefined ? undefined : Array.from({ length: numLayers }, (_, i) => (ggufLayerSlides(arch, i) ? w : 0));
  if (slidingWindow && w < 2) fail(`GGUF metadata ${arch}.attention.sliding_window = 1 is not supported: a window must hold at least 2 tokens`);
  const gptOss = arch === 'gpt-oss';
  const moe = arch === 'qwen3moe' || gptOss ? ggufMoeOptions(arch, (key, limit) => int(key, limit), g.file) : undefined;
  const family = gemma ? gemmaGgufOptions(meta, arch, { numLayers, hiddenSize, numHeads, headDim, rope, slidingWindow }, fail) : {};
  return {
    architecture: arch as Architecture,
    hiddenSize,
    intermediateSize: int('feed_forward_length', HF_LIMITS.intermediateSize, moe?.expertIntermediateSize),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: embd.shape[0],
    rmsNormEps: num('attention.layer_norm_rms_epsilon'),
    tiedEmbeddings: !g.tensors.has('output.weight'),
    attentionBias: g.tensors.has('blk.0.attn_q.bias'),
    // llama.cpp's optional `bo` (LLM_TENSOR_ATTN_OUT bias): read where the file has it.
    ...(g.tensors.has('blk.0.attn_output.bias') ? { outputBias: true } : {}),
    qkNorm: g.tensors.has('blk.0.attn_q_norm.weight'),
    // gpt-oss's attention sinks (llama.cpp `LLM_TENSOR_ATTN_SINKS`, one logit per head).
    ...(g.tensors.has('blk.0.attn_sinks.weight') ? { attentionSinks: true } : {}),
    rope,
    trainedContext,
    ...(slidingWindow ? { slidingWindow } : {}),
    ...family,
    ...(phi3 ? { fusedProjections: true } : {}),
    ...(moe ? { moe } : {}),
  };
}

