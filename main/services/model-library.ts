/**
 * The model library: every model on this machine that `model-scan.ts` finds (the built-in
 * model first, always), with the facts `model-facts.ts` reads from its header and the memory
 * it needs at the max context the load would use (`estimateForShape`, the load's own estimate:
 * weights + KV cache + RoPE cache) against the memory available now; and the models opened
 * recently, kept in the store's settings table.
 *
 * Facts are cached in memory per path and (size, mtime), so listing again after the first scan
 * reads only what changed. Roots: Ropewalk's models folder (the `modelsFolder` setting, '' = the
 * default) and the other apps' folders under `home` (`ROPEWALK_LIBRARY_HOME` in place of $HOME:
 * tests point it at fixture folders).
 */
import { stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LibraryMemory, LibraryModel, LibrarySource, ModelLibrary, RecentModel } from '../contract/library.ts';
import { availableMemory, estimateForShape } from '../engine/model/memory.ts';
import type { KvDtype } from '../engine/cache/kv-cache.ts';
import { DEFAULT_KV_CACHE_DTYPE } from '../engine/model/graph-target.ts';
import { readModelFacts, type ModelFacts } from './model-facts.ts';
import { libraryRoots, scanModels, type ModelCandidate } from './model-scan.ts';
import type { ConversationStore } from './store.ts';

/** A candidate, or the built-in model. */
type Listed = Omit<ModelCandidate, 'source'> & { source: LibrarySource };

const RECENT_KEY = 'library.recent';
/** Recent models kept. */
const RECENT_LIMIT = 8;
/** Headers read at once (a disk is busy enough with a few). */
const READ_CONCURRENCY = 8;

export interface ModelLibraryOptions {
  store: ConversationStore;
  /** The embedded model's checkpoint (listed first, as source 'builtin'). */
  builtinPath: string;
  /** The `modelsFolder` setting ('' = `defaultModelsFolder(home)`). */
  modelsFolder: () => string;
  /** The max context a load of a model with this trained context would use (the user's setting, else the trained context). */
  maxContext: (trainedContext: number | null) => number;
  /** The KV cache dtype a load would use (the user's setting; default `DEFAULT_KV_CACHE_DTYPE`). */
  kvCacheDtype?: () => KvDtype;
  /** $HOME for the other apps' folders (default: `ROPEWALK_LIBRARY_HOME`, else the OS's). */
  home?: string;
  /** Environment for the apps' own folder overrides (default: process.env, unless `ROPEWALK_LIBRARY_HOME` is set: then none). */
  env?: Record<string, string | undefined>;
  /** Memory available now, bytes (default: `availableMemory()`, as the load checks). */
  available?: () => number;
}

/** Ropewalk's own models folder when the setting is empty. */
export function defaultModelsFolder(home: string): string {
  return path.join(home, '.ropewalk', 'models');
}

/** Lists the models on this machine and remembers the ones opened. */
export class ModelLibraryService {
  private readonly facts = new Map<string, { key: string; facts: ModelFacts }>();
  private readonly names = new Map<string, string>();
  private readonly home: string;
  private readonly env: Record<string, string | undefined>;

  constructor(private readonly opts: ModelLibraryOptions) {
    const override = process.env.ROPEWALK_LIBRARY_HOME;
    this.home = opts.home ?? override ?? os.homedir();
    this.env = opts.env ?? (override ? {} : process.env);
  }

  /**
   * Scans every root and reads the headers of what changed since the last scan.
   * @returns the built-in model first, then each root's models in path order; never throws for
   *   a model (its failure is its `problem`); a root that does not exist is `found: false`.
   */
  async list(): Promise<ModelLibrary> {
    const t0 = performance.now();
    const roots = await libraryRoots({ home: this.home, modelsFolder: this.opts.modelsFolder() || defaultModelsFolder(this.home), env: this.env });
    const builtin: Listed = { path: this.opts.builtinPath, name: path.basename(this.opts.builtinPath).replace(/\.bin$/, ''), source: 'builtin', format: 'llama2c' };
    const candidates: Listed[] = [builtin, ...(await scanModels(roots)).filter((c) => path.resolve(c.path) !== path.resolve(builtin.path))];
    const models: LibraryModel[] = new Array(candidates.length);
    for (let i = 0; i < candidates.length; i += READ_CONCURRENCY) {
      const batch = candidates.slice(i, i + READ_CONCURRENCY);
      const done = await Promise.all(batch.map((c) => this.entry(c)));
      done.forEach((m, j) => (models[i + j] = m));
    }
    for (const m of [...models].reverse()) this.names.set(m.path, m.name); // a blob two Ollama tags share: the first one listed
    return { models, recent: this.recent(), roots, scanMs: Math.round(performance.now() - t0) };
  }

  /** The models opened recently, most recent first (paths that no longer exist are kept: the list says so when opened). */
  recent(): RecentModel[] {
    const v = this.opts.store.getSettings()[RECENT_KEY];
    if (!Array.isArray(v)) return [];
    return v.filter((r): r is RecentModel => typeof r?.path === 'string' && typeof r?.name === 'string' && typeof r?.openedAt === 'number');
  }

  /** The name the last scan listed `modelPath` under, else the one it was remembered under; null when neither. */
  nameOf(modelPath: string): string | null {
    return this.names.get(modelPath) ?? this.recent().find((r) => r.path === modelPath)?.name ?? null;
  }

  /** Records that `modelPath` was opened (named as the last scan listed it, else by its file name). */
  remember(modelPath: string, now = Date.now()): void {
    const name = this.nameOf(modelPath) ?? path.basename(modelPath).replace(/\.(gguf|bin)$/i, '');
    const next = [{ path: modelPath, name, openedAt: now }, ...this.recent().filter((r) => r.path !== modelPath)].slice(0, RECENT_LIMIT);
    this.opts.store.setSettings({ [RECENT_KEY]: next });
  }

  private async entry(c: Listed): Promise<LibraryModel> {
    const f = await this.cachedFacts(c);
    return {
      path: c.path,
      name: c.name,
      source: c.source,
      format: c.format,
      architecture: f.architecture,
      quantization: f.quantization,
      parameterCount: f.parameterCount,
      fileBytes: f.fileBytes,
      trainedContext: f.trainedContext,
      memory: this.memory(f),
      problem: f.problem,
    };
  }

  private memory(f: ModelFacts): LibraryMemory | null {
    if (!f.shape || f.weightBytes === null) return null;
    const maxContext = this.opts.maxContext(f.trainedContext);
    const e = estimateForShape(f.shape, f.weightBytes, maxContext, this.opts.kvCacheDtype?.() ?? DEFAULT_KV_CACHE_DTYPE);
    const availableBytes = (this.opts.available ?? availableMemory)();
    return { maxContext, weightBytes: e.weightBytes, kvCacheBytes: e.kvCacheBytes, totalBytes: e.totalBytes, availableBytes, fits: e.totalBytes <= availableBytes };
  }

  private async cachedFacts(c: Listed): Promise<ModelFacts> {
    const st = await stat(c.path).catch(() => null);
    const key = st ? `${c.format}:${st.size}:${st.mtimeMs}` : 'missing';
    const hit = this.facts.get(c.path);
    if (hit && hit.key === key) return hit.facts;
    const facts = await readModelFacts(c.path, c.format);
    this.facts.set(c.path, { key, facts });
    return facts;
  }
}
