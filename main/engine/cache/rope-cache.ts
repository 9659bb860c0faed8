/**
 * The RoPE cache: cos/sin tables for positions [0, capacity), grown lazily and bounded by the
 * configured max context (docs/ARCHITECTURE.md "RoPE cache"). Contract:
 *   - `ensure(P + T)` before every run. It checks the END position (P + T), never T alone
 *     (seed bug 1), throws ContextOverflowError past maxContext without changing anything, and
 *     on a miss grows to min(nextPow2(end), maxContext), computing only the new rows.
 *   - `rows(P, T)` returns views cos/sin [T, R/2] float32, row-major. A warm step (end within
 *     capacity) allocates no typed-array buffer and computes nothing (seed bug 2).
 *   - `tables` is the whole cache, cos/sin [capacity, R/2]: what the decoder graph takes (it
 *     gathers the step's rows itself, io-names.ts), one object per growth, so a backend binds it
 *     once per growth and sees a growth as a new object.
 *   - Angles are position × invFreq in float64, then cos/sin, times the attention scale, then
 *     stored as float32, so position 1e6 keeps ~1e-7 precision.
 * Rows are the same for the `interleaved` and `half` pair layouts: row p, column i is pair i.
 * A model whose sliding-window layers have a RoPE of their own (`localRope`, Gemma 3) gets both
 * tables in one: row p holds the R/2 global pairs, then the R/2 local ones (`ropeColumns`), each
 * with its own attention scale; one growth rule and bound for both.
 */
import { InvalidOptionError } from '../errors.ts';
import type { RopeConfig } from '../model/manifest.ts';
import { grownCapacity } from './growth.ts';
import { inverseFrequencies } from './inv-freq.ts';

/** What the RoPE cache has done so far (for tests and the UI). */
export interface RopeCacheStats {
  /** Positions whose rows are resident: [0, capacity). */
  capacity: number;
  /** Rows computed since construction (cumulative; a warm step adds 0). */
  rowsComputed: number;
  /** Number of times the tables were reallocated. */
  growths: number;
  /** Resident bytes of cos + sin (2 × capacity × R/2 × 4). */
  bytes: number;
  /** Configured bound on positions. */
  maxContext: number;
}

/** Cos/sin rows for positions [start, start + count): each [count, R/2] float32, row-major. */
export interface RopeRows {
  readonly cos: Float32Array;
  readonly sin: Float32Array;
}

/**
 * The whole RoPE cache as the decoder graph takes it (rope_cos_cache / rope_sin_cache): cos and
 * sin [rows, columns] float32, row-major, rows = the capacity. A new object after each growth;
 * the same one on every call between growths.
 */
export interface RopeTables extends RopeRows {
  /** Positions [0, rows) have rows; rows ≥ P + T of every run that uses these tables. */
  readonly rows: number;
}

/** Lazily grown, max-context-bounded cos/sin tables of one model's RoPE. */
export class RopeCache {
  /** Configured bound on positions; `ensure` beyond it throws ContextOverflowError. */
  readonly maxContext: number;
  /** Multiplier applied to cos and sin (YaRN attention factor, else 1) of the global pairs. */
  readonly attentionScale: number;
  /** [columns] float64 radians per position (global pairs, then local ones with `localRope`). */
  private readonly invFreq: Float64Array;
  /** [columns] the attention scale of each column. */
  private readonly scales: Float64Array;
  private readonly half: number;
  private capacityRows = 0;
  private cos = new Float32Array(0); // [capacity, R/2]
  private sin = new Float32Array(0); // [capacity, R/2]
  private computed = 0;
  private growthCount = 0;
  // Last views handed out, reused when the same (start, count) is asked again.
  private lastStart = -1;
  private lastCount = -1;
  private lastRows: RopeRows | null = null;
  private whole: RopeTables = { cos: this.cos, sin: this.sin, rows: 0 };

  /**
   * @param rope  the model's RoPE parameters (R = rope.rotaryDim, even > 0).
   * @param maxContext  bound on positions, a positive integer.
   * @param localRope  the sliding layers' own RoPE (same rotaryDim), whose pairs follow the
   *   global ones in each row.
   * @throws InvalidOptionError (quoting the value) for a bad maxContext, rotaryDim or RoPE
   *   parameter, or a local RoPE of another rotaryDim. Nothing is allocated until the first `ensure`.
   */
  constructor(rope: RopeConfig, maxContext: number, localRope?: RopeConfig) {
    if (!Number.isInteger(maxContext) || maxContext <= 0) {
      throw new InvalidOptionError('maxContext', `expected a positive integer, got ${maxContext}`);
    }
    if (!Number.isInteger(rope.rotaryDim) || rope.rotaryDim <= 0 || rope.rotaryDim % 2 !== 0) {
      throw new InvalidOptionError('rope.rotaryDim', `expected an even positive integer, got ${rope.rotaryDim}`);
    }
    const { invFreq, attentionScale } = inverseFrequencies(rope, maxContext);
    this.maxContext = maxContext;
    this.attentionScale = attentionScale;
    if (localRope && localRope.rotaryDim !== rope.rotaryDim) {
      throw new InvalidOptionError('localRope.rotaryDim', `expected ${rope.rotaryDim} (the global RoPE's), got ${localRope.rotaryDim}`);
    }
    const local = localRope ? inverseFrequencies(localRope, maxContext) : null;
    this.invFreq = local ? Float64Array.from([...invFreq, ...local.invFreq]) : invFreq;
    this.scales = new Float64Array(this.invFreq.length).fill(attentionScale);
    if (local) this.scales.fill(local.attentionScale, invFreq.length);
    this.half = this.invFreq.length;
  }

  /** Floats per row: R/2 rotary pairs, or R with a local RoPE (`ropeColumns`). */
  get halfDim(): number {
    return this.half;
  }

  /** Positions [0, capacity) have rows. */
  get capacity(): number {
    return this.capacityRows;
  }

  /**
   * The whole cache, cos/sin [capacity, R/2] (the arrays themselves, not copies): the same object
   * until the next growth, so reading it allocates nothing.
   */
  get tables(): RopeTables {
    return this.whole;
  }

  /** Counters; `bytes` is cos + sin resident bytes. */
  get stats(): RopeCacheStats {
    return {
      capacity: this.capacityRows,
      rowsComputed: this.computed,
      growths: this.growthCount,
      bytes: this.cos.byteLength + this.sin.byteLength,
      maxContext: this.maxContext,
    };
  }

  /**
   * Makes rows [0, end) available, where end = P + T (past tokens + new tokens).
   * Warm (end ≤ capacity): returns at once, no allocation, no computation.
   * Miss: grows to min(nextPow2(end), maxContext), copying the old rows bit-exactly and
   * computing only rows [oldCapacity, newCapacity).
   * @param end  end position (exclusive), a non-negative integer.
   * @throws ContextOverflowError(end, maxContext) when end > maxContext; the cache is unchanged.
   * @throws InvalidOptionError when end is not a non-negative integer.
   */
  ensure(end: number): void {
    if (end <= this.capacityRows && end >= 0 && Number.isInteger(end)) return; // warm path
    const oldCap = this.capacityRows;
    const newCap = grownCapacity(end, this.maxContext);
    const h = this.half;
    // Allocate both before touching state: if allocation throws, the cache is unchanged.
    const cos = new Float32Array(newCap * h);
    const sin = new Float32Array(newCap * h);
    cos.set(this.cos);
    sin.set(this.sin);
    const scale = this.scales;
    const inv = this.invFreq;
    for (let p = oldCap; p < newCap; p++) {
      const row = p * h;
      for (let i = 0; i < h; i++) {
        const angle = p * inv[i]; // float64: exact enough at position 1e6
        cos[row + i] = Math.cos(angle) * scale[i];
        sin[row + i] = Math.sin(angle) * scale[i];
      }
    }
    this.cos = cos;
    this.sin = sin;
    this.capacityRows = newCap;
    this.computed += newCap - oldCap;
    this.growthCount++;
    this.lastRows = null;
    this.whole = { cos, sin, rows: newCap };
  }

  /**
   * The rotation that moves a cached key from position p to p − delta (a context shift): for each
   * rotary pair i, cos(delta·invFreq_i) and sin(delta·invFreq_i), angles in float64, WITHOUT the
   * attention scale (a cached key already carries it once; rotating must not scale it again).
   * Applied as (a, b) → (a·cos + b·sin, b·cos − a·sin), i.e. RoPE by −delta (Su et al. 2021:
   * R(p)·R(−δ) = R(p − δ)). Computed on each call (a shift is rare); nothing is cached.
   * @returns cos, sin float32 [R/2].
   * @throws InvalidOptionError when delta is not a positive integer.
   */
  shiftRotation(delta: number): RopeRows {
    if (!Number.isInteger(delta) || delta <= 0) {
      throw new InvalidOptionError('shift', `expected a positive number of positions, got ${delta}`);
    }
    const cos = new Float32Array(this.half);
    const sin = new Float32Array(this.half);
    for (let i = 0; i < this.half; i++) {
      const angle = delta * this.invFreq[i];
      cos[i] = Math.cos(angle);
      sin[i] = Math.sin(angle);
    }
    return { cos, sin };
  }

  /**
   * Views of rows [start, start + count) of the tables: cos and sin, each [count, R/2] float32,
   * row-major (element (t, i) at t·R/2 + i), sharing memory with the cache. They stay valid
   * until the next growth. Asking again for the same (start, count) returns the same object.
   * @throws InvalidOptionError when start/count are not non-negative integers, or when
   *   start + count > capacity (the caller must `ensure(start + count)` first).
   */
  rows(start: number, count: number): RopeRows {
    if (start === this.lastStart && count === this.lastCount && this.lastRows !== null) return this.lastRows;
    if (!Number.isInteger(start) || start < 0 || !Number.isInteger(count) || count < 0) {
      throw new InvalidOptionError('rows', `expected non-negative integers, got start ${start}, count ${count}`);
    }
    const end = start + count;
    if (end > this.capacityRows) {
      throw new InvalidOptionError(
        'rows',
        `rows [${start}, ${end}) are past the RoPE cache capacity ${this.capacityRows}; call ensure(${end}) first`,
      );
    }
    const h = this.half;
    const rows: RopeRows = {
      cos: this.cos.subarray(start * h, end * h),
      sin: this.sin.subarray(start * h, end * h),
    };
    this.lastStart = start;
    this.lastCount = count;
    this.lastRows = rows;
    return rows;
  }
}
