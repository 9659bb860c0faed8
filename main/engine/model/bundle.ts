/**
 * Model bundles on disk, and `resolveModel`, which turns whatever the user points at (a llama2.c
 * checkpoint, a Hugging Face folder, a GGUF file, or a bundle) into a bundle folder, importing at most once:
 * imports are cached under `<cacheDir>/<key>/`, where key = SHA-256 of the source files'
 * contents, the graph builder's version and the graph target (`graph-target.ts`: one graph per
 * execution provider and dtype; the CPU target adds nothing, so CPU keys are as before), so the
 * second start of the same model skips import.
 * A start does not re-hash the content either: `<cacheDir>/fingerprints/<fingerprint>` maps the
 * source files' stat identity (`source-fingerprint.ts`: path, inode, size, mtime, ctime) to the
 * key, and the content is hashed only on import or when that fingerprint changes.
 *
 * Bundle folder: model.onnx, model.onnx.data (external weights: float32 or MatMulNBits blocks), tokenizer.json,
 * tokenizer_config.json, manifest.json (`ModelManifest`).
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EngineError, ModelLoadError } from '../errors.ts';
import { hashFiles } from './content-hash.ts';
import { fingerprintFiles } from './source-fingerprint.ts';
import { buildDecoderGraph, EXTERNAL_DATA_FILE } from './decoder-graph.ts';
import { startsWithGgufMagic } from './gguf/gguf-file.ts';
import { looksLikeText } from './text-sniff.ts';
import { ggufMatrixTypes, ggufQuantizedTypes, openGgufModel } from './gguf/import-gguf.ts';
import { quantizeLinearWeights } from './gguf/quantized-weights.ts';
import { hfSourceFiles, openHuggingFace, parseJson } from './import-hf.ts';
import { importLlama2c, llama2cSourceFiles } from './import-llama2c.ts';
import { openedFromMemory, summarizeWeights, type ModelManifest, type OpenedModel } from './manifest.ts';
import { writeExternalData, type BuiltModel } from './onnx-builder.ts';
import { CPU_TARGET, hasFloat16KvGraph, targetKey, type GraphTarget } from './graph-target.ts';
import { NATIVE_KERNEL_GGUF_TYPES } from './quantized-matmul.ts';

/** Bumped whenever the graph or bundle layout changes, so cached imports are rebuilt. */
export const BUNDLE_BUILDER_VERSION = 20; // 20: Q4_K, Q5_K and Q6_K super-blocks of the native graph in groups of 4 rows (MatMulQ8K / GatherQ8K row_groups); 19: CPU float32 bundles hold a float16-KV graph beside model.onnx (KV_FLOAT16_MODEL_FILE, manifest kvGraphs); 18: q and k rotated by RotaryEmbedding on the CPU (decoder-graph.ts usesRotaryEmbedding), not by the ten-node pair chain each; 17: an embedding with block offsets (Q4_K, Q5_K, Q4_1, Q5_1, Q2_K) gathered from its blocks, offsets added, not from a float32 copy; 16: sliding-window layers get their own GroupQueryAttention lengths (seqlens_k_window, total_seq_len_window) and KV dims (C_window), so their KV cache can be bounded by the window; 15: new_key/new_value are k and v themselves, no Identity nodes; 14: q/k/v and gate/up with zero points or block offsets stacked too (Q4_K_M, Q5_1, Q6_K…); 13: o_proj bias, attention sinks, YaRN truncate / mscale / GGUF attn_factor; 12: the whole RoPE cache as inputs, its rows gathered in the graph; 11: the half-scale activation ops restore the shape from a constant, no Shape node (10: q/k/v and gate/up as one stacked MatMulNBits each on the CPU; 9: sliding-window attention)

export const MODEL_FILE = 'model.onnx';
/**
 * The float16-KV graph of a CPU float32 bundle (graph-target.ts `hasFloat16KvGraph`), beside
 * `MODEL_FILE` and over the same data file: the KV cache setting picks one at load (manifest
 * `kvGraphs`), so switching it reloads without importing again.
 */
export const KV_FLOAT16_MODEL_FILE = 'model.kv-float16.onnx';
export const MANIFEST_FILE = 'manifest.json';
export const TOKENIZER_FILE = 'tokenizer.json';
export const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';

/** A bundle read from disk: its folder, manifest and tokenizer files (parsed JSON). */
export interface LoadedBundle {
  dir: string;
  modelPath: string;
  manifest: ModelManifest;
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
}

/** A bundle as `resolveModel` gives it: with what the user should hear about how the source was taken. */
export interface ResolvedBundle extends LoadedBundle {
  /** One line when part of the request does not apply (`quantizeIgnored`), else null. */
  note: string | null;
}

export type SourceKind = 'llama2c' | 'hf' | 'gguf' | 'bundle';

/** `--quantize`: round-to-nearest 4- or 8-bit blocks for the Linear weights of a float source (defined with the contract, which the window also speaks). */
/** `--quantize`'s choices: linear weights as 4- or 8-bit round-to-nearest blocks (MatMulNBits). The engine owns
 *  this; the contract's wire type of the same name is checked against it in main/services/model-service.ts. */
export type QuantizeOption = 'q4' | 'q8';
export const QUANTIZE_OPTIONS = ['q4', 'q8'] as const satisfies readonly QuantizeOption[];

/**
 * Progress of `resolveModel`, for UIs: phase and a fraction in [0, 1]; while the weights are
 * written ('write'), also the bytes written of the total and the estimated seconds left.
 */
export interface ImportProgressEvent {
  phase: 'hash' | 'import' | 'build' | 'write' | 'cached';
  fraction: number;
  bytes?: number;
  totalBytes?: number;
  etaSeconds?: number;
}
export type ImportProgress = (p: ImportProgressEvent) => void;

/** Default cache folder: $ROPEWALK_CACHE_DIR, else $XDG_CACHE_HOME/ropewalk/models, else ~/.cache/ropewalk/models. */
export function defaultCacheDir(): string {
  if (process.env.ROPEWALK_CACHE_DIR) return process.env.ROPEWALK_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'ropewalk', 'models');
}

/**
 * Says what kind of model source `p` is.
 * @throws ModelLoadError when it does not exist or is none of the supported kinds.
 */
export async function detectSource(p: string): Promise<{ kind: SourceKind; path: string }> {
  const st = await stat(p).catch(() => null);
  if (!st) throw new ModelLoadError('model path does not exist', p);
  if (!st.isFile() && !st.isDirectory()) {
    throw new ModelLoadError('not a model: expected a file or a folder, found a device, pipe or socket', p);
  }
  if (st.isFile()) {
    // By content first: a GGUF file renamed without its extension is still GGUF.
    if (p.toLowerCase().endsWith('.gguf') || (await startsWithGgufMagic(p))) return { kind: 'gguf', path: p };
    if (await looksLikeText(p)) {
      throw new ModelLoadError(
        'not a model: expected a .gguf file, a llama2.c .bin checkpoint, a Hugging Face folder with config.json, or a Ropewalk bundle; this file is text (is it a document? attach it to a message instead)',
        p,
      );
    }
    return { kind: 'llama2c', path: p };
  }
  const entries = await readdir(p).catch((e: Error) => {
    throw new ModelLoadError(`cannot list the model folder: ${e.message}`, p);
  });
  if (entries.includes(MANIFEST_FILE) && entries.includes(MODEL_FILE)) return { kind: 'bundle', path: p };
  if (entries.includes('config.json')) return { kind: 'hf', path: p };
  const bins = entries.filter((e) => e.endsWith('.bin') && !/^tok(enizer|\d+)\.bin$/.test(e));
  if (bins.length === 1) return { kind: 'llama2c', path: path.join(p, bins[0]) };
  const ggufs = entries.filter((e) => e.toLowerCase().endsWith('.gguf'));
  if (ggufs.length === 1) return { kind: 'gguf', path: path.join(p, ggufs[0]) };
  throw new ModelLoadError(
    'not a model: expected a llama2.c .bin checkpoint, a .gguf file, a Hugging Face folder with config.json, or a Ropewalk bundle',
    p,
  );
}

/** The source files whose contents identify a model, in a stable order. */
async function sourceFiles(kind: SourceKind, p: string): Promise<string[]> {
  if (kind === 'gguf') return [p];
  return kind === 'llama2c' ? llama2cSourceFiles(p) : hfSourceFiles(p);
}

/**
 * Resolves a model source to a bundle folder, importing and caching it when needed.
 * @param source llama2.c checkpoint (file, or folder with one), Hugging Face folder, or bundle folder.
 * @param cacheDir where imported bundles live (default `defaultCacheDir()`).
 * @param opts.quantize quantize float Linear weights at import (a separate cached bundle). Ignored,
 *   with a `note`, for a source whose weights are quantized already (`quantizeIgnored`).
 * @param opts.target the graph target to build for (default `CPU_TARGET`); a bundle folder is
 *   used as it is, whatever it was built for.
 * @param opts.clock now in ms since the epoch, for the source fingerprint's racy-file check
 *   (default `Date.now`; source-fingerprint.ts).
 * @returns the loaded bundle, and the note.
 * @throws ModelLoadError / TokenizerError for bad sources (nothing is left half-written in the cache).
 */
export async function resolveModel(
  source: string,
  cacheDir = defaultCacheDir(),
  onProgress?: ImportProgress,
  opts: { quantize?: QuantizeOption; signal?: AbortSignal; target?: GraphTarget; clock?: () => number } = {},
): Promise<ResolvedBundle> {
  const { quantize, signal, target = CPU_TARGET, clock = Date.now } = opts;
  try {
    return await resolveModelUnchecked(source, cacheDir, onProgress, quantize, signal, target, clock);
  } catch (e) {
    if (signal?.aborted) throw cancelled(e);
    // File-system surprises (EIO on /proc files, EACCES, …) are load errors too, in one sentence.
    if (e instanceof EngineError) throw e;
    throw new ModelLoadError(`cannot read the model: ${(e as Error).message}`, source, { cause: e });
  }
}

/** ggml's float types: a matrix in one may be the classifier, which the native graph runs as MatMulF32. */
const FLOAT_MATRIX_TYPES = new Set(['F32', 'F16', 'BF16']);

/**
 * The target a source's bundle is built for: `NATIVE_CPU_TARGET` where its graph may differ from
 * the CPU graph — a llama2.c or HF checkpoint (a float classifier: ropewalk.MatMulF32), a GGUF
 * file with a float matrix (the classifier may be one) or with matrices that ropewalk.MatMulQ8 or
 * MatMulQ8K runs (`NATIVE_KERNEL_GGUF_TYPES`), told from one read of its header; any other GGUF
 * file (every matrix in another type, Q5_K say) shares the CPU target's bundle, the same graph,
 * built once.
 */
async function builtTarget(src: { kind: string; path: string }, target: GraphTarget): Promise<GraphTarget> {
  if (!target.nativeKernels || src.kind !== 'gguf') return target;
  const types = await ggufMatrixTypes(src.path);
  return [...types].some((t) => NATIVE_KERNEL_GGUF_TYPES.has(t) || FLOAT_MATRIX_TYPES.has(t)) ? target : CPU_TARGET;
}

async function resolveModelUnchecked(
  source: string,
  cacheDir: string,
  onProgress: ImportProgress | undefined,
  quantize: QuantizeOption | undefined,
  signal: AbortSignal | undefined,
  target: GraphTarget,
  clock: () => number,
): Promise<ResolvedBundle> {
  const src = await detectSource(path.resolve(source));
  const note = quantize ? await quantizeIgnored(src, quantize) : null;
  // Ignored means the bundle as stored (its cache key too), not a copy that differs in name only.
  if (note) quantize = undefined;
  if (src.kind === 'bundle') return { ...(await loadBundle(src.path)), note };
  target = await builtTarget(src, target);
  const files = await sourceFiles(src.kind, src.path);
  const salt = `${FINGERPRINT_SALT}:${quantize ?? 'as-stored'}${targetKey(target)}`;
  const before = await fingerprintFiles(files, salt, clock);
  const known = await bundleByFingerprint(cacheDir, before.key);
  if (known) {
    onProgress?.({ phase: 'cached', fraction: 1 });
    return { ...known, note };
  }
  onProgress?.({ phase: 'hash', fraction: 0 });
  const sourceHash = await hashFiles(files, signal);
  const key = createHash('sha256').update(`${sourceHash}:${BUNDLE_BUILDER_VERSION}${quantize ? `:${quantize}` : ''}${targetKey(target)}`).digest('hex').slice(0, 32);
  const dir = path.join(cacheDir, key);
  let bundle = await loadBundle(dir).catch(() => null);
  if (bundle) onProgress?.({ phase: 'cached', fraction: 1 });
  else bundle = await importInto(src, sourceHash, dir, quantize, target, onProgress, signal);
  // Remember the fingerprint only if no file changed while we read them and none is racy.
  const after = await fingerprintFiles(files, salt, clock);
  if (after.key === before.key && after.settled) await recordFingerprint(cacheDir, before.key, key);
  return { ...bundle, note };
}

/**
 * Why `quantize` cannot apply to a source, in one line for the CLI's stderr and the model panel,
 * or null when it applies. It applies to float weights only: llama2.c and Hugging Face sources,
 * and a GGUF file of F32/F16/BF16 tensors (dequantized to float32 at import, then quantized).
 * A GGUF file with quantized tensors keeps its own blocks (requantizing them would only add a
 * second rounding; llama.cpp loads such a file as it is), and a bundle was imported
 * already.
 * @throws ModelLoadError for a GGUF file whose header cannot be read.
 */
async function quantizeIgnored(src: { kind: SourceKind; path: string }, quantize: QuantizeOption): Promise<string | null> {
  const name = path.basename(src.path);
  if (src.kind === 'bundle') return `${quantize} quantization ignored: ${name} is a Ropewalk bundle, imported already; its weights are used as stored`;
  if (src.kind !== 'gguf') return null;
  const types = await ggufQuantizedTypes(src.path);
  return types.length ? `${quantize} quantization ignored: ${name} is already quantized (${types.join(', ')}); its blocks are used as stored` : null;
}

/**
 * Imports a source (its content hash already known) into the bundle folder `dir`. A Hugging Face
 * folder streams: each weight is read in chunks from its safetensors file while the bundle is
 * written (converted to float32, or quantized for `--quantize`, chunk by chunk), and its
 * tokenizer.json is copied. A GGUF file streams its float tensors the same way (its quantized
 * blocks are converted in memory first); a llama2.c checkpoint (small) is read into memory.
 */
async function importInto(
  src: { kind: SourceKind; path: string },
  sourceHash: string,
  dir: string,
  quantize: QuantizeOption | undefined,
  target: GraphTarget,
  onProgress?: ImportProgress,
  signal?: AbortSignal,
): Promise<LoadedBundle> {
  onProgress?.({ phase: 'import', fraction: 0 });
  const imported: OpenedModel =
    src.kind === 'hf' ? await openHuggingFace(src.path, { sourceHash })
    : src.kind === 'gguf' ? await openGgufModel(src.path, { sourceHash, ggufBlocks: target.nativeKernels === true })
    : openedFromMemory(await importLlama2c(src.path));
  if (quantize) imported.weights = quantizeLinearWeights(imported.weights, quantize === 'q4' ? 4 : 8);
  try {
    imported.manifest.source = { kind: src.kind, path: src.path, sha256: sourceHash };
    return await writeBundle(imported, dir, onProgress, signal, target);
  } finally {
    await imported.close();
  }
}

/**
 * `kv` (the float16-KV graph) when its external data is `main`'s, segment for segment (the graphs
 * differ in Cast nodes only, decoder-graph.ts), so both read the one data file `main` writes.
 * @throws ModelLoadError otherwise (a builder bug: the second graph would read wrong bytes).
 */
function sameData(main: BuiltModel, kv: BuiltModel): BuiltModel {
  const layout = (b: BuiltModel) => JSON.stringify([b.dataBytes, b.segments.map((s) => [s.name, s.offset, s.bytes])]);
  if (layout(main) !== layout(kv)) {
    throw new ModelLoadError(`the float16-KV graph's external data differs from the float32-KV graph's (${kv.segments.length} against ${main.segments.length} segments)`);
  }
  return kv;
}
/** Mixed into fingerprints, so a new bundle builder never matches an old record. */
const FINGERPRINT_SALT = `ropewalk-bundle-${BUNDLE_BUILDER_VERSION}`;

/** The bundle a fingerprint was recorded for, when the record and the bundle are both intact. */
async function bundleByFingerprint(cacheDir: string, fingerprint: string): Promise<LoadedBundle | null> {
  const key = await readFingerprint(cacheDir, fingerprint);
  return key ? loadBundle(path.join(cacheDir, key)).catch(() => null) : null;
}

/** The cache's folder of fingerprint → bundle key records (every other entry is a bundle). */
export const FINGERPRINTS_DIR = 'fingerprints';
const BUNDLE_KEY = /^[0-9a-f]{32}$/;

/** The bundle key recorded for a source fingerprint, or null (none, unreadable or malformed). */
async function readFingerprint(cacheDir: string, fingerprint: string): Promise<string | null> {
  const key = await readFile(path.join(cacheDir, FINGERPRINTS_DIR, fingerprint), 'utf8').catch(() => null);
  return key !== null && BUNDLE_KEY.test(key) ? key : null;
}

/**
 * Records fingerprint → bundle key (a temp file renamed into place, so readers never see half a
 * key). Best effort: a cache folder that cannot be written only costs the next start a hash.
 */
async function recordFingerprint(cacheDir: string, fingerprint: string, key: string): Promise<void> {
  const folder = path.join(cacheDir, FINGERPRINTS_DIR);
  const tmp = path.join(folder, `.${fingerprint}.tmp-${randomUUID()}`);
  try {
    await mkdir(folder, { recursive: true });
    await writeFile(tmp, key);
    await rename(tmp, path.join(folder, fingerprint));
  } catch {
    await rm(tmp, { force: true });
  }
}

/**
 * Builds the graph from the weights' shapes and writes a bundle folder atomically (a temp folder
 * renamed into place). Weights are written one at a time, lazy ones in chunks straight from the
 * source files, so memory holds at most one in-memory tensor, and a chunk when they stream;
 * tokenizer.json is written from its content, or read from its file after the weights, checked
 * and copied as it is. Progress reports the bytes written and an ETA. A failure or a cancel
 * removes the temp folder: the cache never holds half a bundle.
 * @returns the bundle as `loadBundle` would read it (the tokenizer parsed once, here).
 * @param signal cancels between chunks.
 * @param target the graph target (default `CPU_TARGET`); other targets are recorded in the
 *   manifest (`graphTarget`, and `dtype` float16 for a float16 graph); its `kvDtype` is not the
 *   bundle's: a CPU float32 bundle gets the float16-KV graph too (`KV_FLOAT16_MODEL_FILE`).
 * @throws ModelLoadError (internal) when the float16-KV graph would not read the same data file.
 * @throws ModelLoadError on a weight/shape problem or a write failure; EngineError('CANCELLED')
 *   when `signal` aborts.
 */
export async function writeBundle(
  model: Omit<OpenedModel, 'close'>,
  dir: string,
  onProgress?: ImportProgress,
  signal?: AbortSignal,
  target: GraphTarget = CPU_TARGET,
): Promise<LoadedBundle> {
  onProgress?.({ phase: 'build', fraction: 0 });
  const { kvDtype: _, ...graph } = target;
  const built = buildDecoderGraph(model.manifest.config, model.weights, graph);
  const kvFloat16 = hasFloat16KvGraph(graph) ? sameData(built, buildDecoderGraph(model.manifest.config, model.weights, { ...graph, kvDtype: 'float16' })) : null;
  if (targetKey(graph)) Object.assign(model.manifest, { dtype: graph.dtype, graphTarget: { ...graph } });
  if (kvFloat16) model.manifest.kvGraphs = { float16: KV_FLOAT16_MODEL_FILE };
  model.manifest.weights = summarizeWeights(model.weights);
  const tmp = `${dir}.tmp-${randomUUID()}`;
  await mkdir(tmp, { recursive: true });
  try {
    await writeFile(path.join(tmp, MODEL_FILE), built.model);
    if (kvFloat16) await writeFile(path.join(tmp, KV_FLOAT16_MODEL_FILE), kvFloat16.model);
    const t0 = Date.now();
    onProgress?.({ phase: 'write', fraction: 0 });
    await writeExternalData(
      path.join(tmp, EXTERNAL_DATA_FILE),
      built,
      ({ bytes, totalBytes }) => {
        const rate = bytes / Math.max(1, Date.now() - t0); // bytes per ms
        onProgress?.({ phase: 'write', fraction: bytes / totalBytes, bytes, totalBytes, etaSeconds: Math.round((totalBytes - bytes) / rate / 1000) });
      },
      signal,
    );
    const tokenizerJson = await writeTokenizerJson(model, path.join(tmp, TOKENIZER_FILE));
    await writeFile(path.join(tmp, TOKENIZER_CONFIG_FILE), JSON.stringify(model.tokenizerConfig, null, 1));
    // The manifest goes last: a folder without one is not a bundle.
    await writeFile(path.join(tmp, MANIFEST_FILE), JSON.stringify(model.manifest, null, 2));
    signal?.throwIfAborted();
    await moveIntoPlace(tmp, dir);
    return { dir, modelPath: path.join(dir, MODEL_FILE), manifest: model.manifest, tokenizerJson, tokenizerConfig: model.tokenizerConfig };
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    if (signal?.aborted) throw cancelled(e);
    throw e instanceof EngineError ? e : new ModelLoadError(`cannot write model bundle: ${(e as Error).message}`, dir, { cause: e });
  }
}

/**
 * Writes the bundle's tokenizer.json at `to`: its content serialized, or its file read, parsed
 * once, checked (which fills in the manifest's special tokens) and copied as it is.
 * @returns the parsed tokenizer.json.
 * @throws ModelLoadError for a file that cannot be read, is not JSON or fails its check.
 */
async function writeTokenizerJson(model: Pick<OpenedModel, 'tokenizer' | 'manifest'>, to: string): Promise<unknown> {
  const source = model.tokenizer;
  if (!('file' in source)) {
    await writeFile(to, JSON.stringify(source.json));
    return source.json;
  }
  const bytes = await readFile(source.file).catch((e: Error) => {
    throw new ModelLoadError(`cannot read tokenizer.json: ${e.message}`, source.file, { cause: e });
  });
  const json = parseJson(bytes.toString('utf8'), source.file);
  Object.assign(model.manifest, source.check(json));
  await writeFile(to, bytes);
  return json;
}

function cancelled(cause: unknown): EngineError {
  return cause instanceof EngineError && cause.code === 'CANCELLED'
    ? cause
    : new EngineError('CANCELLED', 'the import was cancelled; nothing was written to the model cache', { cause });
}

/**
 * Renames a finished temp bundle to `dir`. Another import of the same source (another process,
 * or a concurrent load) may have got there first: a complete bundle already in place is kept and
 * ours dropped; only an incomplete one is replaced.
 */
async function moveIntoPlace(tmp: string, dir: string): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await rename(tmp, dir);
      return;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'EPERM') throw e;
      if (await loadBundle(dir).then(() => true, () => false)) {
        await rm(tmp, { recursive: true, force: true });
        return;
      }
      await rm(dir, { recursive: true, force: true });
    }
  }
  throw new ModelLoadError('cannot move the imported bundle into the cache', dir);
}

/**
 * Reads a bundle folder's manifest and tokenizer files.
 * @throws ModelLoadError naming the missing or corrupt file.
 */
export async function loadBundle(dir: string): Promise<LoadedBundle> {
  const readJson = async (name: string): Promise<any> => {
    const file = path.join(dir, name);
    const text = await readFile(file, 'utf8').catch(() => {
      throw new ModelLoadError(`bundle file ${name} is missing`, file);
    });
    try {
      return JSON.parse(text);
    } catch {
      throw new ModelLoadError(`bundle file ${name} is not valid JSON`, file);
    }
  };
  const manifest = (await readJson(MANIFEST_FILE)) as ModelManifest;
  if (manifest?.format !== 'ropewalk-bundle' || manifest.version !== 1 || !manifest.config) {
    throw new ModelLoadError('not a Ropewalk bundle manifest (format/version)', path.join(dir, MANIFEST_FILE));
  }
  const modelPath = path.join(dir, MODEL_FILE);
  if (!(await stat(modelPath).catch(() => null))) throw new ModelLoadError('bundle is missing model.onnx', modelPath);
  return {
    dir,
    modelPath,
    manifest,
    tokenizerJson: await readJson(TOKENIZER_FILE),
    tokenizerConfig: await readJson(TOKENIZER_CONFIG_FILE),
  };
}
