/**
 * The model: which one is loaded in the engine worker, its state for the window (`ModelState`,
 * pushed as `modelState` events), and loading another one.
 *
 * - `start()` loads, in the background, the model the user last opened (remembered in the
 *   settings table) or else the embedded stories260K; if the remembered one fails, the embedded
 *   one is loaded and the failure is reported in `error`.
 * - `open(path, quantize?, defaults?)` imports and loads a model with progress (`quantize`: its float Linear
 *   weights as 4- or 8-bit blocks, a bundle of their own; remembered with the path, and kept by
 *   reloads when the settings change; `defaults`: the model's remembered max context, and the
 *   rest of its defaults applied before the window hears it is ready, model-profiles.ts). A failure leaves the previous model
 *   loaded and answering (the worker swaps only after a successful load), sets `error`, and
 *   rejects with the engine's error (code MODEL_LOAD, TOKENIZER or INVALID_OPTION).
 * - One load at a time, never while an answer is generated (`BUSY`).
 * - After a worker crash, `recover()` restarts the worker and reloads the model; `ready()`
 *   waits for any load or recovery in progress, so callers never race a half-loaded worker.
 * - `openRemote(config)` makes a remote engine (an OpenAI-compatible server) answer instead,
 *   through the same `EngineSwitch` the other services use; it is remembered (its API key in
 *   `RemoteKeyStore`) and reconnected at the next start. A failure keeps the engine that
 *   answered. `open(path)` goes back to a local model.
 */
import { QUANTIZE_OPTIONS, type ModelInfo, type ModelState, type QuantizeOption, type RemoteModelEntry } from '../contract/types.ts';
import type { QuantizeOption as EngineQuantizeOption } from '../engine/model/bundle.ts';
import type { EngineHost } from '../engine-host/host.ts';
import { normalizeBaseUrl } from '../remote/http.ts';
import { listRemoteModels, RemoteEngine, type RemoteConfig } from '../remote/remote-engine.ts';
import type { EngineSwitch } from './engine-switch.ts';
import type { RemoteKeyStore } from './secrets.ts';
import type { LoadOptions } from '../engine-host/protocol.ts';

/** The load options the settings decide (a change of one reloads the model: settings.ts). */
export type SettingsLoadOptions = Pick<LoadOptions, 'maxContext' | 'executionProvider' | 'backend' | 'threads' | 'kvCacheDtype'>;
import type { ModelInfo as EngineModelInfo } from '../engine/generate/engine.ts';
import { firstLine, ServiceError } from './errors.ts';
import type { Emit } from './events.ts';
import type { ConversationStore } from './store.ts';

/** The wire's quantize choices are the engine's, both ways (a compile-time check; fails to type-check if they part). */
const SAME_QUANTIZE_OPTIONS: [QuantizeOption, EngineQuantizeOption] extends [EngineQuantizeOption, QuantizeOption] ? true : never = true;
void SAME_QUANTIZE_OPTIONS;

export type { Emit };

const MODEL_PATH_KEY = 'model.path';
const MODEL_QUANTIZE_KEY = 'model.quantize';
/** The remote engine in use ({ baseUrl, model, tokenizerPath }); absent: a local model answers. */
const REMOTE_KEY = 'model.remote';

/** What connecting a remote engine takes: `apiKey` undefined keeps the saved one, '' means none. */
export type RemoteRequest = Omit<RemoteConfig, 'apiKey' | 'tokenizerPath'> & { apiKey?: string; tokenizerPath?: string };

export interface ModelServiceOptions {
  /** The local engine worker (loads models). */
  host: EngineHost;
  /** What the services use: the local worker or a remote engine. */
  engine: EngineSwitch;
  /** Where a remote engine's API key is kept. */
  keys: RemoteKeyStore;
  /** This Ropewalk's id in its API's `X-Ropewalk-Instance` header (it must not be its own remote). */
  instanceId: string;
  store: ConversationStore;
  emit: Emit;
  /** The embedded model's checkpoint. */
  defaultModel: string;
  /** Where imported bundles are cached (default: the engine's, ~/.cache/ropewalk/models). */
  cacheDir?: string;
  /** The load options the settings ask for (max context set by the user, execution provider). */
  loadOptions: () => SettingsLoadOptions;
  /** Whether an answer is being generated now (a load must wait for it). */
  isGenerating: () => boolean;
  /** Called after a model loaded (the budget changes with it). */
  onLoaded?: () => void;
  /** The name the model library gives a local model's path (an Ollama blob: `name:tag`), or null: the bundle's own name. */
  nameOf?: (path: string) => string | null;
}

/** What `open` takes from a model's remembered defaults. */
export interface OpenDefaults {
  maxContext?: number;
  /** Applies the rest (the settings) once the model loaded. */
  apply?: () => void;
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

  /** The path of the local model loaded now (null: none yet, or a remote engine answers). */
  get localPath(): string | null {
    return this.deps.engine.remote ? null : this.source;
  }

  /** Resolves once no load or recovery is in progress (never rejects). */
  async ready(): Promise<void> {
    while (this.pending) await this.pending.catch(() => undefined);
  }

  /** Starts loading the remembered or embedded model in the background; resolves when done (never rejects). */
  start(): Promise<void> {
    const remote = this.deps.store.getSettings()[REMOTE_KEY] as { baseUrl?: unknown; model?: unknown; tokenizerPath?: unknown } | undefined;
    if (remote && typeof remote.baseUrl === 'string' && typeof remote.model === 'string') {
      const request = { baseUrl: remote.baseUrl, model: remote.model, ...(typeof remote.tokenizerPath === 'string' ? { tokenizerPath: remote.tokenizerPath } : {}) };
      return this.exclusive(async () => {
        try {
          await this.connect(request);
        } catch (e) {
          // The server is down or the key gone: the local model answers, and the window says why.
          this.deps.store.setSettings({ [REMOTE_KEY]: undefined });
          await this.startLocal();
          this.set({ ...this.current, error: `the remote engine could not be reached: ${firstLine(e)}; a local model answers instead` });
        }
      }).catch(() => undefined);
    }
    return this.exclusive(() => this.startLocal()).catch(() => undefined);
  }

  /** Loads the remembered local model, or the embedded one. */
  private async startLocal(): Promise<void> {
    const settings = this.deps.store.getSettings();
    const remembered = settings[MODEL_PATH_KEY];
    const first = typeof remembered === 'string' && remembered ? remembered : this.deps.defaultModel;
    const quantize = first === remembered ? QUANTIZE_OPTIONS.find((q) => q === settings[MODEL_QUANTIZE_KEY]) : undefined;
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
  }

  /**
   * The models a remote server lists; `apiKey` undefined uses the key saved for that URL.
   * @throws RemoteEngineError (unreachable, 401, not OpenAI-compatible…).
   */
  async listRemote(baseUrl: string, apiKey?: string): Promise<RemoteModelEntry[]> {
    return listRemoteModels(baseUrl, apiKey ?? this.deps.keys.load(normalizeUrl(baseUrl)));
  }

  /**
   * Connects a remote engine and makes it answer (see RemoteRequest for the key).
   * @returns the new state. @throws ServiceError BUSY; RemoteEngineError (the engine that answered stays).
   */
  async openRemote(request: RemoteRequest): Promise<ModelState> {
    this.assertFree();
    await this.exclusive(async () => {
      try {
        await this.connect(request);
      } catch (e) {
        this.fail(e);
        throw e;
      }
    });
    return this.current;
  }

  private async connect(request: RemoteRequest): Promise<void> {
    this.set({ status: 'loading', info: this.current.info, progress: { phase: 'connect', fraction: 0 }, error: null });
    const baseUrl = normalizeUrl(request.baseUrl);
    const apiKey = request.apiKey === undefined ? this.deps.keys.load(baseUrl) : request.apiKey || null;
    const tokenizerPath = request.tokenizerPath?.trim() || null;
    const remote = await RemoteEngine.connect({ baseUrl, apiKey, model: request.model, tokenizerPath }, this.deps.instanceId);
    this.deps.keys.save(remote.baseUrl, apiKey);
    this.deps.store.setSettings({ [REMOTE_KEY]: { baseUrl: remote.baseUrl, model: remote.modelId, ...(tokenizerPath ? { tokenizerPath } : {}) } });
    this.deps.engine.use(remote);
    this.loaded(remote.model);
  }

  /**
   * Imports (first time) and loads the model at `path`, emitting progress.
   * @param quantize import its float Linear weights as 4- or 8-bit blocks (undefined: as stored).
   * @param defaults the model's remembered defaults (model-profiles.ts): its max context for the
   *   load, and `apply` (called once it loaded, before the window hears it is ready).
   * @returns the new state. @throws ServiceError BUSY; the engine's load error (old model kept).
   */
  async open(path: string, quantize?: QuantizeOption, defaults?: OpenDefaults): Promise<ModelState> {
    this.assertFree();
    await this.exclusive(async () => {
      try {
        const options = defaults?.maxContext !== undefined ? { ...this.deps.loadOptions(), maxContext: defaults.maxContext } : undefined;
        await this.load(path, options, quantize, defaults?.apply);
        this.deps.store.setSettings({ [MODEL_PATH_KEY]: path, [MODEL_QUANTIZE_KEY]: quantize, [REMOTE_KEY]: undefined });
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
  async reload(options: SettingsLoadOptions): Promise<void> {
    this.assertFree();
    if (this.deps.engine.remote) return; // the server's own settings apply; the local model reloads when it is used again
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
        this.loaded(this.deps.engine.model);
      } catch (e) {
        this.fail(e);
      }
    }).catch(() => undefined);
  }

  /** Throws MODEL_NOT_READY unless a model is loaded in the host (call after `ready()`). */
  assertLoaded(): void {
    if (!this.deps.engine.model) {
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

  private async load(path: string, options?: SettingsLoadOptions, quantize?: QuantizeOption, beforeReady?: () => void): Promise<void> {
    this.set({ status: 'loading', info: this.current.info, progress: { phase: 'start', fraction: 0 }, error: null });
    const opts = options ?? this.deps.loadOptions();
    const info = await this.deps.host.load(
      path,
      { ...opts, ...(quantize ? { quantize } : {}), ...(this.deps.cacheDir ? { cacheDir: this.deps.cacheDir } : {}) },
      (phase, fraction) => this.set({ status: 'loading', info: this.current.info, progress: { phase, fraction }, error: null }),
    );
    this.source = path;
    this.quantize = quantize;
    this.deps.engine.use(null);
    beforeReady?.();
    this.loaded(info);
  }

  private loaded(info: EngineModelInfo | null): void {
    this.set({ status: info ? 'ready' : 'error', info: info ? this.contractInfo(info) : null, progress: null, error: info ? null : 'no model is loaded' });
    this.deps.onLoaded?.();
  }

  /** A failed load: the engine that answered (local model or remote) still answers. */
  private fail(e: unknown, prefix?: string): void {
    const info = this.deps.engine.model;
    const msg = prefix ? `${prefix}; ${firstLine(e)}` : firstLine(e);
    this.set({ status: info ? 'ready' : 'error', info: info ? this.contractInfo(info) : null, progress: null, error: msg });
  }

  /** The model info the window sees: the engine's, with the remote engine's facts (never its key). */
  private contractInfo(info: EngineModelInfo): ModelInfo {
    const remote = this.deps.engine.remote;
    if (!remote || remote.model !== info) {
      const named = this.source ? this.deps.nameOf?.(this.source) : null;
      return named ? { ...toContractInfo(info), name: named } : toContractInfo(info);
    }
    const apiKey = this.deps.keys.load(remote.baseUrl) ? this.deps.keys.storage : 'none';
    return { ...toContractInfo(info), remote: { baseUrl: remote.baseUrl, model: remote.modelId, counting: remote.countMethod, apiKey } };
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
    nodesOnCpu: i.nodesOnCpu,
    adapter: i.adapter,
    fallbackReason: i.fallbackReason,
    hasChatTemplate: i.hasChatTemplate,
    ...(i.thinkingToggle ? { thinkingToggle: true } : {}),
    ...(i.toolFormat ? { toolFormat: i.toolFormat } : {}),
    weights: { ...i.weights },
    ...(i.kvCacheDtype ? { kvCacheDtype: i.kvCacheDtype } : {}),
    ...(i.memory ? { memory: { ...i.memory } } : {}),
  };
}

/** A base URL as keys are saved under it (the remote engine's own normalization; bad ones are refused by connect). */
function normalizeUrl(baseUrl: string): string {
  try {
    return normalizeBaseUrl(baseUrl);
  } catch {
    return baseUrl;
  }
}
