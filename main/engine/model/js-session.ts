/**
 * The ONNX Runtime session of one decoder bundle, and one `run` per prefill chunk or decode step.
 * It binds the graph contract (`io-names.ts`): token ids, the whole RoPE cache (tensors over the
 * RopeCache's arrays, rebuilt only when it grows: `ropeBinds`), and the KV cache buffers, fed as
 * `past_*` without a copy. On the CPU provider nothing of either cache is copied per run; on
 * WebGPU and CUDA ONNX Runtime copies every host feed to the device on every run (the KV cache
 * and the RoPE cache alike): the native backend is the one that keeps them there.
 *
 * How the new keys/values reach the KV cache (`kvOutputs`):
 *   - 'rows' (default): only logits and the T new rows (`new_key_*` / `new_value_*`) are
 *     fetched, and the session writes the rows into the KV buffers at positions P … P+T−1.
 *     ONNX Runtime then keeps present_* to itself (GroupQueryAttention copies the valid past into
 *     them in C++), so a step hands JavaScript nothing proportional to the KV capacity.
 *   - 'in-place': present_* are fetched through the past tensors (GroupQueryAttention appends
 *     in place), the layout IoBinding gives a native backend; but onnxruntime-node 1.30 returns
 *     every fetched output as a fresh copy, so each step allocates the whole KV cache again and
 *     V8 collects it (4–5 GCs per step, measured in `npm run bench`). Kept for the benchmark.
 *
 * Execution providers: `cpu` (always available), `webgpu` (bundled with onnxruntime-node; needs
 * an adapter) and `cuda` (only where onnxruntime-node's CUDA libraries are installed); the
 * choice is made before (ep-choice.ts), and when the session still cannot open on it, it falls
 * back to CPU and says why. The first run is profiled to count the nodes placed on the CPU
 * (placement.ts). The KV cache stays in host buffers on every provider.
 */
import * as ort from 'onnxruntime-node';
import { InvalidOptionError, ModelLoadError, SessionRunError, firstLine } from '../errors.ts';
import type { KeyRotation, KvBuffer, KvCache } from '../cache/kv-cache.ts';
import type { RopeTables } from '../cache/rope-cache.ts';
import * as io from './io-names.ts';
import { checkRopeTables, type DecoderBackend, type ExecutionProvider, type SessionInfo } from './backend.ts';
import { ropeColumns, type ModelConfig } from './manifest.ts';
import { ensureWebGpuEnvironment, ortReason } from './ep-choice.ts';
import { FirstRunProfile } from './placement.ts';
import { intraOpThreadsFor } from './cpu-threads.ts';

export type { ExecutionProvider, SessionInfo } from './backend.ts';

/** How a run's new keys/values reach the KV cache; see the file comment. */
export type KvOutputs = 'rows' | 'in-place';

// ONNX Runtime's own log goes straight to stderr (a failed CUDA load prints a red multi-line
// error there); every failure we care about reaches us as an exception and is reported as one
// sentence instead. Must be set before the first session is created.
ort.env.logLevel = 'fatal';

/** The JS-API backend: one decoder session. Not re-entrant: one `run` at a time (the engine serializes). */
export class DecoderSession implements DecoderBackend {
  readonly info: SessionInfo;
  /** The KvCache's Float32Arrays are the KV cache: fed on every run, the new rows written into them. */
  readonly kvOnHost = true;
  private readonly session: ort.InferenceSession;
  private readonly config: ModelConfig;
  private readonly logits: ort.Tensor;
  /** Inputs and outputs of every run; the per-step entries are filled in place. */
  private readonly feeds: Record<string, ort.Tensor> = {};
  /** 'in-place' fetches: logits and present_* bound to the past tensors. */
  private readonly fetches: Record<string, ort.Tensor>;
  /** 'rows' fetches: logits and new_key_* / new_value_* [1, T, Hkv·headDim], rebuilt when T changes. */
  private readonly rowFetches: Record<string, ort.Tensor>;
  /** The KvCache and its `allocations` the KV entries wrap (a growth replaces the buffers). */
  private boundKv: KvCache | null = null;
  private boundAllocations = -1;
  /** Whether the graph has the sliding-window layers' own lengths (io-names.ts): their KV can be bounded. */
  readonly windowedKv: boolean;
  /** Element type of the bound KV tensors and new rows (the KvCache's dtype). */
  private kvType: 'float32' | 'float16' = 'float32';
  /** The graph's past_key_0 element type as ONNX Runtime reports it, when it does. */
  private readonly graphKvType: string | null;
  /** T of the bound input_ids tensor and row fetches (rebuilt only when T changes). */
  private boundT = 0;
  /** The RoPE tables the rope_*_cache feeds wrap (a growth replaces them). */
  private boundRope: RopeTables | null = null;
  /** Times the RoPE cache tensors were (re)built: once per RoPE growth. */
  ropeBinds = 0;
  private readonly seqlensK = new Int32Array(1);
  private readonly totalSeqLen = new Int32Array(1);
  private readonly seqlensKWindow = new Int32Array(1);
  private readonly totalSeqLenWindow = new Int32Array(1);
  private readonly profile: FirstRunProfile;

  private constructor(session: ort.InferenceSession, config: ModelConfig, info: SessionInfo, profile: FirstRunProfile) {
    this.session = session;
    const meta = (session as { inputMetadata?: readonly { name: string; type?: string }[] }).inputMetadata;
    this.graphKvType = meta?.find?.((m) => m.name === io.pastKey(0))?.type ?? null;
    this.profile = profile;
    this.config = config;
    this.info = info;
    this.logits = new ort.Tensor('float32', new Float32Array(config.vocabSize), [1, config.vocabSize]);
    this.fetches = { [io.LOGITS]: this.logits };
    this.rowFetches = { [io.LOGITS]: this.logits };
    this.feeds[io.SEQLENS_K] = new ort.Tensor('int32', this.seqlensK, [1]);
    this.feeds[io.TOTAL_SEQ_LEN] = new ort.Tensor('int32', this.totalSeqLen, []);
    this.windowedKv = session.inputNames.includes(io.SEQLENS_K_WINDOW);
    if (this.windowedKv) {
      this.feeds[io.SEQLENS_K_WINDOW] = new ort.Tensor('int32', this.seqlensKWindow, [1]);
      this.feeds[io.TOTAL_SEQ_LEN_WINDOW] = new ort.Tensor('int32', this.totalSeqLenWindow, []);
    }
  }

  /**
   * Opens `model.onnx` with the requested execution provider, falling back to CPU;
   * `intraOpThreads`: ONNX Runtime's intra-op thread pool (0: the physical cores, counted by
   * cpu-threads.ts and passed as a number).
   * @throws ModelLoadError when ONNX Runtime cannot load the model at all.
   */
  static async create(modelPath: string, config: ModelConfig, ep: ExecutionProvider = 'cpu', intraOpThreads = 0): Promise<DecoderSession> {
    const profile = await FirstRunProfile.create();
    const options = (provider: ExecutionProvider): ort.InferenceSession.SessionOptions => ({
      executionProviders: [provider],
      intraOpNumThreads: intraOpThreadsFor(intraOpThreads),
      graphOptimizationLevel: 'all',
      logSeverityLevel: 3,
      enableProfiling: true,
      profileFilePrefix: profile.prefix,
    });
    const info = (executionProvider: ExecutionProvider, fallbackReason: string | null): SessionInfo => ({ backend: 'js', executionProvider, fallbackReason, nodesOnCpu: null });
    let fallbackReason: string | null = null;
    if (ep !== 'cpu') {
      if (ep === 'webgpu') ensureWebGpuEnvironment();
      try {
        const s = await ort.InferenceSession.create(modelPath, options(ep));
        return new DecoderSession(s, config, info(ep, null), profile);
      } catch (e) {
        fallbackReason = providerFallback(ep, ortReason(e));
      }
    }
    try {
      const s = await ort.InferenceSession.create(modelPath, options('cpu'));
      return new DecoderSession(s, config, info('cpu', fallbackReason), profile);
    } catch (e) {
      await profile.discard();
      throw new ModelLoadError(`ONNX Runtime cannot load the model: ${firstLine(e)}`, modelPath, { cause: e });
    }
  }

  /**
   * Runs T new tokens at positions P … P+T−1, where P = kv.length. The caller has already called
   * `kv.ensure(P + T)` and `rope.ensure(P + T)`; on success the KV buffers hold the new
   * keys/values at rows P … P+T−1 (the caller commits them).
   * @param tokenIds T token ids.
   * @param rope the whole RoPE cache (`RopeCache.tables`), wrapped as rope_cos_cache /
   *   rope_sin_cache when it is another object than the last run's (a growth).
   * @param kvOutputs how the new keys/values reach the KV cache (file comment); 'rows' unless
   *   measuring.
   * @returns logits float32 [V] of the last position; the array is reused by the next run.
   * @throws SessionRunError with the input shapes when ONNX Runtime fails; InvalidOptionError
   *   for RoPE tables short of P + T rows (`checkRopeTables`).
   *
   * A 'rows' run with the same T as the previous one (every decode step) allocates nothing of
   * ours: inputs and fetches are filled in place. onnxruntime-node still returns each fetched
   * output as a fresh copy: logits [V] and the new rows, nothing of the KV capacity.
   */
  async run(tokenIds: ArrayLike<number>, rope: RopeTables, kv: KvCache, kvOutputs: KvOutputs = 'rows'): Promise<Float32Array> {
    const T = tokenIds.length;
    const P = kv.length;
    checkRopeTables(rope, P + T, ropeColumns(this.config));
    // Only the small per-step inputs change; the KV and RoPE entries stay bound until a growth.
    this.bindKv(kv);
    this.bindRope(rope);
    this.bindStepInputs(T);
    const feeds = this.feeds;
    const ids = feeds[io.INPUT_IDS].data as BigInt64Array;
    for (let i = 0; i < T; i++) ids[i] = BigInt(tokenIds[i]);
    this.seqlensK[0] = P + T - 1;
    this.totalSeqLen[0] = P + T;
    // The sliding-window layers' buffers hold positions [windowStart, P) from row 0.
    this.seqlensKWindow[0] = P - kv.windowStart + T - 1;
    this.totalSeqLenWindow[0] = P - kv.windowStart + T;
    const fetches = kvOutputs === 'rows' ? this.rowFetches : this.fetches;
    try {
      await this.session.run(feeds, fetches);
    } catch (e) {
      const shapes: Record<string, readonly number[]> = {};
      for (const [k, t] of Object.entries(feeds)) if (!k.startsWith('past_') || k.endsWith('_0')) shapes[k] = t.dims;
      throw new SessionRunError(firstLine(e), shapes, { cause: e });
    }
    if (kvOutputs === 'rows') this.writeRows(kv, P, T);
    if (this.profile.pending) this.info.nodesOnCpu = await this.profile.finish(() => this.session.endProfiling());
    return this.logits.data as Float32Array;
  }

  /** Copies the fetched new rows of every layer into the KV cache at positions P … P+T−1 (a windowed layer's rows P − windowStart …). */
  private writeRows(kv: KvCache, P: number, T: number): void {
    const c = this.config;
    for (let i = 0; i < c.numLayers; i++) {
      const row = P - kv.startOf(i);
      const cap = kv.capacityOf(i);
      scatterRows(this.rowFetches[io.newKey(i)].data as KvBuffer, kv.key(i), row, T, c.numKvHeads, c.headDim, cap);
      scatterRows(this.rowFetches[io.newValue(i)].data as KvBuffer, kv.value(i), row, T, c.numKvHeads, c.headDim, cap);
    }
  }

  /**
   * Wraps the KV cache buffers as tensors fed as past_* and fetched as present_* (the same
   * tensor, so GroupQueryAttention appends in place), as float32 or float16 (the KvCache's
   * dtype, which must be the graph's). Rebuilt only when the cache reallocated.
   * @throws InvalidOptionError when the KvCache's dtype is not the graph's KV dtype.
   */
  private bindKv(kv: KvCache): void {
    if (this.boundKv === kv && this.boundAllocations === kv.allocations) return;
    if (kv.window && !this.windowedKv) throw new InvalidOptionError('KV window', 'this graph has no sliding-window lengths; its KV cache cannot be bounded');
    const c = this.config;
    const type = kv.dtype === 'float16' ? 'float16' : 'float32';
    if (this.graphKvType !== null && this.graphKvType !== type) {
      throw new InvalidOptionError('KV cache dtype', `the graph's ${io.pastKey(0)} is ${this.graphKvType}, the KV cache holds ${type}`);
    }
    this.kvType = type;
    for (let i = 0; i < c.numLayers; i++) {
      const dims = [1, c.numKvHeads, kv.capacityOf(i), c.headDim];
      const k = new ort.Tensor(type, kv.key(i), dims);
      const v = new ort.Tensor(type, kv.value(i), dims);
      this.feeds[io.pastKey(i)] = this.fetches[io.presentKey(i)] = k;
      this.feeds[io.pastValue(i)] = this.fetches[io.presentValue(i)] = v;
    }
    this.boundKv = kv;
    this.boundAllocations = kv.allocations;
  }

  /** Wraps the RoPE cache's arrays as rope_cos_cache / rope_sin_cache [rows, R/2]; only after a growth. */
  private bindRope(rope: RopeTables): void {
    if (this.boundRope === rope) return;
    const dims = [rope.rows, ropeColumns(this.config)];
    this.feeds[io.ROPE_COS_CACHE] = new ort.Tensor('float32', rope.cos, dims);
    this.feeds[io.ROPE_SIN_CACHE] = new ort.Tensor('float32', rope.sin, dims);
    this.boundRope = rope;
    this.ropeBinds++;
  }

  /**
   * (Re)creates the input_ids [1, T] tensor and the 'rows' fetches [1, T, Hkv·headDim] when T
   * differs from the last run's, so consecutive runs of one size (decode steps) reuse them.
   */
  private bindStepInputs(T: number): void {
    if (this.boundT === T) return;
    const c = this.config;
    this.feeds[io.INPUT_IDS] = new ort.Tensor('int64', new BigInt64Array(T), [1, T]);
    const width = c.numKvHeads * c.headDim;
    const rows = () => (this.kvType === 'float16' ? new ort.Tensor('float16', new Uint16Array(T * width), [1, T, width]) : new ort.Tensor('float32', new Float32Array(T * width), [1, T, width]));
    for (let i = 0; i < c.numLayers; i++) {
      this.rowFetches[io.newKey(i)] = rows();
      this.rowFetches[io.newValue(i)] = rows();
    }
    this.boundT = T;
  }

  /** See DecoderBackend.shift: the KV cache is the KvCache's host buffers, shifted in place. */
  shift(kv: KvCache, keep: number, drop: number, rotation: KeyRotation): void {
    kv.discard(keep, drop, rotation);
  }

  /** See DecoderBackend.saveKv: the host buffers are the KV cache. */
  saveKv(kv: KvCache): Float32Array {
    return kv.snapshot();
  }

  /** See DecoderBackend.restoreKv. */
  restoreKv(kv: KvCache, data: Float32Array, length: number, windowStart = 0): void {
    kv.restore(data, length, windowStart);
  }

  /** Releases the native session. */
  async dispose(): Promise<void> {
    if (this.profile.pending) await this.profile.discard();
    await this.session.release();
  }
}

/** The note for a session that could not open on `ep` and runs on the CPU (both backends say it so). */
export function providerFallback(ep: ExecutionProvider, reason: string): string {
  const name = ep === 'cuda' ? 'CUDA' : ep === 'webgpu' ? 'WebGPU' : 'CPU';
  return `${name} execution provider could not be loaded (${reason}); using CPU`;
}

/**
 * Writes rows [1, T, H·hd] (token-major) into a KV buffer [1, H, C, hd] (head-major, BNSH) at
 * positions P … P+T−1. A plain loop, so a decode step allocates no views.
 */
function scatterRows(src: KvBuffer, dst: KvBuffer, P: number, T: number, H: number, hd: number, C: number): void {
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < H; h++) {
      const from = (t * H + h) * hd;
      const to = (h * C + P + t) * hd;
      for (let d = 0; d < hd; d++) dst[to + d] = src[from + d];
    }
  }
}
