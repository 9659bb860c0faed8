/**
 * The rule of a sliding-window layer's KV cache (issue 17 item 1): a layer whose attention sees
 * only the last W keys (GroupQueryAttention's `local_window_size` W, the query's own key included:
 * block-variants.ts `localWindow`) keeps only its last rows, in a buffer of its own, never the
 * whole context. The keys are stored after RoPE and GroupQueryAttention's window mask works on
 * buffer offsets, so a contiguous buffer of the LAST rows serves as well as the whole one: row 0
 * holds absolute position `start`, the layer's lengths are (P − start) + T − 1 / (P − start) + T.
 *
 * Sizes (positions; all windowed layers of a model share one W, the "window group"):
 *   H = W − 1   the past rows the next query can read (`rows`)
 *   S           slack (`slack`): room above H, so that most decode steps move nothing;
 *               default max(256, ⌈H / 4⌉), 256 being the engine's prefill chunk
 *   K = ⌊S/2⌋   rows kept beyond H when rows are dropped: a rewind by up to K positions
 *               (a regenerated answer, the engine's "prefill at least one token") is always free
 *   bound       capacity ≤ min(maxContext, H + max(S, T)) after a run of T new tokens (never
 *               shrunk: H + max(S, longest run), the engine's prefill chunk being ≤ S by default);
 *               growth below it is the shared lazy power-of-two rule (growth.ts), checked
 *               against held + T
 * A run that does not fit (held + T > capacity) first drops the oldest rows, keeping H + K (H when
 * H + K + T would pass the bound), then grows if it still does not fit. Copy cost, amortised: a
 * drop moves at most H + K rows per head and happens at most once per S − K decode steps, so
 * (H + K) / (S − K) ≤ 2H/S + 1 rows per step (≤ 9 with S ≥ H/4): a few rows against the H rows the
 * step's attention reads; a warm decode step (held + 1 ≤ capacity) moves nothing.
 *
 * Rewinds (prefix reuse, regenerate, edit): positions [0, n) can be kept only if the windowed
 * layers still hold the rows [n − H, n) the next query reads, i.e. start ≤ max(0, n − H) (start 0
 * holds everything). Otherwise no n' in (0, n] can be kept either (n' − H < start for all of them)
 * and the prompt is prefilled from 0: exact, at the cost of a full prefill, as llama.cpp's server
 * does for its sliding-window cache ("forcing full prompt re-processing due to lack of cache data").
 *
 * Context shift (positions [keep, keep + drop) leave): the windowed rows inside that range leave
 * too, the rest are renumbered (keys turned by −drop like every moved key). When the tail after
 * the cut is shorter than H the window of the next query reaches back into the kept prefix, whose
 * windowed rows are gone once the window passed them; so the engine drops less (`exactDrop`):
 * keep + H tokens stay after the cut, and every row the next query reads is held (shifts come more
 * often then). Only when not even one token can go that way (fewer than H + 1 after the kept
 * prefix) does the shift go ahead and those layers see the tail alone, as llama.cpp's SWA cache
 * (which prunes the same rows) does.
 */
import { InvalidOptionError } from '../errors.ts';
import { grownCapacity } from './growth.ts';

/** The window group of a KV cache: which layers are windowed, and their sizes (file comment). */
export interface KvWindow {
  /** [numLayers]: true for a sliding-window layer. */
  layers: readonly boolean[];
  /** H = W − 1: past rows a windowed layer's next query reads. */
  rows: number;
  /** S: room above H (default `defaultWindowSlack(rows)`). */
  slack: number;
}

/** The default slack S for H past rows: max(256, ⌈H / 4⌉) (file comment). */
export function defaultWindowSlack(rows: number): number {
  return Math.max(256, Math.ceil(rows / 4));
}

/**
 * The window group of a model with per-layer windows `windows` (0: full attention), or null when
 * bounding would not help or is not possible: no windowed layer; windows that differ between
 * layers (one group only); or H + S ≥ maxContext (the bound is the context itself).
 */
export function windowGroup(windows: readonly number[] | undefined, maxContext: number, slack?: number): KvWindow | null {
  const ws = (windows ?? []).filter((w) => w > 0);
  if (ws.length === 0 || ws.some((w) => w !== ws[0])) return null;
  const rows = ws[0] - 1;
  const s = slack ?? defaultWindowSlack(rows);
  if (rows + s >= maxContext) return null;
  return { layers: (windows ?? []).map((w) => w > 0), rows, slack: s };
}

/** What `planWindowRun` decides for one run: rows to drop from the front, then the capacity. */
export interface WindowRunPlan {
  /** Oldest rows that leave (the rest move down to row 0). */
  dropFront: number;
  /** Capacity after the run's growth (the current one when it fits). */
  capacity: number;
}

/**
 * The plan for a run of T new tokens on a window holding `held` rows at `capacity` (file comment):
 * warm (nothing) when held + T ≤ capacity; else drop to H + K (or H), then grow if needed.
 * @throws ContextOverflowError (grownCapacity) only when held + T passes maxContext, which the
 *   global layers' check raises first.
 */
export function planWindowRun(w: KvWindow, held: number, T: number, capacity: number, maxContext: number): WindowRunPlan {
  if (held + T <= capacity) return { dropFront: 0, capacity };
  const bound = Math.min(maxContext, w.rows + Math.max(w.slack, T));
  let kept = Math.min(held, w.rows + Math.floor(w.slack / 2));
  if (kept + T > bound) kept = Math.min(held, w.rows);
  const need = kept + T;
  return { dropFront: held - kept, capacity: need <= capacity ? capacity : grownCapacity(need, bound) };
}

/** Whether positions [0, n) can be kept by a window whose row 0 is position `start`. */
export function windowKeeps(w: KvWindow, start: number, n: number): boolean {
  return start === 0 || start <= n - w.rows;
}

/**
 * A context shift's effect on a window holding positions [start, start + held): the rows of
 * [keep, keep + drop) among them leave (`keepRows` rows stay before them, `dropRows` go), and the
 * window's new first position. See the file comment.
 */
export function windowDiscard(start: number, held: number, keep: number, drop: number): { keepRows: number; dropRows: number; start: number } {
  const clamp = (v: number) => Math.min(held, Math.max(0, v));
  const keepRows = clamp(keep - start);
  const dropRows = clamp(keep + drop - start) - keepRows;
  return { keepRows, dropRows, start: start < keep ? start : Math.max(start, keep + drop) - drop };
}

/**
 * The largest drop ≤ `drop` for a shift of [keep, keep + drop) out of `length` positions after which
 * a window starting at `start` holds the H rows before the new end: `drop` when the tail after the
 * cut has H rows or the window still holds the kept prefix's rows the new window reaches; else
 * length − keep − H when that is ≥ 1; else `drop` (nothing exact is possible; see the file comment).
 */
export function exactDrop(w: KvWindow, start: number, length: number, keep: number, drop: number): number {
  const reach = length - drop - w.rows; // the first position the next query reads, after the shift
  if (reach >= keep || start <= Math.max(0, reach)) return drop;
  const most = length - keep - w.rows;
  return most >= 1 ? Math.min(drop, most) : drop;
}

/** @throws InvalidOptionError unless `w` fits a cache of `numLayers` layers (rows ≥ 1, slack ≥ 1). */
export function checkWindow(w: KvWindow, numLayers: number): void {
  if (w.layers.length !== numLayers || !w.layers.some(Boolean) || !Number.isInteger(w.rows) || w.rows < 1 || !Number.isInteger(w.slack) || w.slack < 1) {
    throw new InvalidOptionError('KV window', `${w.layers.length} layer flags for ${numLayers} layers, ${w.rows} rows, slack ${w.slack}`);
  }
}
