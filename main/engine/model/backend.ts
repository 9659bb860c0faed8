/**
 * The one interface the engine runs a decoder through (docs/ARCHITECTURE.md, "Processes": "Backend
 * interface"), and the choice between its two implementations:
 *   - `js`: onnxruntime-node's JS API (js-session.ts). Portable, the oracle; the KV cache lives in
 *     the KvCache's host buffers, fed as past_* without a copy; a step fetches only the new rows
 *     and writes them there, while ONNX Runtime copies the held rows into its own present_*
 *     (O(context) memcpy per step, nothing proportional to the capacity reaches JavaScript).
 *   - `native`: the native/ addon over ONNX Runtime's C API (native-session.ts). The KV cache
 *     and the RoPE cache live in the provider's memory, bound once per growth with IoBinding; a
 *     decode step moves only its token id (and GroupQueryAttention's two int32 lengths) in and
 *     the last position's logits out.
 * Both take the same whole RoPE cache (`RopeCache.tables`, bound once per growth; the graph
 * gathers the step's rows) and the same KvCache bookkeeping (length, capacity, growth rule);
 * greedy tokens are identical between them.
 */
import { InvalidOptionError } from '../errors.ts';
import type { KeyRotation, KvCache } from '../cache/kv-cache.ts';
import type { RopeTables } from '../cache/rope-cache.ts';

/** Where ONNX Runtime runs the graph (agreed with the graph builder: keep this exact union). */
export type ExecutionProvider = 'cpu' | 'webgpu' | 'cuda';
/** What a user may ask for: a provider, or `auto` (ep-choice.ts: CUDA, else a WebGPU GPU, else CPU). */
export type ExecutionProviderChoice = 'auto' | ExecutionProvider;
export const EXECUTION_PROVIDER_CHOICES = ['auto', 'cpu', 'webgpu', 'cuda'] as const satisfies readonly ExecutionProviderChoice[];
export type BackendKind = 'js' | 'native';
export const BACKEND_KINDS: readonly BackendKind[] = ['native', 'js'];
/** Most ONNX Runtime intra-op threads a load may ask for (0: the physical cores, cpu-threads.ts). */
export const MAX_THREADS = 1024;

export interface SessionInfo {
  /** The implementation in use. */
  backend: BackendKind;
  /** The execution provider actually in use. */
  executionProvider: ExecutionProvider;
  /** Set when the requested backend or provider could not be used, with the reason (one line). */
  fallbackReason: string | null;
  /**
   * Compute nodes ONNX Runtime placed on its CPU execution provider (copies between devices not
   * counted), from its profiler's per-node `provider` over the session's first run
   * (placement.ts); null before that run, or when the profile could not be read.
   */
  nodesOnCpu: number | null;
}

/** One decoder session. Not re-entrant: one `run` at a time (the engine serializes). */
export interface DecoderBackend {
  readonly info: SessionInfo;
  /**
   * true: the KvCache's host buffers are the KV cache (the backend reads and writes them).
   * false: the backend keeps its own KV memory; the KvCache only counts (length, capacity,
   * growths) and is created without buffers. A capacity change seen at `run` is a growth.
   */
  readonly kvOnHost: boolean;
  /**
   * Whether the graph gives its sliding-window layers lengths of their own (io-names.ts
   * `seqlens_k_window`), so their KV cache can be bounded by the window (cache/kv-window.ts);
   * false for a graph without sliding-window layers or built before them.
   */
  readonly windowedKv?: boolean;
  /**
   * Runs T new tokens at positions P … P+T−1, where P = kv.length. The caller has called
   * `kv.ensure(P + T)` and `rope.ensure(P + T)`; on success the KV cache holds the new rows
   * P … P+T−1 (the caller commits them).
   * @param tokenIds T token ids.
   * @param rope the whole RoPE cache (`RopeCache.tables`: cos/sin float32 [rows, R/2], rows ≥
   *   P + T). A backend binds it when it is another object than the last run's (a growth), else
   *   binds nothing of it.
   * @returns logits float32 [V] of the last position; the array is reused by the next run.
   * @throws SessionRunError with the input shapes when ONNX Runtime fails; InvalidOptionError
   *   when the tables hold fewer than P + T rows or the wrong number of columns.
   */
  run(tokenIds: ArrayLike<number>, rope: RopeTables, kv: KvCache): Promise<Float32Array>;
  /**
   * Context shift without a new prefill (llama.cpp's n_discard): drops positions
   * [keep, keep + drop) of the KV cache, moves the later rows down by `drop` and rotates their
   * keys by −drop positions (`rotation`), then `kv.discard`s, so kv.length shrinks by `drop`.
   * Both backends do the same float64 arithmetic, so they hold the same bits afterwards.
   * @throws InvalidOptionError for a range outside [0, kv.length) or a rotation that does not fit
   *   the head (`KvCache.checkDiscard`, before anything moves); SessionRunError when the native
   *   addon fails (the KvCache is then unchanged).
   */
  shift(kv: KvCache, keep: number, drop: number, rotation: KeyRotation): void;
  /**
   * A copy of the KV cache's held rows [0, kv.length) ([kv.windowStart, kv.length) for a
   * windowed layer), compact: float32 per layer [2 (key, value), Hkv, rows, headDim], layers in
   * order (KvCache.snapshotFloats(kv.length, kv.windowStart) floats).
   * Kept by the engine for a conversation it switched away from.
   */
  saveKv(kv: KvCache): Float32Array;
  /**
   * Puts a `saveKv` copy of `length` positions back (the windowed layers' from `windowStart`):
   * the KV cache then holds exactly them (kv.length = length). The caller has called
   * `kv.ensureHeld(length, windowStart)`.
   * @throws InvalidOptionError when `data` is not the size `length` positions take.
   */
  restoreKv(kv: KvCache, data: Float32Array, length: number, windowStart?: number): void;
  /** Releases the session and its memory. */
  dispose(): Promise<void>;
}

/**
 * Checks that `rope` can serve a run ending at position `end` (= P + T) with `columns` floats per
 * row, before anything is bound: rows ≥ end, and cos/sin rows × columns floats each.
 * @throws InvalidOptionError quoting the tables' rows and sizes.
 */
export function checkRopeTables(rope: RopeTables, end: number, columns: number): void {
  const want = rope.rows * columns;
  if (rope.cos.length !== want || rope.sin.length !== want) {
    throw new InvalidOptionError('RoPE cache', `expected ${rope.rows} × ${columns} cos/sin values, got ${rope.cos.length} and ${rope.sin.length}`);
  }
  if (rope.rows < end) throw new InvalidOptionError('RoPE cache', `it holds ${rope.rows} positions, the run ends at ${end} (ensure it first)`);
}
