/**
 * The model: which one is loaded in the engine worker, its state for the window (`ModelState`,
 * pushed as `modelState` events), and loading another one.
 *
 * - `start()` loads, in the background, the model the user last opened (remembered in the
 *   settings table) or else the embedded stories260K; if the remembered one fails, the embedded
 *   one is loaded and the failure is reported in `error`.
 * - `open(path, quantize?)` imports and loads a model with progress (`quantize`: its float Linear
 *   weights as 4- or 8-bit blocks, a bundle of their own; remembered with the path, and kept by
 *   reloads when the settings change). A failure leaves the previous model
 *   loaded and answering (the worker swaps only after a successful load), sets `error`, and
 *   rejects with the engine's error (code MODEL_LOAD, TOKENIZER or INVALID_OPTION).
 * - One load at a time, never while an answer is generated (`BUSY`).
 * - After a worker crash, `recover()` restarts the worker and reloads the model; `ready()`
 *   waits for any load or recovery in progress, so callers never race a half-loaded worker.
 */
import { QUANTIZE_OPTIONS, type ModelInfo, type ModelState, type QuantizeOption } from '../contract/types.ts';
import type { EngineHost } from '../engine-host/host.ts';
import type { LoadOptions } from '../engine-host/protocol.ts';
import type { ModelInfo as EngineModelInfo } from '../engine/generate/engine.ts';
import { firstLine, ServiceError } from './errors.ts';
import type { Emit } from './events.ts';
import type { ConversationStore } from './store.ts';

export type { Emit };

const MODEL_PATH_KEY = 'model.path';
const MODEL_QUANTIZE_KEY = 'model.quantize';

export interface ModelServiceOptions {
  host: EngineHost;
  store: ConversationStore;
  emit: Emit;
  /** The embedded model's checkpoint. */
  defaultModel: string;
  /** Where imported bundles are cached (default: the engine's, ~/.cache/ropewalk/models). */
  cacheDir?: string;
  /** The load options the settings ask for (max context set by the user, execution provider). */
  loadOptions: () => Pick<LoadOptions, 'maxContext' | 'executionProvider' | 'backend'>;
  /** Whether an answer is being generated now (a load must wait for it). */
  isGenerating: () => boolean;
  /** Called after a model loaded (the budget changes with it). */
  onLoaded?: () => void;
}

/** Loads the default or an opened model in the engine worker and reports ModelState as it goes. */
export class ModelService {
  private current: ModelState = { status: 'loading', info: null, progress: null, error: null };
  private source: string | null = null;
  private quantize: QuantizeOption | undefined;
  private pending: Promise<void> | null = null;

  constructor(private readonly deps: ModelServiceOptions) {}

  /** The state the window shows. */
  get state(): ModelState {
    return this.current;
  }

  /** The loaded model's trained context, or undefined before any model loaded. */
  get trainedContext(): number | undefined {
    return this.current.info?.trainedContext;
  }

  /** Resolves once no load or recovery is in progress (never rejects). */
  async ready(): Promise<void> {
    while (this.pending) await this.pending.catch(() => undefined);
  }

  /** Starts loading the remembered or embedded model in the background; resolves when done (never rejects). */
  start(): Promise<void> {
    const settings = this.deps.store.getSettings();
    const remembered = settings[MODEL_PATH_KEY];
    const first = typeof remembered === 'string' && remembered ? remembered : this.deps.defaultModel;
    const quantize = first === remembered ? QUANTIZE_OPTIONS.find((q) => q === settings[MODEL_QUANTIZE_KEY]) : undefined;
    return this.exclusive(async () => {
      try {
        await this.load(first, undefined, quantize);
      } catch (e) {
        if (first === this.deps.defaultModel) return this.fail(e);
        const why = `the last model (${first}) could not be loaded: ${firstLine(e)}`;
        try {
          await this.load(this.deps.defaultModel);
          this.deps.store.setSettings({ [MODEL_PATH_KEY]: undefined, [MODEL_QUANTIZE_KEY]: undefined });
          this.set({ ...this.current, error: `${why}; the embedded model is loaded instead` });
        } catch (e2) {
          this.fail(e2, why);
        }
      }
    }).catch(() => undefined);
  }

  /**
   * Imports (first time) and loads the model at `path`, emitting progress.
   * @param quantize import its float Linear weights as 4- or 8-bit blocks (undefined: as stored).
   * @returns the new state. @throws ServiceError BUSY; the engine's load error (old model kept).
   */
  async open(path: string, quantize?: QuantizeOption): Promise<ModelState> {
    this.assertFree();
    await this.exclusive(async () => {
      try {
        await this.load(path, undefined, quantize);
        this.deps.store.setSettings({ [MODEL_PATH_KEY]: path, [MODEL_QUANTIZE_KEY]: quantize });
      } catch (e) {
        this.fail(e);
        throw e;
      }
    });
    return this.current;
  }

  /**
   * Reloads the current model with new options (the settings changed).
   * @throws ServiceError BUSY / MODEL_NOT_READY; the engine's load error (old model kept).
   */
  async reload(options: Pick<LoadOptions, 'maxContext' | 'executionProvider' | 'backend'>): Promise<void> {
    this.assertFree();
    const source = this.source;
    if (!source) throw new ServiceError('MODEL_NOT_READY', 'no model is loaded yet');
    await this.exclusive(async () => {
      try {
        await this.load(source, options, this.quantize);
      } catch (e) {
        this.fail(e);
        throw e;
      }
    });
  }

  /** After the worker crashed: restarts it and reloads the model now (the host does the work). */
  recover(): Promise<void> {
    if (this.pending) return this.pending;
    this.set({ ...this.current, status: 'loading', progress: { phase: 'restart', fraction: 0 } });
    return this.exclusive(async () => {
      try {
        await this.deps.host.stats();
        this.loaded(this.deps.host.model);
      } catch (e) {
        this.fail(e);
      }
    }).catch(() => undefined);
  }

  /** Throws MODEL_NOT_READY unless a model is loaded in the host (call after `ready()`). */
  assertLoaded(): void {
    if (!this.deps.host.model) {
      throw new ServiceError('MODEL_NOT_READY', this.current.error ? `no model is loaded: ${this.current.error}` : 'no model is loaded yet');
    }
  }

  private assertFree(): void {
    if (this.pending) throw new ServiceError('BUSY', 'a model is already loading; wait for it to finish');
    if (this.deps.isGenerating()) throw new ServiceError('BUSY', 'an answer is being generated; stop it before loading a model');
  }

  private exclusive(work: () => Promise<void>): Promise<void> {
    const p = work().finally(() => {
      if (this.pending === p) this.pending = null;
    });
    this.pending = p;
    return p;
  }

  private async load(path: string, options?: Pick<LoadOptions, 'maxContext' | 'executionProvider' | 'backend'>, quantize?: QuantizeOption): Promise<void> {
    this.set({ status: 'loading', info: this.current.info, progress: { phase: 'start', fraction: 0 }, error: null });
    const opts = options ?? this.deps.loadOptions();
    const info = await this.deps.host.load(
      path,
      { ...opts, ...(quantize ? { quantize } : {}), ...(this.deps.cacheDir ? { cacheDir: this.deps.cacheDir } : {}) },
      (phase, fraction) => this.set({ status: 'loading', info: this.current.info, progress: { phase, fraction }, error: null }),
    );
    this.source = path;
    this.quantize = quantize;
    this.loaded(info);
  }

  private loaded(info: EngineModelInfo | null): void {
    this.set({ status: info ? 'ready' : 'error', info: info ? toContractInfo(info) : null, progress: null, error: info ? null : 'no model is loaded' });
    this.deps.onLoaded?.();
  }

  /** A failed load: the previous model (host.model) still answers. */
  private fail(e: unknown, prefix?: string): void {
    const info = this.deps.host.model;
    const msg = prefix ? `${prefix}; ${firstLine(e)}` : firstLine(e);
    this.set({ status: info ? 'ready' : 'error', info: info ? toContractInfo(info) : null, progress: null, error: msg });
  }

  private set(s: ModelState): void {
    this.current = s;
    this.deps.emit('modelState', s);
  }
}

/** The engine's model info without its internal bundle path. */
export function toContractInfo(i: EngineModelInfo): ModelInfo {
  return {
    name: i.name,
    architecture: i.architecture,
    trainedContext: i.trainedContext,
    maxContext: i.maxContext,
    vocabSize: i.vocabSize,
    backend: i.backend,
    executionProvider: i.executionProvider,
    fallbackReason: i.fallbackReason,
    hasChatTemplate: i.hasChatTemplate,
    weights: { ...i.weights },
  };
}
