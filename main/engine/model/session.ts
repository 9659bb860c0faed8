/**
 * The ONNX Runtime session of one decoder bundle, and one `run` per prefill chunk or decode step.
 * It binds the graph contract (`io-names.ts`): token ids, the RoPE rows the engine computed, and
 * the KV cache buffers, which are fed as `past_*` and fetched as `present_*` through the SAME
 * pre-allocated tensors, so GroupQueryAttention appends in place.
 *
 * Execution providers: `cpu` (always available) and `cuda` (only where onnxruntime-node's CUDA
 * libraries are installed; when it cannot load, the session falls back to CPU and says why).
 */
import * as ort from 'onnxruntime-node';
import { InvalidOptionError, ModelLoadError, SessionRunError } from '../errors.ts';
import type { KvCache } from '../cache/kv-cache.ts';
import * as io from './io-names.ts';
import type { DecoderBackend, ExecutionProvider, SessionInfo } from './backend.ts';
import type { ModelConfig } from './manifest.ts';

export type { ExecutionProvider, SessionInfo } from './backend.ts';

// ONNX Runtime's own log goes straight to stderr (a failed CUDA load prints a red multi-line
// error there); every failure we care about reaches us as an exception and is reported as one
// sentence instead. Must be set before the first session is created.
ort.env.logLevel = 'fatal';

/** The JS-API backend: one decoder session. Not re-entrant: one `run` at a time (the engine serializes). */
export class DecoderSession implements DecoderBackend {
  readonly info: SessionInfo;
  /** The KvCache's Float32Arrays are the KV cache, fed and fetched on every run. */
  readonly kvOnHost = true;
  private readonly session: ort.InferenceSession;
  private readonly config: ModelConfig;
  private readonly logits: ort.Tensor;
  /** Inputs and outputs of every run; the per-step entries are filled in place. */
  private readonly feeds: Record<string, ort.Tensor> = {};
  private readonly fetches: Record<string, ort.Tensor>;
  /** Layer 0's key buffer the KV entries wrap (a growth replaces it). */
  private boundKey0: Float32Array | null = null;
  /** T of the bound input_ids / rope_cos / rope_sin tensors (rebuilt only when T changes). */
  private boundT = 0;
  private readonly seqlensK = new Int32Array(1);
  private readonly totalSeqLen = new Int32Array(1);

  private constructor(session: ort.InferenceSession, config: ModelConfig, info: SessionInfo) {
    this.session = session;
    this.config = config;
    this.info = info;
    this.logits = new ort.Tensor('float32', new Float32Array(config.vocabSize), [1, config.vocabSize]);
    this.fetches = { [io.LOGITS]: this.logits };
    this.feeds[io.SEQLENS_K] = new ort.Tensor('int32', this.seqlensK, [1]);
    this.feeds[io.TOTAL_SEQ_LEN] = new ort.Tensor('int32', this.totalSeqLen, []);
  }

  /**
   * Opens `model.onnx` with the requested execution provider, falling back to CPU.
   * @throws ModelLoadError when ONNX Runtime cannot load the model at all.
   */
  static async create(modelPath: string, config: ModelConfig, ep: ExecutionProvider = 'cpu'): Promise<DecoderSession> {
    const options = (provider: ExecutionProvider): ort.InferenceSession.SessionOptions => ({
      executionProviders: [provider],
      graphOptimizationLevel: 'all',
      logSeverityLevel: 3,
    });
    let fallbackReason: string | null = null;
    if (ep === 'cuda') {
      try {
        const s = await ort.InferenceSession.create(modelPath, options('cuda'));
        return new DecoderSession(s, config, { backend: 'js', executionProvider: 'cuda', fallbackReason: null });
      } catch (e) {
        fallbackReason = `CUDA execution provider could not be loaded (${firstLine(e)}); using CPU`;
      }
    }
    try {
      const s = await ort.InferenceSession.create(modelPath, options('cpu'));
      return new DecoderSession(s, config, { backend: 'js', executionProvider: 'cpu', fallbackReason });
    } catch (e) {
      throw new ModelLoadError(`ONNX Runtime cannot load the model: ${firstLine(e)}`, modelPath, { cause: e });
    }
  }

  /**
   * Runs T new tokens at positions P … P+T−1, where P = kv.length. The caller has already called
   * `kv.ensure(P + T)` and taken the RoPE rows for those positions; on success the KV buffers
   * hold the new keys/values at rows P … P+T−1 (the caller commits them).
   * @param tokenIds T token ids.
   * @param cos, sin RoPE rows, float32 [T, R/2] (views into the RoPE cache).
   * @param kvOutputs 'in-place' (default) binds present_* to the past buffers; 'copied' lets
   *   ONNX Runtime return them as fresh outputs, which onnxruntime-node copies into new JS
   *   buffers. Only the benchmark uses 'copied', to put that O(capacity) cost on record; the
   *   KV cache is not updated then.
   * @returns logits float32 [V] of the last position; the array is reused by the next run.
   * @throws SessionRunError with the input shapes when ONNX Runtime fails.
   *
   * A run with the same T as the previous one (every decode step) allocates nothing of ours: the
   * input tensors are filled in place. What onnxruntime-node 1.30 itself allocates is not ours
   * to avoid: it returns every fetched output as a fresh copy, so each run still allocates
   * (and the next GCs free) logits [V] plus every present_* buffer [1, Hkv, C, headDim]
   * (measured in `npm run bench`); the native/ backend binds outputs without that copy.
   */
  async run(
    tokenIds: ArrayLike<number>,
    cos: Float32Array,
    sin: Float32Array,
    kv: KvCache,
    kvOutputs: 'in-place' | 'copied' = 'in-place',
  ): Promise<Float32Array> {
    const T = tokenIds.length;
    const P = kv.length;
    const half = this.config.rope.rotaryDim / 2;
    // Only the small per-step inputs change; the KV entries stay bound until a growth.
    this.bindKv(kv);
    this.bindStepInputs(T);
    if (cos.length !== T * half || sin.length !== T * half) {
      throw new InvalidOptionError('RoPE rows', `expected ${T} × ${half} cos/sin values, got ${cos.length} and ${sin.length}`);
    }
    const feeds = this.feeds;
    const ids = feeds[io.INPUT_IDS].data as BigInt64Array;
    for (let i = 0; i < T; i++) ids[i] = BigInt(tokenIds[i]);
    (feeds[io.ROPE_COS].data as Float32Array).set(cos);
    (feeds[io.ROPE_SIN].data as Float32Array).set(sin);
    this.seqlensK[0] = P + T - 1;
    this.totalSeqLen[0] = P + T;
    const fetches = kvOutputs === 'in-place' ? this.fetches : this.freshKvFetches();
    try {
      await this.session.run(feeds, fetches);
    } catch (e) {
      const shapes: Record<string, readonly number[]> = {};
      for (const [k, t] of Object.entries(feeds)) if (!k.startsWith('past_') || k.endsWith('_0')) shapes[k] = t.dims;
      throw new SessionRunError(firstLine(e), shapes, { cause: e });
    }
    return this.logits.data as Float32Array;
  }

  /**
   * Wraps the KV cache buffers as tensors fed as past_* and fetched as present_* (the same
   * tensor, so GroupQueryAttention appends in place). Rebuilt only when the cache reallocated.
   */
  private bindKv(kv: KvCache): void {
    if (this.boundKey0 === kv.key(0)) return;
    const c = this.config;
    const dims = [1, c.numKvHeads, kv.capacity, c.headDim];
    for (let i = 0; i < c.numLayers; i++) {
      const k = new ort.Tensor('float32', kv.key(i), dims);
      const v = new ort.Tensor('float32', kv.value(i), dims);
      this.feeds[io.pastKey(i)] = this.fetches[io.presentKey(i)] = k;
      this.feeds[io.pastValue(i)] = this.fetches[io.presentValue(i)] = v;
    }
    this.boundKey0 = kv.key(0);
  }

  /**
   * (Re)creates the input_ids [1, T] and rope_cos / rope_sin [T, R/2] tensors when T differs from
   * the last run's, so consecutive runs of one size (decode steps) reuse them.
   */
  private bindStepInputs(T: number): void {
    if (this.boundT === T) return;
    const half = this.config.rope.rotaryDim / 2;
    this.feeds[io.INPUT_IDS] = new ort.Tensor('int64', new BigInt64Array(T), [1, T]);
    this.feeds[io.ROPE_COS] = new ort.Tensor('float32', new Float32Array(T * half), [T, half]);
    this.feeds[io.ROPE_SIN] = new ort.Tensor('float32', new Float32Array(T * half), [T, half]);
    this.boundT = T;
  }

  /** Fetches that let ONNX Runtime allocate present_* (the benchmark's 'copied' mode). */
  private freshKvFetches(): ort.InferenceSession.FetchesType {
    const fetches: Record<string, ort.Tensor | null> = { [io.LOGITS]: this.logits };
    for (let i = 0; i < this.config.numLayers; i++) fetches[io.presentKey(i)] = fetches[io.presentValue(i)] = null;
    return fetches as ort.InferenceSession.FetchesType;
  }

  /** Releases the native session. */
  async dispose(): Promise<void> {
    await this.session.release();
  }
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}
