/**
 * The native backend (`DecoderBackend` over the native/ addon): one ONNX Runtime session whose
 * KV cache lives in addon-owned tensors in the execution provider's memory (host on the CPU;
 * CUDA device memory; WebGPU buffers), bound with IoBinding so past and present are the same
 * tensors and a decode step moves only its token id in and its logits out. A growth copies on
 * the device (the copy graph, kv-copy-graph.ts). The whole RoPE cache (`RopeCache.tables`) is
 * handed to the addon when it grows (`setRope`: copied once into the provider's memory), never
 * per step; the graph gathers each step's rows itself. Its first run is profiled
 * (placement.ts). Per run the addon binds the token ids and GroupQueryAttention's two lengths
 * and writes the last position's logits into one Float32Array reused for every run.
 *
 * Growth stays the engine's rule (cache/growth.ts, applied by KvCache.ensure): when `run` sees
 * that the KvCache's capacity changed, it tells the addon, which reallocates and copies the held
 * rows once. The KvCache itself holds no buffers for this backend (`kvOnHost` is false).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ModelLoadError, NativeUnavailableError, SessionRunError, firstLine } from '../errors.ts';
import type { KeyRotation, KvCache } from '../cache/kv-cache.ts';
import type { RopeTables } from '../cache/rope-cache.ts';
import { checkRopeTables, type DecoderBackend, type ExecutionProvider, type SessionInfo } from './backend.ts';
import * as io from './io-names.ts';
import { ropeColumns, type ModelConfig } from './manifest.ts';
import type { GraphDtype } from './graph-target.ts';
import { buildKvCopyGraph } from './kv-copy-graph.ts';
import { EXTERNAL_DATA_FILE } from './decoder-graph.ts';
import { intraOpThreadsFor } from './cpu-threads.ts';
import { loadNativeAddon, type NativeDecoder, type NativeDecoderStats } from './native-addon.ts';
import { ensureWebGpuEnvironment } from './ep-choice.ts';
import { FirstRunProfile } from './placement.ts';
import { providerFallback } from './js-session.ts';

export { NativeUnavailableError } from '../errors.ts';

/** `DecoderBackend` over the native/ addon. */
export class NativeDecoderSession implements DecoderBackend {
  readonly info: SessionInfo;
  readonly kvOnHost = false;
  private readonly decoder: NativeDecoder;
  private readonly config: ModelConfig;
  private readonly logits: Float32Array;
  /** input_ids of a decode step, reused (prefill chunks get their own). */
  private readonly oneToken = new Int32Array(1);
  private readonly profile: FirstRunProfile;
  /** The RoPE tables last handed to the addon (a growth makes a new object). */
  private boundRope: RopeTables | null = null;
  /** Whether the graph's sliding-window layers can be bounded (the addon found their lengths). */
  readonly windowedKv: boolean;
  /** The position the addon's sliding-window blocks hold at row 0. */
  private windowStart = 0;

  private constructor(decoder: NativeDecoder, config: ModelConfig, logits: Float32Array, ep: ExecutionProvider, profile: FirstRunProfile) {
    this.decoder = decoder;
    this.config = config;
    this.logits = logits;
    this.profile = profile;
    const fallback = decoder.fallbackReason;
    this.info = {
      backend: 'native',
      executionProvider: decoder.executionProvider,
      fallbackReason: fallback === null ? null : providerFallback(ep, fallback),
      nodesOnCpu: null,
    };
    this.windowedKv = decoder.windowInputs === true;
  }

  /**
   * Opens `model.onnx` through the addon with the requested provider (CUDA or WebGPU fall back
   * to the CPU with the reason in `info.fallbackReason`); `kvDtype` is the graph's KV dtype (the
   * bundle manifest's `dtype`); `intraOpThreads`: ONNX Runtime's intra-op thread pool (0: the
   * physical cores, counted by cpu-threads.ts and passed as a number). `weightsInMemory`: on the
   * CPU (Linux) the bundle's weights file is read into memory that may be 2 MiB pages
   * (`weightsFileOf`), for bundles whose weights the addon's ops read in place (quantized ones:
   * MatMulQ8 / MatMulQ8K / GatherQ8K); a float bundle keeps ONNX Runtime's file mapping, whose
   * MatMuls pack their own copy of each weight (the read-in file would stay beside it: 2.4 GB more
   * resident for Qwen3-0.6B in float32, docs/benchmarks.md).
   * @throws NativeUnavailableError when the addon cannot be loaded; ModelLoadError when ONNX
   *   Runtime cannot open the model or the weights file cannot be read.
   */
  static async create(
    modelPath: string,
    config: ModelConfig,
    ep: ExecutionProvider = 'cpu',
    kvDtype: GraphDtype = 'float32',
    intraOpThreads = 0,
    opts: { weightsInMemory?: boolean } = {},
  ): Promise<NativeDecoderSession> {
    const status = loadNativeAddon();
    if (!status.available) throw new NativeUnavailableError(status.reason);
    const logits = new Float32Array(config.vocabSize);
    if (ep === 'webgpu') ensureWebGpuEnvironment();
    const profile = await FirstRunProfile.create();
    try {
      const decoder = new status.addon.NativeDecoder(modelPath, {
        executionProvider: ep,
        numLayers: config.numLayers,
        numKvHeads: config.numKvHeads,
        headDim: config.headDim,
        vocabSize: config.vocabSize,
        rotaryHalf: ropeColumns(config),
        logits,
        kvDtype,
        copyModel: ep === 'cpu' ? undefined : buildKvCopyGraph(kvDtype),
        windowLayers: Uint8Array.from({ length: config.numLayers }, (_, l) => ((config.slidingWindow?.[l] ?? 0) > 0 ? 1 : 0)),
        profilePrefix: profile.prefix,
        intraOpThreads: intraOpThreadsFor(intraOpThreads),
        weightsFile: opts.weightsInMemory ? weightsFileOf(modelPath) : undefined,
      });
      return new NativeDecoderSession(decoder, config, logits, ep, profile);
    } catch (e) {
      await profile.discard();
      throw new ModelLoadError(`ONNX Runtime cannot load the model: ${firstLine(e)}`, modelPath, { cause: e });
    }
  }

  /** Bytes of the weights file read into memory (`weightsInMemory` on the CPU, Linux); 0: ONNX Runtime maps it. */
  get weightsInMemory(): number {
    return this.decoder.weightsInMemory ?? 0;
  }

  /** ONNX Runtime's name of the memory the KV cache lives in: 'Cpu', 'Cuda' or 'WebGPU_Buf'. */
  get kvMemory(): string {
    return this.decoder.kvMemory;
  }

  /** Positions the addon's sliding-window blocks hold (0 without them): what they really take, beside the KvCache's figure. */
  get windowCapacity(): number {
    return this.decoder.windowCapacity ?? 0;
  }

  /** The addon's counters: runs, KV binds, allocations, device copies, RoPE binds (a warm step adds one run). */
  get stats(): NativeDecoderStats {
    return this.decoder.stats;
  }

  /**
   * See DecoderBackend.run. A changed `kv.capacity` first grows the addon's KV blocks; RoPE
   * tables other than the last run's (a RoPE growth) are bound first (`setRope`).
   */
  async run(tokenIds: ArrayLike<number>, rope: RopeTables, kv: KvCache): Promise<Float32Array> {
    const T = tokenIds.length;
    const P = kv.length;
    checkRopeTables(rope, P + T, ropeColumns(this.config));
    let ids = this.oneToken;
    if (T === 1) ids[0] = tokenIds[0];
    else ids = Int32Array.from(tokenIds);
    try {
      // Rows past the old capacity never existed (a KvCache told it holds more, as the bench does).
      if (this.decoder.capacity !== kv.capacity) this.decoder.resize(kv.capacity, Math.min(P, this.decoder.capacity));
      this.followWindow(kv, P);
      if (this.boundRope !== rope) {
        this.boundRope = null; // a failed bind leaves none bound (the addon refuses to run then)
        this.decoder.setRope(rope.cos, rope.sin, rope.rows);
        this.boundRope = rope;
      }
      await this.decoder.run(ids, P, P - kv.windowStart);
      if (this.profile.pending) this.info.nodesOnCpu = await this.profile.finish(() => this.decoder.endProfiling());
    } catch (e) {
      const half = ropeColumns(this.config);
      throw new SessionRunError(firstLine(e), {
        [io.INPUT_IDS]: [1, T],
        [io.ROPE_COS_CACHE]: [rope.rows, half],
        [io.ROPE_SIN_CACHE]: [rope.rows, half],
        [io.pastKey(0)]: kv.shape,
      }, { cause: e });
    }
    return this.logits;
  }

  /**
   * Makes the addon's sliding-window blocks what the KvCache says (its `ensure` dropped their
   * oldest rows or grew them): capacity `kv.windowCapacity`, row 0 at `kv.windowStart`, the P −
   * windowStart held rows kept. Without a window group in the KvCache they follow the global
   * capacity from position 0. Nothing when they already match (a warm step).
   */
  private followWindow(kv: KvCache, P: number): void {
    if (!this.windowedKv) return;
    const [capacity, start] = kv.window ? [kv.windowCapacity, kv.windowStart] : [kv.capacity, 0];
    if (capacity === this.decoder.windowCapacity && start === this.windowStart) return;
    // Rows before the addon's own start never existed there (a cache told it holds more, as the bench does).
    const from = start - this.windowStart;
    const held = from < 0 ? 0 : Math.max(0, Math.min(P - start, (this.decoder.windowCapacity ?? 0) - from));
    this.decoder.resizeWindow!(capacity, held > 0 ? from : 0, held);
    this.windowStart = start;
  }

  /** See DecoderBackend.shift: the addon moves and rotates its own KV blocks, then the KvCache counts. */
  shift(kv: KvCache, keep: number, drop: number, rotation: KeyRotation): void {
    kv.checkDiscard(keep, drop, rotation); // before the addon moves anything
    const w = kv.window ? { ...kv.windowDiscard(keep, drop), length: kv.length - kv.windowStart } : { keepRows: keep, dropRows: drop, length: kv.length, start: 0 };
    try {
      this.decoder.shift(keep, drop, kv.length, rotation.cos, rotation.sin, rotation.interleaved, rotation.rotaryDim, rotation.layerTables, w.keepRows, w.dropRows, w.length);
    } catch (e) {
      throw new SessionRunError(`context shift: ${firstLine(e)}`, { [io.pastKey(0)]: kv.shape }, { cause: e });
    }
    kv.discard(keep, drop, rotation);
    this.windowStart = kv.windowStart;
  }

  /** See DecoderBackend.saveKv: copied out of the addon's blocks. */
  saveKv(kv: KvCache): Float32Array {
    const data = new Float32Array(kv.snapshotFloats(kv.length, kv.windowStart));
    try {
      this.decoder.copyOut(kv.length, data, kv.length - kv.windowStart);
    } catch (e) {
      throw new SessionRunError(`saving the KV cache: ${firstLine(e)}`, { [io.pastKey(0)]: kv.shape }, { cause: e });
    }
    return data;
  }

  /** See DecoderBackend.restoreKv: the addon's blocks are grown to kv.capacity first, then filled. */
  restoreKv(kv: KvCache, data: Float32Array, length: number, windowStart = 0): void {
    kv.checkSnapshot(data, length, windowStart); // before the addon copies anything
    try {
      if (this.decoder.capacity !== kv.capacity) this.decoder.resize(kv.capacity, 0);
      if (this.windowedKv) {
        const capacity = kv.window ? kv.windowCapacity : kv.capacity;
        if (capacity !== this.decoder.windowCapacity) this.decoder.resizeWindow!(capacity, 0, 0);
      }
      this.decoder.copyIn(length, data, length - windowStart);
    } catch (e) {
      throw new SessionRunError(`restoring the KV cache: ${firstLine(e)}`, { [io.pastKey(0)]: kv.shape }, { cause: e });
    }
    kv.restore(null, length, windowStart);
    this.windowStart = windowStart;
  }

  async dispose(): Promise<void> {
    if (this.profile.pending) await this.profile.discard();
    this.decoder.dispose();
  }
}

/**
 * The bundle's external-data file beside `modelPath` (decoder-graph.ts EXTERNAL_DATA_FILE), which
 * the addon reads into memory that may be 2 MiB pages on the CPU (native/src/host_pages.h: a decode
 * step streams every weight; over ONNX Runtime's 4 KiB file mapping a Q4_K_M step ran 12–14 %
 * slower on this project's 2-core VM, docs/benchmarks.md); undefined for a model with its weights inside.
 */
export function weightsFileOf(modelPath: string): string | undefined {
  const file = path.join(path.dirname(modelPath), EXTERNAL_DATA_FILE);
  return existsSync(file) ? file : undefined;
}
