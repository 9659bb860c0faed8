/**
 * The engine host: the main-thread API over the engine, which runs in a child process of its own
 * (or, on request, a worker thread: channel.ts says why a process). Services, the CLI and `serve`
 * mode talk to this, never to the engine directly. "Worker" below means the engine's process or
 * thread, whichever it is.
 *
 * - `load` resolves/imports a model in the worker; a failed load leaves the previous model loaded.
 * - `generate` streams the worker's `GenerationEvent`s; aborting the signal cancels in the worker
 *   and the stream ends with `done { reason: 'cancelled' }`.
 * - If the worker dies (a segfault or abort in native code, an out-of-memory kill, SIGKILL, exit),
 *   every pending call fails with `WorkerCrashedError`, and the next call starts a fresh worker and
 *   reloads the last model; this process, the window and the services go on.
 */
import type { ChatEngine } from './chat-engine.ts';
import { processChannel, threadChannel, type EngineChannel, type EngineIsolation, type EngineSpawn } from './channel.ts';
import { deserializeEngineError, EngineError, WorkerCrashedError } from '../engine/errors.ts';
import type { ModelInfo } from '../engine/generate/engine.ts';
import type { ChatMessage, GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';
import type { EngineCacheStats, HostToWorker, LoadOptions, LoadProgressDetail, TokenizeRequest, WorkerToHost } from './protocol.ts';

/** Load progress: phase, fraction in [0, 1], and while weights are written bytes and an ETA. */
export type LoadProgress = (phase: string, fraction: number, detail: LoadProgressDetail) => void;

type Listener = (m: WorkerToHost) => void;

/**
 * Main-thread handle on the engine worker. One worker, one model at a time; calls are queued by
 * the worker. Errors arrive as EngineError with their code (WORKER_CRASHED when the worker died).
 */
export class EngineHost implements ChatEngine {
  /** The worker counts with the model's own tokenizer. */
  readonly countAccuracy = 'exact' as const;
  private worker: EngineChannel | null = null;
  private nextId = 1;
  private readonly listeners = new Map<number, { onMessage: Listener; onCrash: (e: EngineError) => void }>();
  private lastLoad: { source: string; options: LoadOptions } | null = null;
  private loaded: ModelInfo | null = null;
  private disposed = false;
  /** Number of times a worker died unexpectedly (for tests and diagnostics). */
  crashes = 0;
  private readonly crashListeners = new Set<(e: WorkerCrashedError) => void>();
  /** Where the engine runs: 'process' (default: a native crash ends only the engine) or 'thread'. */
  readonly isolation: EngineIsolation;

  /** How a process-isolated engine's process is started (default: child_process.fork). */
  private readonly spawn: EngineSpawn | undefined;

  /** `spawn`: the desktop app's utilityProcess (app/engine-process.ts); ignored with isolation 'thread'. */
  constructor(options: { isolation?: EngineIsolation; spawn?: EngineSpawn } = {}) {
    this.isolation = options.isolation ?? 'process';
    this.spawn = options.spawn;
  }

  /**
   * Calls `listener` each time the worker dies unexpectedly (never at `dispose`), after every pending
   * call has failed — also when it dies idle, with nothing pending, so the owner can restart it
   * (ModelService.recover) instead of waiting for the next call. Returns an unsubscribe.
   */
  onCrash(listener: (e: WorkerCrashedError) => void): () => void {
    this.crashListeners.add(listener);
    return () => this.crashListeners.delete(listener);
  }

  /** The engine process's id (null in a thread, or before the first call starts it). For tests and diagnostics. */
  get enginePid(): number | null {
    return this.worker?.pid ?? null;
  }

  /** The model loaded in the worker, or null. */
  get model(): ModelInfo | null {
    return this.loaded;
  }

  private async ensureWorker(): Promise<EngineChannel> {
    if (this.disposed) throw new WorkerCrashedError('the engine host has been shut down');
    if (this.worker) return this.worker;
    // Source runs (tsx) load worker.ts; the bundled app loads the compiled worker.js beside this file.
    const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    const w = startEngineWorker(new URL(`./worker.${ext}`, import.meta.url), this.isolation, this.spawn);
    const dispatch = (m: WorkerToHost): void => {
      if (m.type === 'batch') m.messages.forEach(dispatch);
      else this.listeners.get(m.id)?.onMessage(m);
    };
    w.onMessage(dispatch);
    const onDeath = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      if (this.disposed) return;
      this.crashes++;
      this.loaded = null;
      const err = new WorkerCrashedError(`the engine worker stopped (${why}); it will be restarted`);
      for (const l of [...this.listeners.values()]) l.onCrash(err);
      this.listeners.clear();
      for (const l of this.crashListeners) l(err);
    };
    w.onDeath(onDeath);
    this.worker = w;
    if (this.lastLoad) {
      // Restarted after a crash: bring the last model back before anything else runs.
      const { source, options } = this.lastLoad;
      this.loaded = (await this.call({ type: 'load', source, options }, w)) as ModelInfo;
    }
    return w;
  }

  /** Sends one request and resolves with its `loaded`/`result` reply. */
  private call(msg: DistributiveOmit<HostToWorker, 'id'>, worker?: EngineChannel, onProgress?: LoadProgress, signal?: AbortSignal): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const cancel = () => this.worker?.post({ type: 'cancel', id } satisfies HostToWorker);
      signal?.addEventListener('abort', cancel, { once: true });
      this.listeners.set(id, {
        onMessage: (m) => {
          if (m.type === 'progress') {
            const { bytes, totalBytes, etaSeconds } = m;
            return onProgress?.(m.phase, m.fraction, { bytes, totalBytes, etaSeconds });
          }
          signal?.removeEventListener('abort', cancel);
          this.listeners.delete(id);
          if (m.type === 'error') reject(deserializeEngineError(m.error));
          else if (m.type === 'loaded') resolve(m.info);
          else if (m.type === 'result') resolve(m.value);
        },
        onCrash: reject,
      });
      const send = (w: EngineChannel) => w.post({ ...msg, id } as HostToWorker);
      if (worker) send(worker);
      else this.ensureWorker().then(send, reject);
    });
  }

  /**
   * Loads a model (importing it on first use). On failure the previous model stays loaded.
   * @param signal cancels an import in progress: nothing is left in the cache.
   * @throws ModelLoadError / TokenizerError / InvalidOptionError from the worker;
   *   EngineError('CANCELLED') when `signal` aborted the import.
   */
  async load(source: string, options: LoadOptions = {}, onProgress?: LoadProgress, signal?: AbortSignal): Promise<ModelInfo> {
    await this.ensureWorker();
    const info = (await this.call({ type: 'load', source, options }, undefined, onProgress, signal)) as ModelInfo;
    this.lastLoad = { source, options };
    this.loaded = info;
    return info;
  }

  /** Number of prompt tokens the request would use (template and BOS included). */
  async countTokens(request: Pick<GenerationRequest, 'prompt' | 'messages' | 'enableThinking'>): Promise<number> {
    return (await this.call({ type: 'count', request })) as number;
  }

  /** Token counts of plain texts (no BOS, no chat template, special tokens as text), in order. */
  async countEach(texts: string[]): Promise<number[]> {
    if (texts.length === 0) return [];
    return (await this.call({ type: 'countEach', texts })) as number[];
  }

  /**
   * Token ids of a chat (template and BOS as generation feeds them) or of a text (BOS only with
   * `addSpecial`; special tokens' text as special tokens only with `parseSpecial`). For `serve`'s `/tokenize`.
   * @throws InvalidOptionError for an empty chat; EngineError MODEL_LOAD when no model is loaded.
   */
  async tokenize(request: TokenizeRequest): Promise<number[]> {
    return (await this.call({ type: 'tokenize', request })) as number[];
  }

  /** The prompt a chat renders to (the chat template, or the transcript without one), for `/apply-template`. @throws TokenizerError when the template fails. */
  async renderChat(messages: ChatMessage[]): Promise<string> {
    return (await this.call({ type: 'renderChat', messages })) as string;
  }

  /** The text of token ids (special tokens skipped). @throws EngineError MODEL_LOAD when no model is loaded. */
  async detokenize(ids: number[]): Promise<string> {
    return (await this.call({ type: 'detokenize', ids })) as string;
  }

  /**
   * The loaded engine's RoPE and KV cache counters (cheap: no tensor work). Like every call, it
   * restarts a crashed worker and reloads the last model first.
   * @throws EngineError MODEL_LOAD when no model is loaded.
   */
  async stats(): Promise<EngineCacheStats> {
    return (await this.call({ type: 'stats' })) as EngineCacheStats;
  }

  /** Forgets the worker's KV cache contents. */
  async reset(): Promise<void> {
    await this.call({ type: 'reset' });
  }

  /**
   * Streams a generation from the worker.
   * @throws InvalidOptionError / ContextOverflowError before the first event; WorkerCrashedError
   *   if the worker dies mid-stream.
   */
  async *generate(request: GenerationRequest, opts: { signal?: AbortSignal } = {}): AsyncGenerator<GenerationEvent> {
    const worker = await this.ensureWorker();
    const id = this.nextId++;
    const queue: GenerationEvent[] = [];
    let failure: EngineError | null = null;
    let finished = false;
    let wake: (() => void) | null = null;
    const notify = () => {
      wake?.();
      wake = null;
    };
    this.listeners.set(id, {
      onMessage: (m) => {
        if (m.type === 'event') {
          queue.push(m.event);
          if (m.event.type === 'done') finished = true;
        } else if (m.type === 'error') {
          failure = deserializeEngineError(m.error);
        }
        notify();
      },
      onCrash: (e) => {
        failure = e;
        notify();
      },
    });
    const onAbort = () => worker.post({ type: 'cancel', id } satisfies HostToWorker);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    worker.post({ type: 'generate', id, request } satisfies HostToWorker);
    if (opts.signal?.aborted) onAbort();
    try {
      while (true) {
        while (queue.length) yield queue.shift()!;
        if (finished) return;
        if (failure) throw failure;
        await new Promise<void>((r) => (wake = r));
      }
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      if (!finished && !failure) worker.post({ type: 'cancel', id } satisfies HostToWorker);
      this.listeners.delete(id);
    }
  }

  /**
   * Makes the worker die as a crash would (exit code 70, nothing more sent): pending calls fail
   * with WorkerCrashedError and the next call starts a fresh worker. It dies at its next safe
   * point, between ONNX Runtime runs, because ending a worker thread while a native run is in
   * flight aborts the whole process. Tests use it to check recovery.
   */
  async killWorker(): Promise<void> {
    const w = this.worker;
    if (w) await stopWorker(w, 70);
  }

  /** Stops the worker for good (waits for an in-flight run to finish, then exits it). */
  async dispose(): Promise<void> {
    this.disposed = true;
    const w = this.worker;
    this.worker = null;
    if (w) await stopWorker(w, 0);
  }
}

/** The engine workers alive (every host's in this process), for `exitProcess`. */
const liveWorkers = new Set<EngineChannel>();
/** Each stopping worker's exit, so a second stop waits for the first instead of sending another shutdown. */
const stopping = new WeakMap<EngineChannel, Promise<void>>();

/**
 * Asks a worker to stop at its next safe point and waits for it to exit; `terminate()` is the
 * last resort after `graceMs` (a worker stuck in a native call would otherwise never exit).
 * `graceMs` null: no last resort. Stopping a worker that is already stopping waits for that stop.
 */
function stopWorker(w: EngineChannel, exitCode: number, graceMs: number | null = 15_000): Promise<void> {
  if (w.ended) return Promise.resolve();
  let exit = stopping.get(w);
  if (!exit) {
    exit = w.whenEnded;
    stopping.set(w, exit);
    w.post({ type: 'shutdown', id: 0, exitCode } satisfies HostToWorker);
    if (graceMs !== null) {
      const timer = setTimeout(() => w.kill(), graceMs);
      void exit.then(() => clearTimeout(timer));
    }
  }
  return exit;
}

/**
 * Ends the process with `code`, never while an engine worker is inside ONNX Runtime. Exiting
 * (`process.exit`, Electron's quit) tears down the worker threads with the process, and a worker
 * torn down in the middle of a native run aborts the whole process (exit 134, "terminate called
 * after throwing an instance of 'Napi::Error'"), so every engine worker is first stopped at its
 * next safe point (its runs cancelled, its model disposed), as `dispose` does, and then the
 * process exits. The rule for a second Ctrl-C or SIGTERM (`serve`: the first one's shutdown
 * stores the answer and closes the database; this one does not wait for those).
 *
 * A worker still inside one native call after `graceMs` (a long prefill step of a large model)
 * cannot be stopped safely; the process then ends the way the kernel ends it, without running
 * any exit handler or native finalizer: by `signal` with its default action (the listeners are
 * removed first; a shell reports 128 + the signal's number, 130 for SIGINT), SIGKILL when no
 * signal is given.
 * @param code the exit status, e.g. 130 for a second SIGINT.
 * @param signal the signal that asked for the exit, re-raised when the grace runs out; null: SIGKILL then.
 * @param graceMs how long to wait for the workers to reach a safe point (ms).
 */
export async function exitProcess(code: number, signal: NodeJS.Signals | null, graceMs = 3000): Promise<never> {
  let timer: NodeJS.Timeout | undefined;
  const stopped = await Promise.race([
    Promise.all([...liveWorkers].map((w) => stopWorker(w, 0, null))).then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), graceMs))),
  ]);
  clearTimeout(timer);
  if (!stopped) {
    if (signal) process.removeAllListeners(signal);
    process.kill(process.pid, signal ?? 'SIGKILL');
  }
  return process.exit(code);
}

/** Starts the engine worker: its own process, or a thread of this one. */
function startEngineWorker(url: URL, isolation: EngineIsolation, spawn?: EngineSpawn): EngineChannel {
  const w = isolation === 'process' ? processChannel(url, spawn) : threadChannel(url);
  liveWorkers.add(w);
  void w.whenEnded.then(() => liveWorkers.delete(w));
  return w;
}

type DistributiveOmit<T, K extends keyof any> = T extends unknown ? Omit<T, K> : never;
