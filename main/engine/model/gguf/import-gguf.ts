/**
 * Import of a GGUF file (llama.cpp's format; architectures in `GGUF_ARCHITECTURES`) into the
 * canonical `ImportedModel`: hyper-parameters from `{arch}.*` metadata, tokenizer from
 * `tokenizer.*` (gguf-tokenizer.ts), weights renamed to Hugging Face names.
 *
 * RoPE layout: llama.cpp's converter permutes `attn_q`/`attn_k` rows of `llama` models so that
 * rotated pairs are adjacent (its "normal" RoPE, as llama2.c), while `qwen2`/`qwen3` keep
 * Hugging Face's half split (its "NeoX" RoPE). So the weights are used as stored and the
 * manifest says `interleaved` for `llama` and `half` for qwen: no permutation is needed.
 * Llama 3.1 files carry their llama3 RoPE scaling as `rope_freqs.weight`, per-pair divisors of
 * the inverse frequencies: they become `config.rope.frequencyFactors`.
 * A MoE layer's experts (`qwen3moe`) are slices of llama.cpp's 3-D `ffn_*_exps` tensors, one
 * canonical [out, in] weight per expert (moe.ts), so each is read, quantized or not, as any
 * linear weight is.
 * `{arch}.attention.sliding_window` (llama.cpp's n_swa; 0 = none) windows every layer
 * (`config.slidingWindow`); a per-layer pattern key is refused.
 *
 * Weights: linear weights of types that `quantized-weights.ts` maps to MatMulNBits stay
 * quantized when `opts.quantized` is on (the default); everything else is dequantized to float32
 * exactly. A quantized embedding stays quantized too (gathered from its blocks, offsets added
 * where its type has them, and a tied classifier multiplies by them). Tensors are read by offset; float
 * ones in chunks while the bundle is written (`openGgufModel`).
 */
import path from 'node:path';
import { ModelLoadError } from '../../errors.ts';
import { hashFiles } from '../content-hash.ts';
import { expectedWeights, readOpenedModel } from '../import-hf.ts';
import {
  type ImportedModel,
  type LazyTensor32,
  type ModelConfig,
  type OpenedModel,
  type QuantizedTensor,
  type RopeConfig,
  type WeightSource,
} from '../manifest.ts';
import { GGUF_ARCHITECTURES, ggufConfig, ggufTensorName } from './gguf-config.ts';
import { openGguf, type GgufFile, type GgufTensor } from './gguf-file.ts';
import { ggmlTypeName } from './quants.ts';
import { ggufTokenizer } from './gguf-tokenizer.ts';
import { isLinearWeight, quantizedFromGguf } from './quantized-weights.ts';
import { expertSlice, ggufExpertTensor } from '../moe.ts';

export { GGUF_ARCHITECTURES, ggufConfig, ggufTensorName };

/**
 * RoPE frequency factors: `rope_freqs.weight` [R/2] (Llama 3.1 files: llama3 scaling as per-pair
 * divisors of the inverse frequencies, as llama.cpp's converter writes it) read into
 * `config.rope.frequencyFactors`.
 * @throws ModelLoadError when it is not R/2 finite numbers > 0.
 */
async function readFrequencyFactors(g: GgufFile, rope: RopeConfig): Promise<void> {
  const t = g.tensors.get('rope_freqs.weight');
  if (!t) return;
  const half = rope.rotaryDim / 2;
  if (t.shape.length !== 1 || t.shape[0] !== half) {
    throw new ModelLoadError(`tensor rope_freqs.weight expected shape [${half}] (rope.dimension_count / 2), found [${t.shape.join(', ')}]`, g.file);
  }
  const factors = Array.from(await g.readFloat32(t));
  const bad = factors.findIndex((f) => !(f > 0) || !Number.isFinite(f));
  if (bad >= 0) throw new ModelLoadError(`tensor rope_freqs.weight[${bad}] = ${factors[bad]} is not a finite number > 0`, g.file);
  rope.frequencyFactors = factors;
}

/**
 * Phi-3's LongRoPE factors: `rope_factors_short.weight` and `rope_factors_long.weight` [R/2]
 * (llama.cpp's converter writes `short_factor` / `long_factor` so) into the `longrope` scaling
 * `ggufConfig` set up from the header.
 * @throws ModelLoadError when either is missing or is not R/2 finite numbers > 0.
 */
async function readLongRopeFactors(g: GgufFile, rope: RopeConfig): Promise<void> {
  const s = rope.scaling;
  if (s?.type !== 'longrope') return;
  const half = rope.rotaryDim / 2;
  for (const [which, key] of [['short', 'shortFactor'], ['long', 'longFactor']] as const) {
    const name = `rope_factors_${which}.weight`;
    const t = g.tensors.get(name);
    if (!t || t.shape.length !== 1 || t.shape[0] !== half) {
      throw new ModelLoadError(`tensor ${name} expected shape [${half}] (rope.dimension_count / 2), found ${t ? `[${t.shape.join(', ')}]` : 'none'}`, g.file);
    }
    const values = Array.from(await g.readFloat32(t));
    const bad = values.findIndex((f) => !(f > 0) || !Number.isFinite(f));
    if (bad >= 0) throw new ModelLoadError(`tensor ${name}[${bad}] = ${values[bad]} is not a finite number > 0`, g.file);
    s[key] = values;
  }
}

/**
 * The tensor a canonical weight is in a GGUF file: llama.cpp's name for it, or a MoE expert's
 * slice of its layer's 3-D expert tensor (moe.ts `expertSlice`).
 * @throws ModelLoadError when the file lacks it.
 */
function ggufTensor(g: GgufFile, canonical: string, config: ModelConfig): GgufTensor {
  const expert = ggufExpertTensor(canonical);
  const name = expert?.tensor ?? ggufTensorName(canonical, config);
  const t = g.tensors.get(name);
  if (!t) throw new ModelLoadError(`tensor ${name} is missing`, g.file);
  return expert ? expertSlice(t, expert.expert, g.file) : t;
}

/** ggml types that hold plain numbers, not quantized blocks (ggml.h `enum ggml_type`). */
const UNQUANTIZED_TYPES = new Set(['F32', 'F16', 'BF16', 'F64', 'I8', 'I16', 'I32', 'I64']);

/**
 * The ggml types a GGUF file stores its matrices (2 dimensions or more) in, as ggml names them
 * (`{'Q4_K', 'Q6_K'}` for a Q4_K_M file; 'F32' where a linear weight, the classifier or an
 * embedding that may be it is float). Reads the header, not the tensor data.
 * @throws ModelLoadError for an unreadable or malformed file (as `openGguf`).
 */
export async function ggufMatrixTypes(file: string): Promise<Set<string>> {
  const g = await openGguf(file);
  try {
    return new Set([...g.tensors.values()].filter((t) => t.shape.length >= 2).map((t) => ggmlTypeName(t.typeId)));
  } finally {
    await g.close();
  }
}

/**
 * The quantized ggml types a GGUF file stores tensors in, the most used first (`['Q4_0']`;
 * `['Q4_K', 'Q6_K']` for a Q4_K_M file), or `[]` for a float file (F32/F16/BF16 only). Reads
 * the header, not the tensor data. Types are named as ggml names them, supported or not.
 * @throws ModelLoadError for an unreadable or malformed file (as `openGguf`).
 */
export async function ggufQuantizedTypes(file: string): Promise<string[]> {
  const g = await openGguf(file);
  try {
    const counts = new Map<string, number>();
    for (const t of g.tensors.values()) {
      const name = ggmlTypeName(t.typeId);
      if (!UNQUANTIZED_TYPES.has(name)) counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([name]) => name);
  } finally {
    await g.close();
  }
}

/**
 * Opens a GGUF file as a model to write into a bundle, the file kept open until `close()`:
 * hyper-parameters, tokenizer and quantized linear weights are read now (the blocks converted to
 * MatMulNBits layout in memory, about the file's own size), float weights (F32/F16/BF16 tensors,
 * norms, an embedding that cannot be gathered) are read by offset in chunks while the bundle is
 * written, so an F16 or F32 file is never held in memory whole, let alone as float32.
 * @param opts.quantized keep linear weights quantized (MatMulNBits) where their type maps; default true.
 * @param opts.sourceHash the caller's content hash of the file, when it has one.
 * @param opts.ggufBlocks keep Q4_K / Q6_K tensors' stored super-blocks beside their MatMulNBits
 *   form (for a bundle built for the native CPU target, whose graph reads those: quantizedFromGguf).
 * @throws ModelLoadError naming the file (and tensor) for anything missing, malformed or
 *   unsupported; UnsupportedTensorTypeError for a tensor type that cannot be read.
 */
export async function openGgufModel(file: string, opts: { quantized?: boolean; sourceHash?: string; ggufBlocks?: boolean } = {}): Promise<OpenedModel> {
  const abs = path.resolve(file);
  const g = await openGguf(abs);
  try {
    const config = ggufConfig(g);
    await readFrequencyFactors(g, config.rope);
    await readLongRopeFactors(g, config.rope);
    const tok = ggufTokenizer(g.metadata, abs);
    if (tok.vocabSize > config.vocabSize) {
      throw new ModelLoadError(`tokenizer has ${tok.vocabSize} tokens but token_embd.weight has ${config.vocabSize} rows`, abs);
    }
    const tensors = new Map<string, GgufTensor>();
    for (const [name, shape] of expectedWeights(config)) {
      const t = ggufTensor(g, name, config);
      if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
        throw new ModelLoadError(`tensor ${t.name} expected shape [${shape.join(', ')}], found [${t.shape.join(', ')}]`, abs);
      }
      g.typeOf(t); // unsupported types fail before any data is read
      tensors.set(name, t);
    }
    const weights = new Map<string, WeightSource | QuantizedTensor>();
    const quantized = opts.quantized !== false;
    const embedName = 'model.embed_tokens.weight';
    /** A float32 view of a tensor, read when the bundle is written. */
    const lazy = (t: GgufTensor): LazyTensor32 => ({ shape: t.shape, load: () => g.readFloat32(t), chunks: (elements) => g.float32Chunks(t, elements) });
    for (const [name, t] of tensors) {
      const q = quantized && (isLinearWeight(name) || name === embedName) ? quantizedFromGguf(g.typeOf(t), await g.readRaw(t), t.shape, { ggufBlocks: opts.ggufBlocks }) : null;
      weights.set(name, q ?? lazy(t));
    }
    const sha256 = opts.sourceHash ?? (await hashFiles([abs]));
    return {
      manifest: {
        format: 'ropewalk-bundle',
        version: 1,
        name: path.basename(abs).replace(/\.gguf$/i, ''),
        source: { kind: 'gguf', path: abs, sha256 },
        config,
        specialTokens: tok.specialTokens,
        addBos: tok.addBos,
        chatTemplate: tok.chatTemplate,
        dtype: 'float32',
      },
      weights,
      tokenizer: { json: tok.tokenizerJson },
      tokenizerConfig: tok.tokenizerConfig,
      close: () => g.close(),
    };
  } catch (e) {
    await g.close();
    throw e;
  }
}

/**
 * Imports a GGUF file into memory (`openGgufModel` with every weight read): for tests and tools;
 * the bundle builder streams through `openGgufModel`.
 * @throws as `openGgufModel`.
 */
export async function importGguf(file: string, opts: { quantized?: boolean; sourceHash?: string; ggufBlocks?: boolean } = {}): Promise<ImportedModel> {
  return readOpenedModel(await openGgufModel(file, opts));
}

