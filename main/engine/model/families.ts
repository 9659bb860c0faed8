/**
 * Family option sets: what a Gemma 2 / Gemma 3 checkpoint's config (Hugging Face `config.json`)
 * or GGUF metadata says beyond the Llama fields, mapped to `ModelConfig.gemma` (block variants),
 * `localRope` (Gemma 3's RoPE of the sliding layers) and the per-layer window pattern. Shared by
 * import-hf.ts and gguf-config.ts so both read a family the same way; the graph steps they switch
 * on are in block-variants.ts.
 *
 * Sources: transformers `configuration_gemma2.py` / `configuration_gemma3.py` (defaults:
 * query_pre_attn_scalar 256, Gemma 2's soft-caps 50 and 30, Gemma 3's none, rope_local_base_freq
 * 10,000, sliding_window_pattern 6) and `modeling_gemma2.py` (scaling =
 * query_pre_attn_scalar^-0.5; layer i slides when i is even; Gemma 3: when (i + 1) % pattern ≠ 0);
 * llama.cpp `llama-model.cpp` `LLM_ARCH_GEMMA2` / `LLM_ARCH_GEMMA3` hparams (scale
 * 1/√(n_embd/n_head) for the 27B sizes — 46 and 62 layers —, else 1/√head_dim; Gemma 3's local
 * base 10,000 unscaled, or `rope.freq_base_swa` where a file has it).
 */
import type { GemmaOptions, ModelConfig, RopeConfig } from './manifest.ts';

/** The Hugging Face model types of the Gemma families and the architecture each becomes. */
export const GEMMA_MODEL_TYPES = { gemma2: 'gemma2', gemma3_text: 'gemma3' } as const;

/** What the Gemma options depend on in a config. */
interface Shape {
  numLayers: number;
  hiddenSize: number;
  numHeads: number;
  headDim: number;
  rope: RopeConfig;
  slidingWindow?: number[];
}

/** The options without the family-dependent ones, from the values both sources give. */
function options(hiddenSize: number, attentionScale: number, attentionSoftcap: number, finalLogitSoftcap: number): GemmaOptions {
  return { embeddingScale: Math.fround(Math.sqrt(hiddenSize)), attentionScale, attentionSoftcap, finalLogitSoftcap };
}

/** Gemma 3's local RoPE: the global one's dims and layout with its own base, never scaled. */
function localRope(rope: RopeConfig, base: number): RopeConfig {
  return { theta: base, rotaryDim: rope.rotaryDim, layout: rope.layout };
}

/**
 * `gemma` and (Gemma 3 with windowed layers) `localRope` from a GGUF file's `{arch}.*` metadata,
 * as llama.cpp reads them.
 * @param fail throws a ModelLoadError naming the file.
 */
export function gemmaGgufOptions(
  meta: Readonly<Record<string, unknown>>,
  arch: 'gemma2' | 'gemma3' | string,
  s: Shape,
  fail: (msg: string) => never,
): Pick<ModelConfig, 'gemma' | 'localRope'> {
  const optional = (key: string, fallback: number): number => {
    const v = meta[`${arch}.${key}`];
    if (v === undefined) return fallback;
    const x = Number(v);
    if (!(x >= 0) || !Number.isFinite(x)) fail(`GGUF metadata ${arch}.${key} = ${String(v)} is not a number ≥ 0`);
    return x;
  };
  const is27b = s.numLayers === (arch === 'gemma2' ? 46 : 62);
  const scale = 1 / Math.sqrt(is27b ? Math.floor(s.hiddenSize / s.numHeads) : s.headDim);
  const gemma2 = arch === 'gemma2';
  const out: Pick<ModelConfig, 'gemma' | 'localRope'> = {
    gemma: options(s.hiddenSize, scale, gemma2 ? optional('attn_logit_softcapping', 50) : 0, optional('final_logit_softcapping', gemma2 ? 30 : 0)),
  };
  if (!gemma2 && s.slidingWindow) out.localRope = localRope(s.rope, optional('rope.freq_base_swa', 10000) || 10000);
  return out;
}

/** The Gemma fields of a Hugging Face config.json (all optional: the families' defaults apply). */
export interface GemmaHfFields {
  model_type: string;
  hidden_size: number;
  query_pre_attn_scalar?: number | null;
  attn_logit_softcapping?: number | null;
  final_logit_softcapping?: number | null;
  rope_local_base_freq?: number | null;
  sliding_window_pattern?: number | null;
}

/**
 * `gemma` and `localRope` from a Hugging Face Gemma config, transformers' defaults where a field
 * is absent; null soft-caps are none.
 */
export function gemmaHfOptions(c: GemmaHfFields, s: Shape): Pick<ModelConfig, 'gemma' | 'localRope'> {
  const gemma2 = c.model_type === 'gemma2';
  const cap = (v: number | null | undefined, fallback: number) => (v === undefined ? fallback : (v ?? 0));
  const out: Pick<ModelConfig, 'gemma' | 'localRope'> = {
    gemma: options(
      c.hidden_size,
      (c.query_pre_attn_scalar ?? 256) ** -0.5,
      cap(c.attn_logit_softcapping, gemma2 ? 50 : 0),
      cap(c.final_logit_softcapping, gemma2 ? 30 : 0),
    ),
  };
  if (!gemma2 && s.slidingWindow) out.localRope = localRope(s.rope, c.rope_local_base_freq ?? 10000);
  return out;
}

/**
 * Whether layer i of a Gemma model slides when the config has no `layer_types`: Gemma 2 every
 * even layer, Gemma 3 all but every `pattern`-th ((i + 1) % pattern ≠ 0).
 */
export function gemmaLayerSlides(modelType: string, i: number, pattern: number | null | undefined): boolean {
  return modelType === 'gemma2' ? i % 2 === 0 : (i + 1) % (pattern ?? 6) !== 0;
}
