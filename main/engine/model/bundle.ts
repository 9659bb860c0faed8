/**
 * Model bundles on disk, and `resolveModel`, which turns whatever the user points at (a llama2.c
 * checkpoint, a Hugging Face folder, a GGUF file, or a bundle) into a bundle folder, importing at most once:
 * imports are cached under `<cacheDir>/<key>/`, where key = SHA-256 of the source files'
 * contents and the graph builder's version, so the second start of the same model skips import.
 *
 * Bundle folder: model.onnx, model.onnx.data (external weights: float32 or MatMulNBits blocks), tokenizer.json,
 * tokenizer_config.json, manifest.json (`ModelManifest`).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EngineError, ModelLoadError } from '../errors.ts';
import { hashFiles } from './content-hash.ts';
import { buildDecoderGraph, EXTERNAL_DATA_FILE } from './decoder-graph.ts';
import { importGguf } from './gguf/import-gguf.ts';
import { hfSourceFiles, importHuggingFace } from './import-hf.ts';
import { importLlama2c, llama2cSourceFiles } from './import-llama2c.ts';
import { quantizeLinearWeights } from './gguf/quantized-weights.ts';
import { summarizeWeights, type ImportedModel, type ModelManifest } from './manifest.ts';

/** Bumped whenever the graph or bundle layout changes, so cached imports are rebuilt. */
export const BUNDLE_BUILDER_VERSION = 3;

export const MODEL_FILE = 'model.onnx';
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

export type SourceKind = 'llama2c' | 'hf' | 'gguf' | 'bundle';

/** `--quantize`: round-to-nearest 4- or 8-bit blocks for the Linear weights of a float source. */
export type QuantizeOption = 'q4' | 'q8';

/** Progress of `resolveModel`, for UIs: phase and a fraction in [0, 1]. */
export type ImportProgress = (p: { phase: 'hash' | 'import' | 'build' | 'write' | 'cached'; fraction: number }) => void;

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
    if (p.toLowerCase().endsWith('.gguf')) return { kind: 'gguf', path: p };
    return { kind: 'llama2c', path: p };
  }
  const entries = await readdir(p).catch((e: Error) => {
    throw new ModelLoadError(`cannot list the model folder: ${e.message}`, p);
  });
  if (entries.includes(MANIFEST_FILE) && entries.includes(MODEL_FILE)) return { kind: 'bundle', path: p };
  if (entries.includes('config.json')) return { kind: 'hf', path: p };
  const bins = entries.filter((e) => e.endsWith('.bin') && !/^tok(enizer|\d+)\.bin$/.test(e));
  if (bins.length === 1) return { kind: 'llama2c', path: path.join(p, bins[0]) };
  throw new ModelLoadError(
    'not a model: expected a llama2.c .bin checkpoint, a Hugging Face folder with config.json, or a Ropewalk bundle',
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
 * @param opts.quantize quantize float Linear weights at import (a separate cached bundle).
 * @returns the loaded bundle.
 * @throws ModelLoadError / TokenizerError for bad sources (nothing is left half-written in the cache).
 */
export async function resolveModel(
  source: string,
  cacheDir = defaultCacheDir(),
  onProgress?: ImportProgress,
  opts: { quantize?: QuantizeOption } = {},
): Promise<LoadedBundle> {
  try {
    return await resolveModelUnchecked(source, cacheDir, onProgress, opts.quantize);
  } catch (e) {
    // File-system surprises (EIO on /proc files, EACCES, …) are load errors too, in one sentence.
    if (e instanceof EngineError) throw e;
    throw new ModelLoadError(`cannot read the model: ${(e as Error).message}`, source, { cause: e });
  }
}

async function resolveModelUnchecked(source: string, cacheDir: string, onProgress?: ImportProgress, quantize?: QuantizeOption): Promise<LoadedBundle> {
  const src = await detectSource(path.resolve(source));
  if (src.kind === 'bundle') return loadBundle(src.path);
  onProgress?.({ phase: 'hash', fraction: 0 });
  const sourceHash = await hashFiles(await sourceFiles(src.kind, src.path));
  const key = createHash('sha256').update(`${sourceHash}:${BUNDLE_BUILDER_VERSION}${quantize ? `:${quantize}` : ''}`).digest('hex').slice(0, 32);
  const dir = path.join(cacheDir, key);
  const cached = await loadBundle(dir).catch(() => null);
  if (cached) {
    onProgress?.({ phase: 'cached', fraction: 1 });
    return cached;
  }
  onProgress?.({ phase: 'import', fraction: 0.1 });
  const imported =
    src.kind === 'llama2c' ? await importLlama2c(src.path)
    : src.kind === 'gguf' ? await importGguf(src.path, { sourceHash })
    : await importHuggingFace(src.path, { sourceHash });
  imported.manifest.source = { kind: src.kind, path: src.path, sha256: sourceHash };
  if (quantize) imported.weights = quantizeLinearWeights(imported.weights, quantize === 'q4' ? 4 : 8);
  await writeBundle(imported, dir, onProgress);
  onProgress?.({ phase: 'write', fraction: 1 });
  return loadBundle(dir);
}

/**
 * Builds the graph and writes a bundle folder atomically (a temp folder renamed into place).
 * @throws ModelLoadError on a weight/shape problem or a write failure.
 */
export async function writeBundle(model: ImportedModel, dir: string, onProgress?: ImportProgress): Promise<void> {
  onProgress?.({ phase: 'build', fraction: 0.3 });
  const built = buildDecoderGraph(model.manifest.config, model.weights);
  model.manifest.weights = summarizeWeights(model.weights);
  const tmp = `${dir}.tmp-${randomUUID()}`;
  await mkdir(tmp, { recursive: true });
  try {
    onProgress?.({ phase: 'write', fraction: 0.5 });
    await writeFile(path.join(tmp, MODEL_FILE), built.model);
    await writeChunks(path.join(tmp, EXTERNAL_DATA_FILE), built.data);
    await writeFile(path.join(tmp, TOKENIZER_FILE), JSON.stringify(model.tokenizerJson));
    await writeFile(path.join(tmp, TOKENIZER_CONFIG_FILE), JSON.stringify(model.tokenizerConfig, null, 1));
    // The manifest goes last: a folder without one is not a bundle.
    await writeFile(path.join(tmp, MANIFEST_FILE), JSON.stringify(model.manifest, null, 2));
    await moveIntoPlace(tmp, dir);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e instanceof ModelLoadError ? e : new ModelLoadError(`cannot write model bundle: ${(e as Error).message}`, dir, { cause: e });
  }
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

async function writeChunks(file: string, chunks: Uint8Array[]): Promise<void> {
  const out = createWriteStream(file);
  for (const c of chunks) {
    if (!out.write(c)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
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
