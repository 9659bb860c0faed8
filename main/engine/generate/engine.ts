/**
 * The engine: one loaded model (session, tokenizer, RoPE cache, KV cache) and the generation
 * loop. Token ids in, token ids and text out. It remembers which tokens its KV cache holds, so a
 * follow-up prompt that extends the previous sequence prefills only what differs (prefix reuse).
 *
 * `generate(request, { signal })` is an async generator of `GenerationEvent`s:
 *   prefill progress per chunk → token deltas → one `done` with reason and stats.
 * A user abort ends with `done { reason: 'cancelled' }`; a prompt that cannot fit throws
 * `ContextOverflowError` before anything is touched.
 */
import { performance } from 'node:perf_hooks';
import { ContextOverflowError, InvalidOptionError, toEngineError } from '../errors.ts';
import { MAX_CONTEXT_LIMIT } from '../cache/growth.ts';
import { KvCache } from '../cache/kv-cache.ts';
import { RopeCache } from '../cache/rope-cache.ts';
import { resolveModel, type ImportProgress, type LoadedBundle, type QuantizeOption } from '../model/bundle.ts';
import type { ModelManifest } from '../model/manifest.ts';
import { availableMemory, bundleBytes, checkMemory, estimateMemory } from '../model/memory.ts';
import { DecoderSession, type ExecutionProvider, type SessionInfo } from '../model/session.ts';
import { Sampler, SamplerScratch, validateSamplerOptions } from '../sampling/sampler.ts';
import { StreamDecoder } from '../tokenizer/stream-decoder.ts';
import { TextTokenizer } from '../tokenizer/tokenizer.ts';
import { StopStrings } from './stop-strings.ts';
import type { FinishReason, GenerationEvent, GenerationRequest, GenerationStats } from './types.ts';

export interface EngineOptions {
  /** Bound on positions (prompt + generated); default: the model's trained context. */
  maxContext?: number;
  executionProvider?: ExecutionProvider;
  /** Prefill chunk size in tokens (default 256). */
  prefillChunk?: number;
  /** Where imported bundles are cached. */
  cacheDir?: string;
  /** Quantize a float source's Linear weights at import (`q4` / `q8` round-to-nearest blocks). */
  quantize?: QuantizeOption;
  /** Memory the model may use, bytes (default: what the OS reports available); see `checkMemory`. */
  availableMemoryBytes?: number;
  onProgress?: ImportProgress;
  /** Cancels an import in progress (nothing is left in the cache); EngineError('CANCELLED'). */
  signal?: AbortSignal;
}

/** What the host and UI show about the loaded model. */
export interface ModelInfo {
  name: string;
  architecture: string;
  trainedContext: number;
  maxContext: number;
  vocabSize: number;
  executionProvider: ExecutionProvider;
  fallbackReason: string | null;
  hasChatTemplate: boolean;
  bundleDir: string;
  /** How the weights are stored: formats with counts, the bundle's size on disk, resident weight bytes. */
  weights: ModelWeightsInfo;
}

/** Storage of a loaded model's weights (manifest `weights`), for `--json` and the model panel. */
export interface ModelWeightsInfo {
  /** e.g. "q8 (Q8_0) ×36, float32 ×12". */
  formats: string;
  bundleBytes: number;
  residentBytes: number;
}


/** Validates a max-context value. @throws InvalidOptionError quoting it. */
export function validateMaxContext(n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_CONTEXT_LIMIT) {
    throw new InvalidOptionError('max context', `${String(n)} is not an integer between 1 and ${MAX_CONTEXT_LIMIT}`);
  }
  return n;
}

/**
 * One loaded model: session, tokenizer, RoPE cache [capacity, R/2] float32 ×2 and KV cache
 * [1, Hkv, capacity, headDim] float32 per layer, both bounded by `maxContext`, plus the token ids
 * the KV cache holds (for prefix reuse). One generation at a time.
 */
export class Engine {
  readonly manifest: ModelManifest;
  readonly tokenizer: TextTokenizer;
  readonly maxContext: number;
  readonly rope: RopeCache;
  readonly kv: KvCache;
  private readonly session: DecoderSession;
  private readonly prefillChunk: number;
  private readonly bundle: LoadedBundle;
  /** The sampler's [V] work buffers, lent to every generation (none allocates its own). */
  private readonly samplerScratch: SamplerScratch;
  /** Token ids whose keys/values are in the KV cache, in order (length == kv.length). */
  private cachedTokens: number[] = [];
  private busy = false;

  private constructor(
    bundle: LoadedBundle,
    session: DecoderSession,
    tokenizer: TextTokenizer,
    opts: EngineOptions,
    private readonly weightsInfo: ModelWeightsInfo,
  ) {
    const c = bundle.manifest.config;
    this.bundle = bundle;
    this.manifest = bundle.manifest;
    this.session = session;
    this.tokenizer = tokenizer;
    this.maxContext = opts.maxContext ?? c.trainedContext;
    this.prefillChunk = opts.prefillChunk ?? 256;
    this.rope = new RopeCache(c.rope, this.maxContext);
    this.kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: this.maxContext });
    this.samplerScratch = new SamplerScratch(c.vocabSize);
  }

  /**
   * Resolves (imports if needed), loads and opens a model.
   * @param source llama2.c checkpoint, Hugging Face folder, GGUF file or bundle.
   * @throws ModelLoadError (also when the weights and the KV cache at the max context would not
   *   fit in the available memory: `checkMemory`), TokenizerError, InvalidOptionError.
   */
  static async load(source: string, opts: EngineOptions = {}): Promise<Engine> {
    if (opts.maxContext !== undefined) validateMaxContext(opts.maxContext);
    if (opts.prefillChunk !== undefined && !(Number.isInteger(opts.prefillChunk) && opts.prefillChunk >= 1)) {
      throw new InvalidOptionError('prefill chunk', `${opts.prefillChunk} is not a positive integer`);
    }
    const bundle = await resolveModel(source, opts.cacheDir, opts.onProgress, { quantize: opts.quantize, signal: opts.signal });
    const m = bundle.manifest;
    const maxContext = opts.maxContext ?? m.config.trainedContext;
    const estimate = await estimateMemory(m, bundle.dir, maxContext);
    checkMemory(estimate, maxContext, opts.availableMemoryBytes ?? availableMemory(), bundle.dir);
    const weights: ModelWeightsInfo = {
      formats: Object.entries(m.weights?.counts ?? { float32: 0 }).sort().map(([f, n]) => `${f} ×${n}`).join(', '),
      bundleBytes: await bundleBytes(bundle.dir),
      residentBytes: estimate.weightBytes,
    };
    const tokenizer = TextTokenizer.fromJson(bundle.tokenizerJson, bundle.tokenizerConfig, {
      bos: m.specialTokens.bos,
      eos: m.specialTokens.eos,
      addBos: m.addBos,
      modelVocabSize: m.config.vocabSize,
      file: bundle.dir,
      exactVocab: m.source.kind === 'llama2c',
      chatTemplate: m.chatTemplate,
    });
    const session = await DecoderSession.create(bundle.modelPath, m.config, opts.executionProvider ?? 'cpu');
    return new Engine(bundle, session, tokenizer, opts, weights);
  }

  get sessionInfo(): SessionInfo {
    return this.session.info;
  }

  get info(): ModelInfo {
    const c = this.manifest.config;
    return {
      name: this.manifest.name,
      architecture: c.architecture,
      trainedContext: c.trainedContext,
      maxContext: this.maxContext,
      vocabSize: c.vocabSize,
      executionProvider: this.session.info.executionProvider,
      fallbackReason: this.session.info.fallbackReason,
      hasChatTemplate: this.manifest.chatTemplate !== null,
      bundleDir: this.bundle.dir,
      weights: this.weightsInfo,
    };
  }

  /**
   * The prompt's token ids as the model will see them (chat template applied, BOS added).
   * With `maxTokens`, a prompt far over it is refused after counting only part of it.
   * @throws ContextOverflowError (past `maxTokens`), InvalidOptionError for an empty prompt or a request with neither/both prompt forms.
   */
  encodeRequest(req: Pick<GenerationRequest, 'prompt' | 'messages'>, maxTokens?: number): number[] {
    if ((req.prompt === undefined) === (req.messages === undefined)) {
      throw new InvalidOptionError('request', 'give exactly one of prompt and messages');
    }
    if (req.prompt !== undefined) {
      if (req.prompt.length === 0) throw new InvalidOptionError('prompt', 'the prompt is empty');
      // Raw user text never becomes special tokens (llama2.c run.c keeps a literal "<s>" as text).
      return this.tokenizer.encode(req.prompt, { addBos: this.manifest.addBos, parseSpecial: false, maxTokens });
    }
    if (req.messages!.every((m) => m.content.length === 0)) throw new InvalidOptionError('prompt', 'the prompt is empty');
    // The chat template (or, without one, the transcript) as the model will see it.
    return this.tokenizer.encodeChat(req.messages!, { maxTokens });
  }

  /** Forgets the KV cache contents (keeps its buffers). */
  reset(): void {
    this.kv.reset();
    this.cachedTokens = [];
  }

  /**
   * Generates a completion. See the file comment for the event sequence.
   * @throws InvalidOptionError (bad request), ContextOverflowError (prompt longer than the max
   *   context), both before any event. Failures during the run end with done{reason:'error'}.
   */
  async *generate(req: GenerationRequest, opts: { signal?: AbortSignal } = {}): AsyncGenerator<GenerationEvent> {
    const t0 = performance.now();
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 1) {
      throw new InvalidOptionError('max tokens', `${req.maxTokens} is not a positive integer`);
    }
    const sampler = new Sampler(validateSamplerOptions(req.sampler), this.samplerScratch);
    const stops = new StopStrings(req.stop);
    const prompt = this.encodeRequest(req, this.maxContext);
    if (prompt.length > this.maxContext) throw new ContextOverflowError(prompt.length, this.maxContext, 'the prompt');
    if (this.busy) throw new InvalidOptionError('request', 'the engine is already generating');
    this.busy = true;

    const eos = new Set(req.ignoreEos ? [] : this.tokenizer.eos);
    const generated: number[] = [];
    const decoder = new StreamDecoder(this.tokenizer, prompt);
    let reason: FinishReason = 'length';
    let error: { code: string; message: string } | undefined;
    let reused = 0;
    let ttftMs = 0;
    let prefillMs = 0;
    let prefilled = 0; // prompt tokens actually run (fewer than prompt − reused after a cancel)
    let decodeStart = 0;
    try {
      // 1. prefix reuse: keep the longest common prefix, but always prefill ≥ 1 token for logits.
      reused = commonPrefix(this.cachedTokens, prompt);
      if (reused === prompt.length) reused--;
      this.kv.rewindTo(reused);
      this.cachedTokens.length = reused;

      // 2. chunked prefill
      let logits: Float32Array | null = null;
      const tp = performance.now();
      for (let i = reused; i < prompt.length; i += this.prefillChunk) {
        if (opts.signal?.aborted) {
          reason = 'cancelled';
          break;
        }
        const chunk = prompt.slice(i, Math.min(i + this.prefillChunk, prompt.length));
        logits = await this.forward(chunk);
        prefilled += chunk.length;
        yield { type: 'prefill', processed: i + chunk.length - reused, total: prompt.length - reused };
      }
      prefillMs = performance.now() - tp;

      // 3. decode: sample, emit, stop checks, then feed the token back.
      decodeStart = performance.now();
      // The max context bounds prompt + generated positions: a token is sampled only if it has a
      // position (< maxContext), so usage never counts more than the max context.
      if (logits && this.kv.length >= this.maxContext) reason = 'context-full';
      while (logits && reason !== 'cancelled' && reason !== 'context-full') {
        const history = this.cachedTokens;
        const token = sampler.sample(logits, history);
        if (eos.has(token)) {
          reason = 'stop';
          break;
        }
        generated.push(token);
        if (generated.length === 1) ttftMs = performance.now() - t0;
        // Text that could still start a stop string is held back, so no delta is ever taken back.
        const step = stops.push(decoder.push(token));
        yield { type: 'token', id: token, text: step.text };
        if (step.stopped) {
          reason = 'stop';
          break;
        }
        if (generated.length >= req.maxTokens) {
          reason = 'length';
          break;
        }
        if (this.kv.length + 1 >= this.maxContext) {
          reason = 'context-full';
          break;
        }
        if (opts.signal?.aborted) {
          reason = 'cancelled';
          break;
        }
        logits = await this.forward([token]);
      }
      if (!stops.stopped) {
        const step = stops.push(decoder.flush());
        if (step.stopped) reason = 'stop';
        const tail = step.text + stops.flush();
        if (tail) yield { type: 'token', id: -1, text: tail };
      }
    } catch (e) {
      const err = toEngineError(e);
      reason = 'error';
      error = { code: err.code, message: err.message };
      // A failed run may have left partial rows past kv.length; they are ignored (length unchanged).
    } finally {
      this.busy = false;
    }
    const decodeMs = decodeStart ? performance.now() - decodeStart : 0;
    const stats: GenerationStats = {
      promptTokens: prompt.length,
      generatedTokens: generated.length,
      reusedTokens: reused,
      prefilledTokens: prefilled,
      ttftMs: round(ttftMs),
      prefillTokensPerSec: prefillMs > 0 ? round((prefilled * 1000) / prefillMs) : 0,
      decodeTokensPerSec: decodeMs > 0 && generated.length > 1 ? round(((generated.length - 1) * 1000) / decodeMs) : 0,
      contextUsed: this.kv.length,
      maxContext: this.maxContext,
      rope: pick(this.rope.stats, ['capacity', 'rowsComputed', 'growths', 'bytes']),
      kv: pick(this.kv.stats, ['capacity', 'growths', 'bytes']),
    };
    yield { type: 'done', reason, text: stops.emitted, promptTokens: prompt, tokens: generated, stats, ...(error ? { error } : {}) };
  }

  /**
   * Runs `tokens` at the next positions: ensures both caches (typed overflow error before any
   * tensor is touched), takes RoPE rows as views, runs the session, commits the KV rows.
   * @returns logits float32 [V] of the last token (reused buffer).
   */
  private async forward(tokens: number[]): Promise<Float32Array> {
    const P = this.kv.length;
    const end = P + tokens.length;
    this.rope.ensure(end);
    this.kv.ensure(end);
    const { cos, sin } = this.rope.rows(P, tokens.length);
    const logits = await this.session.run(tokens, cos, sin, this.kv);
    this.kv.commit(tokens.length);
    for (const t of tokens) this.cachedTokens.push(t);
    return logits;
  }

  /** Releases the session. */
  async dispose(): Promise<void> {
    await this.session.dispose();
  }
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

function pick<T extends object, K extends keyof T>(o: T, keys: K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) out[k] = o[k];
  return out;
}
