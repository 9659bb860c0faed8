/**
 * What a model file or folder is, from its header alone (never its tensor data): architecture,
 * quantization, parameter count, size on disk, trained context, and the attention shape and
 * resident weight bytes that `estimateForShape` (memory.ts, the estimate the load checks) needs.
 * The engine's own parsers read the headers, so a header the load would refuse is refused here
 * with the same message, as `problem`; nothing throws.
 *
 * Resident weight bytes, as the import will store them (memory.ts counts weights as stored):
 * - GGUF: linear weights of a mapped type become MatMulNBits blocks (`matMulNBitsBytes`: float32
 *   scales, so a Q4_0 block of 32 takes 20 bytes, not its 18 in the file), the rest float32; where
 *   the native addon runs ropewalk.MatMulQ8K (the engine's default backend then), Q4_K, Q5_K and
 *   Q6_K weights stay the file's super-blocks (`MATMULQ8K_FORMATS`).
 * - Hugging Face safetensors: float32 (parameters × 4; bf16/f16 are widened at import).
 * - llama2.c: float32 as in the file (its size less the 28-byte header).
 * - a bundle: what its manifest records.
 */
import { open, readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { LibraryFormat } from '../contract/library.ts';
import { expectedWeights, parseHfConfig, parseJson } from '../engine/model/import-hf.ts';
import { parseLlama2cHeader } from '../engine/model/import-llama2c.ts';
import { ggufConfig, ggufTensorName } from '../engine/model/gguf/gguf-config.ts';
import { isLinearWeight, matMulNBitsBytes } from '../engine/model/gguf/quantized-weights.ts';
import { nativeKernelsAvailable } from '../engine/model/native-addon.ts';
import { MATMULQ8K_FORMATS } from '../engine/model/quantized-matmul.ts';
import { ggufExpertTensor } from '../engine/model/moe.ts';
import { readGgufHeader, type GgufHeader } from '../engine/model/gguf/gguf-header.ts';
import { ggmlType, ggmlTypeName } from '../engine/model/gguf/quants.ts';
import type { ModelConfig, ModelManifest } from '../engine/model/manifest.ts';
import type { CacheShape } from '../engine/model/memory.ts';
import { openSafetensors } from '../engine/model/safetensors.ts';
import { firstLine } from './errors.ts';

/** A model's facts; null where the header does not say or could not be read. */
export interface ModelFacts {
  architecture: string | null;
  quantization: string | null;
  parameterCount: number | null;
  fileBytes: number;
  trainedContext: number | null;
  /** What the KV and RoPE caches are sized by; null: no estimate. */
  shape: CacheShape | null;
  /** Bytes the weights take once loaded. */
  weightBytes: number | null;
  problem: string | null;
}

/**
 * llama.cpp's file types (`general.file_type`, llama.h `enum llama_ftype`), by the names model
 * pages and LM Studio show. Not imported from @huggingface/gguf: its table pulls
 * @huggingface/tasks (a dynamic import) into the app's main bundle.
 */
const FILE_TYPES: Record<number, string> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 10: 'Q2_K', 11: 'Q3_K_S', 12: 'Q3_K_M', 13: 'Q3_K_L',
  14: 'Q4_K_S', 15: 'Q4_K_M', 16: 'Q5_K_S', 17: 'Q5_K_M', 18: 'Q6_K', 19: 'IQ2_XXS', 20: 'IQ2_XS', 21: 'Q2_K_S', 22: 'IQ3_XS',
  23: 'IQ3_XXS', 24: 'IQ1_S', 25: 'IQ4_NL', 26: 'IQ3_S', 27: 'IQ3_M', 28: 'IQ2_S', 29: 'IQ2_M', 30: 'IQ4_XS', 31: 'IQ1_M',
  32: 'BF16', 36: 'TQ1_0', 37: 'TQ2_0', 38: 'MXFP4_MOE',
};
/** Bytes of a llama2.c header (7 int32). */
const LLAMA2C_HEADER_BYTES = 28;

/** The facts of a candidate of `format` at `p` (a file or a folder). Never throws: what fails is `problem`. */
export async function readModelFacts(p: string, format: LibraryFormat): Promise<ModelFacts> {
  try {
    switch (format) {
      case 'gguf':
        return await ggufFacts(p);
      case 'safetensors':
        return await safetensorsFacts(p);
      case 'llama2c':
        return await llama2cFacts(p);
      case 'bundle':
        return await bundleFacts(p);
    }
  } catch (e) {
    const size = (await stat(p).catch(() => null))?.size ?? 0;
    return { architecture: null, quantization: null, parameterCount: null, fileBytes: size, trainedContext: null, shape: null, weightBytes: null, problem: firstLine(e) };
  }
}

async function ggufFacts(file: string): Promise<ModelFacts> {
  const g = await readGgufHeader(file);
  const fileBytes = (await stat(file)).size;
  let parameterCount = 0;
  const elementsByType = new Map<number, number>();
  let unsupported: string | null = null;
  for (const t of g.tensors.values()) {
    const elements = t.shape.reduce((a, b) => a * b, 1);
    parameterCount += elements;
    if (!ggmlType(t.typeId)) unsupported ??= `tensor ${t.name} is stored as ${ggmlTypeName(t.typeId)}, which Ropewalk does not read`;
    if (t.shape.length >= 2) elementsByType.set(t.typeId, (elementsByType.get(t.typeId) ?? 0) + elements);
  }
  const architecture = typeof g.metadata['general.architecture'] === 'string' ? g.metadata['general.architecture'] : null;
  let config: ModelConfig | null = null;
  let problem = unsupported;
  try {
    config = ggufConfig(g);
  } catch (e) {
    problem = firstLine(e);
  }
  const trained = config?.trainedContext ?? Number(g.metadata[`${architecture}.context_length`] ?? NaN);
  return {
    architecture,
    quantization: ggufQuantization(g, elementsByType),
    parameterCount,
    fileBytes,
    trainedContext: Number.isFinite(trained) ? trained : null,
    shape: config,
    weightBytes: config && !unsupported ? ggufResidentBytes(g, config) : null,
    problem,
  };
}

/** `general.file_type` by llama.cpp's names (`Q4_K_M`), else the type most of the matrices' elements are stored as. */
function ggufQuantization(g: GgufHeader, elementsByType: Map<number, number>): string | null {
  const fileType = g.metadata['general.file_type'];
  if (typeof fileType === 'number' && FILE_TYPES[fileType]) return FILE_TYPES[fileType];
  let best: [number, number] | null = null;
  for (const entry of elementsByType) if (!best || entry[1] > best[1]) best = entry;
  return best ? ggmlTypeName(best[0]) : null;
}

/**
 * Bytes the bundle will store for the weights the model uses, as `openGgufModel` imports them:
 * linear weights (and the embedding, gathered from its blocks; a tied classifier multiplies by
 * them) of a mapped type as MatMulNBits blocks, the rest float32.
 */
function ggufResidentBytes(g: GgufHeader, config: ModelConfig, nativeKernels = nativeKernelsAvailable()): number {
  let bytes = 0;
  for (const [name, shape] of expectedWeights(config)) {
    // A MoE expert is its slice of the layer's 3-D expert tensor: same type, its own [out, in].
    const t = g.tensors.get(ggufExpertTensor(name)?.tensor ?? ggufTensorName(name, config));
    if (!t) continue;
    const elements = shape.reduce((a, b) => a * b, 1);
    const embedding = name === 'model.embed_tokens.weight';
    const linear = (isLinearWeight(name) || embedding) && shape.length === 2;
    if (linear && nativeKernels && MATMULQ8K_FORMATS.has(ggmlTypeName(t.typeId))) {
      const type = ggmlType(t.typeId)!;
      bytes += (elements / type.blockSize) * type.blockBytes;
      continue;
    }
    const q = linear ? matMulNBitsBytes(t.typeId, shape[0], shape[1]) : null;
    bytes += q ? q.bytes : elements * 4;
  }
  return bytes;
}

async function safetensorsFacts(folder: string): Promise<ModelFacts> {
  const names = (await readdir(folder)).sort();
  const configFile = path.join(folder, 'config.json');
  const raw = parseJson(await readFile(configFile, 'utf8'), configFile) as Record<string, unknown>;
  let config: ModelConfig | null = null;
  let problem: string | null = null;
  try {
    config = parseHfConfig(raw, configFile);
  } catch (e) {
    problem = firstLine(e);
  }
  let parameterCount = 0;
  let fileBytes = 0;
  const dtypes = new Set<string>();
  for (const n of names) {
    fileBytes += (await stat(path.join(folder, n)).catch(() => null))?.size ?? 0;
    if (!n.endsWith('.safetensors')) continue;
    const st = await openSafetensors(path.join(folder, n));
    for (const e of st.entries.values()) {
      parameterCount += e.shape.reduce((a, b) => a * b, 1);
      dtypes.add(e.dtype);
    }
    await st.close();
  }
  const trained = config?.trainedContext ?? (typeof raw.max_position_embeddings === 'number' ? raw.max_position_embeddings : null);
  return {
    architecture: typeof raw.model_type === 'string' ? raw.model_type : null,
    quantization: [...dtypes].sort().join('+') || null,
    parameterCount,
    fileBytes,
    trainedContext: trained,
    shape: config,
    weightBytes: config ? parameterCount * 4 : null,
    problem,
  };
}

async function llama2cFacts(file: string): Promise<ModelFacts> {
  const size = (await stat(file)).size;
  const header = new Uint8Array(LLAMA2C_HEADER_BYTES);
  const fh = await open(file, 'r');
  try {
    await fh.read(header, 0, LLAMA2C_HEADER_BYTES, 0);
  } finally {
    await fh.close();
  }
  const h = parseLlama2cHeader(header, size, file);
  const headDim = h.dim / h.nHeads;
  return {
    architecture: 'llama',
    quantization: 'F32',
    parameterCount: (size - LLAMA2C_HEADER_BYTES) / 4,
    fileBytes: size,
    trainedContext: h.seqLen,
    shape: { numLayers: h.nLayers, numKvHeads: h.nKvHeads, headDim, rope: { rotaryDim: headDim } },
    weightBytes: size - LLAMA2C_HEADER_BYTES,
    problem: null,
  };
}

async function bundleFacts(dir: string): Promise<ModelFacts> {
  const file = path.join(dir, 'manifest.json');
  const m = parseJson(await readFile(file, 'utf8'), file) as ModelManifest;
  let fileBytes = 0;
  for (const n of await readdir(dir)) fileBytes += (await stat(path.join(dir, n)).catch(() => null))?.size ?? 0;
  const params = [...expectedWeights(m.config).values()].reduce((sum, s) => sum + s.reduce((a, b) => a * b, 1), 0);
  const formats = Object.keys(m.weights?.counts ?? {}).filter((f) => f !== 'float32');
  return {
    architecture: m.config.architecture,
    quantization: formats.length ? formats.join('+') : 'F32',
    parameterCount: params,
    fileBytes,
    trainedContext: m.config.trainedContext,
    shape: m.config,
    weightBytes: m.weights?.bytes ?? fileBytes,
    problem: null,
  };
}
