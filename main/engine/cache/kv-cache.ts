/**
 * The KV cache, host-side: per layer one key and one value buffer (float32: Float32Array; or
 * float16, the KV dtype of a float16 graph: Uint16Array of float16 bits) laid out
 * [1, numKvHeads, capacity, headDim] (BNSH: head h, position p, dim d at
 * (h·capacity + p)·headDim + d). This is the past_key/past_value layout of ONNX Runtime's
 * com.microsoft.GroupQueryAttention with past and present bound to one buffer: the graph
 * appends positions [P, P+T) in place, then the engine `commit(T)`s.
 * Contract (same discipline as the RoPE cache, docs/ARCHITECTURE.md "KV cache"):
 *   - `ensure(P + T)` before every run: ContextOverflowError past maxContext with nothing
 *     changed; on a miss grow to min(nextPow2(end), maxContext), copying each head's first
 *     `length` rows to the new stride. A warm step does no work.
 *   - Initial capacity is 0 (nothing allocated until the first `ensure`): ONNX Runtime needs a
 *     non-empty buffer, so `ensure` is always called before a run anyway, and a model that
 *     is loaded but never used costs no KV memory.
 *   - `commit(n)` after a successful run, `rewindTo(n)` to reuse a common prefix, `reset()`
 *     for a new conversation (keeps the buffers, so the next conversation does not regrow).
 *   - `discard(keep, drop, rotation)`: the context shift (llama.cpp's n_discard): positions
 *     [keep, keep+drop) leave, the later rows move down by `drop`, and their keys (stored after
 *     RoPE) are rotated by −drop positions, so they read as if computed at their new positions.
 *   - `snapshot()` / `restore(data, length, windowStart)`: a compact copy of the held rows and
 *     back (the engine keeps these for conversations it switched away from), float32 whatever the
 *     dtype (float16 values convert exactly to float32 and back).
 *   - `window` (sliding-window layers, kv-window.ts): those layers have buffers of their own,
 *     [1, numKvHeads, windowCapacity, headDim], holding positions [windowStart, length) only;
 *     `ensure` drops their oldest rows and grows them by kv-window.ts's rule, bounded by the
 *     window, `rewindTo` refuses what they no longer hold (`reusable` says how far is possible),
 *     `discard` renumbers them. Without `window` every layer is a global one, as before.
 */
import { ContextOverflowError, InvalidOptionError } from '../errors.ts';
import { floatToHalf, halfToFloat } from '../model/gguf/quants.ts';
import { grownCapacity } from './growth.ts';
import { checkWindow, exactDrop, planWindowRun, windowDiscard, windowKeeps, type KvWindow } from './kv-window.ts';

/** Element type of the KV rows: the graph's KV dtype (graph-target.ts). */
export type KvDtype = 'float32' | 'float16';

/** One layer's key or value buffer: float32 values, or float16 bits. */
export type KvBuffer = Float32Array | Uint16Array;

/** Bytes per KV element of a dtype. */
export function kvElementBytes(dtype: KvDtype): number {
  return dtype === 'float16' ? 2 : 4;
}

/** Sizes of a KV cache. All positive integers. */
export interface KvCacheOptions {
  numLayers: number;
  numKvHeads: number;
  /** Floats per head per position. */
  headDim: number;
  /** Bound on positions; `ensure` beyond it throws ContextOverflowError. */
  maxContext: number;
  /**
   * false: the backend keeps the KV memory itself (the native addon); this cache only counts
   * (length, capacity, growths, bytes the backend holds) and `key`/`value` throw. Default true.
   */
  hostBuffers?: boolean;
  /** Element type of the rows (default float32); float16 for a float16 graph. */
  dtype?: KvDtype;
  /** The sliding-window layers and their bound (kv-window.ts `windowGroup`); none: all global. */
  window?: KvWindow | null;
}

/**
 * The rotation a context shift applies to each moved key (see `RopeCache.shiftRotation`): pair i
 * (a, b) → (a·cos_i + b·sin_i, b·cos_i − a·sin_i), on the first `rotaryDim` dims of each head;
 * pairs are (2i, 2i+1) when `interleaved` (llama2.c), else (i, i + R/2) (Hugging Face).
 */
export interface KeyRotation {
  /** float32 [K · R/2]: K rotations of R/2 pairs each (K = 1 without `layerTables`). */
  cos: Float32Array;
  /** float32 [K · R/2]. */
  sin: Float32Array;
  rotaryDim: number;
  interleaved: boolean;
  /**
   * [numLayers]: which of the K rotations each layer's keys turn by (Gemma 3: 0 = the global
   * RoPE's, 1 = the sliding layers' own, `RopeCache.shiftRotation`'s halves); absent: all the first.
   */
  layerTables?: Uint8Array;
}

/** Layer `l`'s rotation of a `KeyRotation` (its table's R/2 cos and sin). */
export function layerRotation(r: KeyRotation, l: number): KeyRotation {
  if (!r.layerTables) return r;
  const half = r.rotaryDim / 2;
  const at = r.layerTables[l] * half;
  return { ...r, cos: r.cos.subarray(at, at + half), sin: r.sin.subarray(at, at + half), layerTables: undefined };
}

/** What the KV cache holds and has done (for tests and the UI). */
export interface KvCacheStats {
  capacity: number;
  /** Tokens held (P). */
  length: number;
  /** Number of reallocations. */
  growths: number;
  /** Resident bytes of every layer's key + value buffers. */
  bytes: number;
  maxContext: number;
  /** Positions a windowed layer's buffers can hold (0 without a window group). */
  windowCapacity: number;
  /** Resident bytes of the windowed layers' buffers (included in `bytes`). */
  windowBytes: number;
  /** Rows the windowed layers dropped as the window moved (each row of one layer counted once). */
  windowRowsDropped: number;
}

/** Per-layer key/value buffers [1, numKvHeads, capacity, headDim] (float32 or float16), lazily grown. */
export class KvCache {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly maxContext: number;
  /** Whether `key`/`value` buffers exist here (see KvCacheOptions.hostBuffers). */
  readonly hostBuffers: boolean;
  readonly dtype: KvDtype;
  /** The window group (kv-window.ts), or null: every layer holds [0, length). */
  readonly window: KvWindow | null;
  private keys: KvBuffer[];
  private values: KvBuffer[];
  private cap = 0;
  private len = 0;
  private growthCount = 0;
  private dims: readonly [1, number, number, number];
  private wCap = 0;
  private wStart = 0;
  private wDropped = 0;
  private allocs = 0;
  private readonly windowedCount: number;

  /**
   * @throws InvalidOptionError (quoting the value) when a size is not a positive integer or the
   *   dtype is neither float32 nor float16.
   */
  constructor(opts: KvCacheOptions) {
    for (const key of ['numLayers', 'numKvHeads', 'headDim', 'maxContext'] as const) {
      const v = opts[key];
      if (!Number.isInteger(v) || v <= 0) {
        throw new InvalidOptionError(key, `expected a positive integer, got ${v}`);
      }
    }
    this.numLayers = opts.numLayers;
    this.numKvHeads = opts.numKvHeads;
    this.headDim = opts.headDim;
    this.maxContext = opts.maxContext;
    this.hostBuffers = opts.hostBuffers ?? true;
    const dtype = opts.dtype ?? 'float32';
    if (dtype !== 'float32' && dtype !== 'float16') throw new InvalidOptionError('KV dtype', `expected float32 or float16, got ${JSON.stringify(dtype)}`);
    this.dtype = dtype;
    if (opts.window) checkWindow(opts.window, this.numLayers);
    this.window = opts.window ?? null;
    this.windowedCount = this.window ? this.window.layers.filter(Boolean).length : 0;
    this.keys = Array.from({ length: this.numLayers }, () => this.alloc(0));
    this.values = Array.from({ length: this.numLayers }, () => this.alloc(0));
    this.dims = [1, this.numKvHeads, 0, this.headDim];
  }

  private alloc(n: number): KvBuffer {
    return this.dtype === 'float16' ? new Uint16Array(n) : new Float32Array(n);
  }

  /** Tokens held (P): positions [0, length) are valid. */
  get length(): number {
    return this.len;
  }

  /** Positions the buffers can hold (the C in [1, Hkv, C, headDim]). */
  get capacity(): number {
    return this.cap;
  }

  /** ONNX tensor dims of every key/value buffer: [1, numKvHeads, capacity, headDim]. Same object until a growth. */
  get shape(): readonly [1, number, number, number] {
    return this.dims;
  }

  /** Whether layer l is a sliding-window layer with a bounded buffer. */
  windowed(l: number): boolean {
    return this.window?.layers[l] ?? false;
  }

  /** Positions layer l's buffers can hold: `capacity`, or `windowCapacity` for a windowed layer. */
  capacityOf(l: number): number {
    return this.windowed(l) ? this.wCap : this.cap;
  }

  /** The position layer l's row 0 holds: 0, or `windowStart` for a windowed layer. */
  startOf(l: number): number {
    return this.windowed(l) ? this.wStart : 0;
  }

  /** Positions a windowed layer's buffers can hold (0 without a window group). */
  get windowCapacity(): number {
    return this.wCap;
  }

  /** The position a windowed layer's row 0 holds: they hold [windowStart, length). 0 without a window group. */
  get windowStart(): number {
    return this.wStart;
  }

  /** Buffer (re)allocations so far, global or windowed: a backend that wraps the buffers rebinds when it changes. */
  get allocations(): number {
    return this.allocs;
  }

  /** Counters; `bytes` covers all layers' key and value buffers. */
  get stats(): KvCacheStats {
    const row = this.numKvHeads * this.headDim * kvElementBytes(this.dtype) * 2;
    const windowBytes = this.wCap * row * this.windowedCount;
    return {
      capacity: this.cap,
      length: this.len,
      growths: this.growthCount,
      bytes: this.cap * row * (this.numLayers - this.windowedCount) + windowBytes,
      maxContext: this.maxContext,
      windowCapacity: this.wCap,
      windowBytes,
      windowRowsDropped: this.wDropped,
    };
  }

  /**
   * Makes positions [0, end) fit, where end = P + T. Warm (end ≤ capacity): no work.
   * Miss: reallocates every layer's buffers at min(nextPow2(end), maxContext) and copies each
   * head's first `length` rows to the new stride (rows past `length` are not kept); without host
   * buffers only the capacity changes (the backend sees it and grows its own memory).
   * @throws ContextOverflowError(end, maxContext) when end > maxContext; nothing changes.
   * @throws InvalidOptionError when end is not a non-negative integer.
   */
  ensure(end: number): void {
    if (end <= this.cap && end >= 0 && Number.isInteger(end)) {
      if (this.window && end - this.wStart > this.wCap) this.ensureWindow(end - this.len);
      return; // warm path
    }
    this.reserve(end);
    if (this.window) this.ensureWindow(end - this.len);
  }

  /**
   * Grows the global layers' capacity to fit positions [0, end) ahead of a prefill of several
   * runs (the engine's chunks), so the cache grows once to min(nextPow2(end), maxContext) instead
   * of once per chunk — each growth maps fresh memory and copies the held rows (a 1,024-token
   * prompt in chunks of 256 grew 256 → 512 → 1,024 → …, mapping and touching twice the final
   * bytes). Sliding-window layers are left to each run's `ensure` (they are bounded by the window,
   * not by `end`). Warm (end ≤ capacity): no work. Each run still calls `ensure`.
   * @throws ContextOverflowError(end, maxContext) when end > maxContext; nothing changes.
   * @throws InvalidOptionError when end is not a non-negative integer.
   */
  reserve(end: number): void {
    if (end <= this.cap && end >= 0 && Number.isInteger(end)) return;
    const newCap = grownCapacity(end, this.maxContext);
    if (this.hostBuffers) this.reallocate(newCap, false, this.len, 0);
    this.cap = newCap;
    this.dims = [1, this.numKvHeads, newCap, this.headDim];
    this.growthCount++;
  }

  /**
   * The windowed layers' part of `ensure` for a run of T new tokens (kv-window.ts `planWindowRun`):
   * drops their oldest rows, then grows their buffers, moving the held rows once.
   */
  private ensureWindow(T: number): void {
    const w = this.window!;
    const held = this.len - this.wStart;
    const plan = planWindowRun(w, held, T, this.wCap, this.maxContext);
    if (plan.dropFront === 0 && plan.capacity === this.wCap) return;
    if (this.hostBuffers) {
      if (plan.capacity !== this.wCap) this.reallocate(plan.capacity, true, held - plan.dropFront, plan.dropFront);
      else this.moveWindowRows(plan.dropFront, held - plan.dropFront);
    }
    this.wDropped += plan.dropFront * this.windowedCount;
    this.wStart += plan.dropFront;
    this.wCap = plan.capacity;
  }

  /** In place: each windowed head's rows [from, from + rows) move to [0, rows). */
  private moveWindowRows(from: number, rows: number): void {
    const hd = this.headDim;
    for (let l = 0; l < this.numLayers; l++) {
      if (!this.windowed(l)) continue;
      for (const buf of [this.keys[l], this.values[l]]) {
        for (let h = 0; h < this.numKvHeads; h++) {
          const head = h * this.wCap * hd;
          buf.copyWithin(head, head + from * hd, head + (from + rows) * hd);
        }
      }
    }
  }

  /**
   * New buffers at newCap rows per head for the global layers (`windowed` false) or the windowed
   * ones, holding rows [from, from + rows) of the old ones at [0, rows).
   */
  private reallocate(newCap: number, windowed: boolean, rows: number, from: number): void {
    // Allocate everything before touching state: if allocation throws, the cache is unchanged.
    const mine = (l: number) => this.windowed(l) === windowed;
    const oldCap = windowed ? this.wCap : this.cap;
    const fresh = (bufs: KvBuffer[]) => bufs.map((b, l) => (mine(l) ? this.alloc(this.numKvHeads * newCap * this.headDim) : b));
    const keys = fresh(this.keys);
    const values = fresh(this.values);
    for (let l = 0; l < this.numLayers; l++) {
      if (!mine(l)) continue;
      this.copyHeads(this.keys[l], keys[l], oldCap, newCap, rows, from);
      this.copyHeads(this.values[l], values[l], oldCap, newCap, rows, from);
    }
    this.keys = keys;
    this.values = values;
    this.allocs++;
  }

  /** Copies rows [from, from + rows) of every head from stride `cap` to rows [0, rows) at stride `newCap`. */
  private copyHeads(from: KvBuffer, to: KvBuffer, cap: number, newCap: number, rows: number, first: number): void {
    const hd = this.headDim;
    const n = rows * hd;
    if (n === 0) return;
    for (let h = 0; h < this.numKvHeads; h++) {
      const src = (h * cap + first) * hd;
      (to as Float32Array).set(from.subarray(src, src + n), h * newCap * hd);
    }
  }

  /**
   * Marks n more positions as held, after a run wrote [length, length + n).
   * @throws ContextOverflowError when length + n > maxContext.
   * @throws InvalidOptionError when n is not a non-negative integer or length + n > capacity
   *   (the caller must `ensure(length + n)` before the run).
   */
  commit(n: number): void {
    if (!Number.isInteger(n) || n < 0) {
      throw new InvalidOptionError('commit count', `expected a non-negative integer, got ${n}`);
    }
    const end = this.len + n;
    if (end > this.maxContext) throw new ContextOverflowError(end, this.maxContext);
    if (end > this.cap) {
      throw new InvalidOptionError(
        'commit count',
        `${this.len} + ${n} exceeds the KV cache capacity ${this.cap}; call ensure(${end}) before the run`,
      );
    }
    if (this.window && end - this.wStart > this.wCap) {
      throw new InvalidOptionError('commit count', `${end - this.wStart} windowed rows exceed the window capacity ${this.wCap}; call ensure(${end}) before the run`);
    }
    this.len = end;
  }

  /**
   * Keeps only positions [0, n); later data stays in the buffer and is overwritten by the next run.
   * @throws InvalidOptionError when n is not an integer in [0, length].
   */
  rewindTo(n: number): void {
    if (!Number.isInteger(n) || n < 0 || n > this.len) {
      throw new InvalidOptionError('rewind length', `expected an integer in [0, ${this.len}], got ${n}`);
    }
    if (this.reusable(n) !== n) {
      throw new InvalidOptionError('rewind length', `the sliding-window layers hold positions [${this.wStart}, ${this.len}), not the ${this.window!.rows} before ${n}`);
    }
    this.len = n;
    if (n === 0) this.wStart = 0;
  }

  /**
   * The longest prefix [0, n') with n' ≤ n that `rewindTo` can keep: n, or 0 when the windowed
   * layers no longer hold the rows before n (kv-window.ts: no shorter prefix is held either).
   */
  reusable(n: number): number {
    return !this.window || windowKeeps(this.window, this.wStart, n) ? n : 0;
  }

  /**
   * Context shift: drops positions [keep, keep + drop) and moves [keep + drop, length) down to
   * [keep, length − drop). With host buffers the rows of every layer and head move here and the
   * moved keys are rotated by `rotation` (math in float64, stored as float32: the same
   * arithmetic as the native addon's shift, so both backends hold the same bits; float16 rows
   * are rounded to float16 once, from the float64 result); without, the
   * backend has moved its own memory and only the length changes. O(layers × heads × length).
   * @throws InvalidOptionError when keep/drop are not integers with keep ≥ 0, drop ≥ 1 and
   *   keep + drop ≤ length, or the rotation does not fit the head size; nothing changes.
   */
  discard(keep: number, drop: number, rotation: KeyRotation): void {
    this.checkDiscard(keep, drop, rotation);
    const w = this.windowDiscard(keep, drop);
    if (this.hostBuffers) {
      for (let l = 0; l < this.numLayers; l++) {
        const [k, d, n, cap] = this.windowed(l) ? [w.keepRows, w.dropRows, this.len - this.wStart, this.wCap] : [keep, drop, this.len, this.cap];
        this.shiftRows(this.keys[l], k, d, n, cap, layerRotation(rotation, l));
        this.shiftRows(this.values[l], k, d, n, cap, null);
      }
    }
    this.wDropped += w.dropRows * this.windowedCount;
    this.len -= drop;
    this.wStart = w.start;
  }

  /**
   * The largest drop ≤ `drop` after which the sliding-window layers still hold every row their
   * next query reads (kv-window.ts `exactDrop`): `drop` itself unless the tail after the cut is
   * shorter than their window and they no longer hold the kept prefix's last rows.
   */
  exactDrop(keep: number, drop: number): number {
    return this.window ? exactDrop(this.window, this.wStart, this.len, keep, drop) : drop;
  }

  /**
   * What a context shift dropping [keep, keep + drop) does to the windowed layers (kv-window.ts
   * `windowDiscard`): rows kept before the cut, rows dropped, their new first position; for a
   * backend that moves its own memory. All zero without a window group.
   */
  windowDiscard(keep: number, drop: number): { keepRows: number; dropRows: number; start: number } {
    if (!this.window) return { keepRows: 0, dropRows: 0, start: 0 };
    return windowDiscard(this.wStart, this.len - this.wStart, keep, drop);
  }

  /**
   * The rules of `discard` (range and rotation), for a backend that moves its own memory first:
   * checked before it moves anything, so a refused shift leaves both the backend and the cache as
   * they were.
   * @throws InvalidOptionError unless keep, drop are integers, keep ≥ 0, drop ≥ 1, keep + drop ≤ length,
   *   and the rotation's rotaryDim R is even, in (0, headDim], with R/2 cos and sin (K · R/2 with
   *   `layerTables`: one entry per layer, each below K).
   */
  checkDiscard(keep: number, drop: number, rotation: KeyRotation): void {
    if (!Number.isInteger(keep) || !Number.isInteger(drop) || keep < 0 || drop < 1 || keep + drop > this.len) {
      throw new InvalidOptionError('context shift', `cannot drop [${keep}, ${keep + drop}) of ${this.len} positions`);
    }
    const R = rotation.rotaryDim;
    const tables = rotation.layerTables;
    const K = tables ? Math.max(0, ...tables) + 1 : 1;
    if (!Number.isInteger(R) || R <= 0 || R % 2 !== 0 || R > this.headDim || rotation.cos.length < (K * R) / 2 || rotation.cos.length % (R / 2) !== 0 || rotation.sin.length !== rotation.cos.length) {
      throw new InvalidOptionError('context shift', `a rotation of ${R} dims with ${rotation.cos.length} angles does not fit head size ${this.headDim}`);
    }
    if (tables && tables.length !== this.numLayers) {
      throw new InvalidOptionError('context shift', `layer tables for ${tables.length} layers, the cache has ${this.numLayers}`);
    }
  }

  /**
   * Moves each head's rows [keep + drop, length) of a buffer of `cap` rows per head down by
   * `drop` (drop may be 0: a window whose rows all lie after the cut only turns), rotating them
   * when asked.
   */
  private shiftRows(buf: KvBuffer, keep: number, drop: number, length: number, cap: number, rotation: KeyRotation | null): void {
    const hd = this.headDim;
    for (let h = 0; h < this.numKvHeads; h++) {
      const head = h * cap * hd;
      if (drop > 0) buf.copyWithin(head + keep * hd, head + (keep + drop) * hd, head + length * hd);
      if (rotation) rotateRows(buf, head + keep * hd, length - keep - drop, hd, rotation);
    }
  }

  /**
   * Floats a `snapshot` of `length` positions takes, the windowed layers holding
   * [windowStart, length): 2 × numKvHeads × headDim × (length per global layer + (length −
   * windowStart) per windowed one).
   */
  snapshotFloats(length: number, windowStart = 0): number {
    const windowRows = Math.max(0, length - windowStart);
    return 2 * this.numKvHeads * this.headDim * (length * (this.numLayers - this.windowedCount) + windowRows * this.windowedCount);
  }

  /**
   * Makes the buffers big enough to hold exactly `length` positions, the windowed layers
   * [windowStart, length), before a `restore` (contents are not kept; length becomes 0).
   * @throws InvalidOptionError when windowStart is not in [0, length] or the windowed rows pass
   *   the window's bound; ContextOverflowError past maxContext.
   */
  ensureHeld(length: number, windowStart: number): void {
    const w = this.window;
    if (!Number.isInteger(windowStart) || windowStart < 0 || windowStart > length || (!w && windowStart !== 0)) {
      throw new InvalidOptionError('restore window start', `expected an integer in [0, ${w ? length : 0}], got ${windowStart}`);
    }
    const rows = length - windowStart;
    const bound = w ? Math.min(this.maxContext, w.rows + Math.max(w.slack, rows)) : 0;
    if (w && rows > bound) throw new InvalidOptionError('restore window start', `${rows} windowed rows pass the bound ${bound}`);
    const global = length > this.cap ? grownCapacity(length, this.maxContext) : this.cap;
    this.len = 0;
    this.wStart = 0;
    if (global !== this.cap) {
      if (this.hostBuffers) this.reallocate(global, false, 0, 0);
      this.cap = global;
      this.dims = [1, this.numKvHeads, global, this.headDim];
      this.growthCount++;
    }
    if (!w) return;
    if (rows > this.wCap) {
      const cap = grownCapacity(rows, bound);
      if (this.hostBuffers) this.reallocate(cap, true, 0, 0);
      this.wCap = cap;
    }
  }

  /**
   * A compact copy of the held rows: float32 [numLayers, 2 (key, value), numKvHeads, length, headDim].
   * @throws InvalidOptionError without host buffers (the backend copies its own: saveKv).
   */
  snapshot(): Float32Array {
    const out = new Float32Array(this.snapshotFloats(this.len, this.wStart));
    this.eachHead(this.len, this.wStart, (buf, at, compact, rows) => {
      const n = rows * this.headDim;
      if (buf instanceof Float32Array) out.set(buf.subarray(at, at + n), compact);
      else for (let j = 0; j < n; j++) out[compact + j] = halfToFloat(buf[at + j]);
    });
    return out;
  }

  /**
   * Makes the cache hold exactly `length` positions again (the windowed layers [windowStart,
   * length)): the rows of a `snapshot` of that length are copied back (host buffers), or, with
   * `data` null, the backend has filled its own memory and only the lengths are set. The caller
   * has called `ensureHeld(length, windowStart)` (or `ensure(length)` without a window group).
   * @throws InvalidOptionError when the rows do not fit the capacities or data has the wrong
   *   size; nothing changes.
   */
  restore(data: Float32Array | null, length: number, windowStart = 0): void {
    if (!Number.isInteger(length) || length < 0 || length > this.cap) {
      throw new InvalidOptionError('restore length', `expected an integer in [0, ${this.cap}], got ${length}`);
    }
    if (windowStart !== 0 && (!this.window || !Number.isInteger(windowStart) || windowStart < 0 || windowStart > length)) {
      throw new InvalidOptionError('restore window start', `expected an integer in [0, ${this.window ? length : 0}], got ${windowStart}`);
    }
    if (this.window && length - windowStart > this.wCap) {
      throw new InvalidOptionError('restore length', `${length - windowStart} windowed rows exceed the window capacity ${this.wCap}`);
    }
    if (this.hostBuffers) {
      this.checkSnapshot(data, length, windowStart);
      this.eachHead(length, windowStart, (buf, at, compact, rows) => {
        const n = rows * this.headDim;
        if (buf instanceof Float32Array) buf.set(data.subarray(compact, compact + n), at);
        else for (let j = 0; j < n; j++) buf[at + j] = floatToHalf(data[compact + j]);
      });
    }
    this.len = length;
    this.wStart = windowStart;
  }

  /**
   * The size rule of a `snapshot` of `length` positions, for a backend that copies its own memory.
   * @throws InvalidOptionError when `data` is missing or not snapshotFloats(length) floats.
   */
  checkSnapshot(data: Float32Array | null, length: number, windowStart = 0): asserts data is Float32Array {
    const want = this.snapshotFloats(length, windowStart);
    if (!data || data.length !== want) {
      throw new InvalidOptionError('KV copy', `${length} positions take ${want} floats, got ${data?.length ?? 'none'}`);
    }
  }

  /**
   * Calls fn(buffer, offset of head h's row 0, offset in a compact snapshot, rows) for every
   * layer, key/value and head; a global layer has `length` rows, a windowed one length − windowStart.
   */
  private eachHead(length: number, windowStart: number, fn: (buf: KvBuffer, at: number, compact: number, rows: number) => void): void {
    if (!this.hostBuffers) this.checkLayer(0);
    const hd = this.headDim;
    let compact = 0;
    for (let l = 0; l < this.numLayers; l++) {
      const rows = this.windowed(l) ? length - windowStart : length;
      const cap = this.capacityOf(l);
      for (const buf of [this.keys[l], this.values[l]]) {
        for (let h = 0; h < this.numKvHeads; h++, compact += rows * hd) fn(buf, h * cap * hd, compact, rows);
      }
    }
  }

  /** Empties the cache (length 0). Buffers and capacity are kept for the next conversation. */
  reset(): void {
    this.len = 0;
    this.wStart = 0;
  }

  /**
   * Layer's key buffer [1, numKvHeads, capacityOf(layer), headDim] in `dtype` (BNSH); a windowed
   * layer's row r holds position windowStart + r. Replaced on growth: fetch it again after `ensure`.
   * @throws InvalidOptionError when layer is not in [0, numLayers).
   */
  key(layer: number): KvBuffer {
    return this.keys[this.checkLayer(layer)];
  }

  /** Layer's value buffer, same layout and validity as `key`. */
  value(layer: number): KvBuffer {
    return this.values[this.checkLayer(layer)];
  }

  private checkLayer(layer: number): number {
    if (!this.hostBuffers) {
      throw new InvalidOptionError('layer', `the KV cache of layer ${layer} is held by the backend, not on the host`);
    }
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.numLayers) {
      throw new InvalidOptionError('layer', `expected an integer in [0, ${this.numLayers}), got ${layer}`);
    }
    return layer;
  }
}

/**
 * Rotates `rows` consecutive key rows of `hd` elements starting at `at` (see KeyRotation), in
 * float64 from the stored values, each result stored once (rounded to float32, or to float16
 * for float16 rows).
 */
function rotateRows(buf: KvBuffer, at: number, rows: number, hd: number, r: KeyRotation): void {
  const half = r.rotaryDim / 2;
  const { cos, sin, interleaved } = r;
  const bits = buf instanceof Uint16Array;
  const read = (i: number) => (bits ? halfToFloat(buf[i]) : buf[i]);
  const write = (i: number, v: number) => (buf[i] = bits ? floatToHalf(v) : v);
  for (let t = 0; t < rows; t++) {
    const row = at + t * hd;
    for (let i = 0; i < half; i++) {
      const ia = row + (interleaved ? 2 * i : i);
      const ib = row + (interleaved ? 2 * i + 1 : i + half);
      const a = read(ia);
      const b = read(ib);
      write(ia, a * cos[i] + b * sin[i]);
      write(ib, b * cos[i] - a * sin[i]);
    }
  }
}
