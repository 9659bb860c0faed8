/**
 * Memory a bundle needs once loaded, estimated before loading it, so a model that cannot fit is
 * refused with a sentence instead of the process being killed by the OS.
 *
 * Estimate = weights as stored in the bundle (ONNX Runtime keeps initializers resident in the
 * form they are stored: float32, or MatMulNBits blocks) + the KV cache at the max context
 * (`kvBytesPerPosition` × max context: 2 × layers × KV heads × head size × 4 bytes, or 2 for a
 * float16 graph's KV cache; it grows lazily up to there; a sliding-window layer counts
 * min(max context, H + S) positions, its bound: cache/kv-window.ts) + the
 * RoPE cache at the max context (max context × rotary dim × 4 bytes, cos and sin halves).
 * Activations and ONNX Runtime's own arenas come on top and are not counted.
 */
import { readdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ModelLoadError } from '../errors.ts';
import { EXTERNAL_DATA_FILE } from './decoder-graph.ts';
import { manifestKvDtype, type ModelConfig, type ModelManifest } from './manifest.ts';
import { kvElementBytes, type KvDtype } from '../cache/kv-cache.ts';
import { windowGroup } from '../cache/kv-window.ts';

/**
 * Bytes the KV cache takes per position: key and value rows of every layer,
 * 2 × numLayers × numKvHeads × headDim × (4 for float32, 2 for float16). Qwen3-0.6B's shapes
 * (28 layers, 8 KV heads of 128): 229,376 float32, 114,688 float16.
 */
export function kvBytesPerPosition(c: Pick<ModelConfig, 'numLayers' | 'numKvHeads' | 'headDim'>, dtype: KvDtype = 'float32'): number {
  return 2 * c.numLayers * c.numKvHeads * c.headDim * kvElementBytes(dtype);
}

/** Bytes a loaded model needs, by part. */
export interface MemoryEstimate {
  weightBytes: number;
  /** All layers' KV at the max context, the sliding-window layers' at their bound. */
  kvCacheBytes: number;
  ropeCacheBytes: number;
  totalBytes: number;
  /**
   * The sliding-window layers' part: their bytes per position and the positions they hold at
   * most (H + S, cache/kv-window.ts); absent without a bounded window. The rest of kvCacheBytes
   * grows with the max context.
   */
  window?: { bytesPerPosition: number; rows: number };
}

/**
 * The sliding-window layers' share of `kvBytesPerPosition` and their bound (H + S positions), or
 * null when the KV cache has no window group at a context longer than the bound (windows that
 * differ between layers, or none: kv-window.ts `windowGroup`).
 */
export function windowKv(c: KvShape, dtype: KvDtype = 'float32'): { bytesPerPosition: number; rows: number } | null {
  const windows = c.slidingWindow;
  // At a context past any bound: is there a group, and what does it hold?
  const group = windowGroup(windows, Number.MAX_SAFE_INTEGER);
  if (!group) return null;
  const layers = group.layers.filter(Boolean).length;
  return { bytesPerPosition: kvBytesPerPosition({ ...c, numLayers: layers }, dtype), rows: group.rows + group.slack };
}

/** KV bytes at `maxContext` positions: global layers hold every position, sliding-window ones min(maxContext, their bound). */
export function kvCacheBytes(c: KvShape, maxContext: number, dtype: KvDtype = 'float32'): number {
  const w = windowKv(c, dtype);
  const all = kvBytesPerPosition(c, dtype) * maxContext;
  return w ? all - w.bytesPerPosition * Math.max(0, maxContext - w.rows) : all;
}

/** What the KV cache is sized by: the attention shape and the per-layer sliding windows. */
type KvShape = Pick<ModelConfig, 'numLayers' | 'numKvHeads' | 'headDim'> & { slidingWindow?: number[] };

/** Sum of the sizes of a bundle folder's files (its size on disk), bytes. */
export async function bundleBytes(dir: string): Promise<number> {
  let total = 0;
  for (const f of await readdir(dir)) total += (await stat(path.join(dir, f))).size;
  return total;
}

/**
 * The estimate for `manifest` at `maxContext` positions.
 * @param dir the bundle folder (its external data size stands in for weights of bundles written
 *   before manifests recorded `weights`). @param kvDtype the KV cache's, the graph's that will run
 *   (default: `model.onnx`'s).
 */
export async function estimateMemory(manifest: ModelManifest, dir: string, maxContext: number, kvDtype: KvDtype = manifestKvDtype(manifest)): Promise<MemoryEstimate> {
  const weightBytes = manifest.weights?.bytes ?? (await stat(path.join(dir, EXTERNAL_DATA_FILE)).catch(() => ({ size: 0 }))).size;
  return estimateForShape(manifest.config, weightBytes, maxContext, kvDtype);
}

/** The attention shape the KV and RoPE caches are sized by (a `ModelConfig` has it). */
export type CacheShape = KvShape & { rope: Pick<ModelConfig['rope'], 'rotaryDim'> };

/**
 * The same estimate from an attention shape and the weights' resident bytes, for a model not
 * imported yet (the model library estimates from a file's header with this).
 * @param weightBytes bytes the weights take once loaded; @param maxContext positions;
 * @param kvDtype the KV cache's element type (float16 halves it).
 */
export function estimateForShape(c: CacheShape, weightBytes: number, maxContext: number, kvDtype: KvDtype = 'float32'): MemoryEstimate {
  const kv = kvCacheBytes(c, maxContext, kvDtype);
  const ropeCacheBytes = maxContext * c.rope.rotaryDim * 4;
  const window = windowKv(c, kvDtype);
  return { weightBytes, kvCacheBytes: kv, ropeCacheBytes, totalBytes: weightBytes + kv + ropeCacheBytes, ...(window ? { window } : {}) };
}

const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;

/** The smallest max context a model loads with (the settings' lower bound). */
const MIN_CONTEXT = 16;

/**
 * The largest max context whose estimate fits `available`: the bytes left after the weights over
 * the bytes a position takes (KV + RoPE rows, from the estimate at `maxContext`; sliding-window
 * layers only up to their bound, then a constant), rounded down to a multiple of 256 when that is
 * above it; 0 when not even MIN_CONTEXT fits.
 */
export function largestFittingContext(e: MemoryEstimate, maxContext: number, available: number): number {
  const w = e.window ?? { bytesPerPosition: 0, rows: Infinity };
  const windowBytes = w.bytesPerPosition * Math.min(maxContext, w.rows);
  const growing = (e.kvCacheBytes - windowBytes + e.ropeCacheBytes) / maxContext; // per position, window layers aside
  return fittingPositions(available - e.weightBytes, growing, w.bytesPerPosition, w.rows);
}

/**
 * Largest n with growing·n + windowed·min(n, rows) ≤ room, rounded down to a multiple of 256
 * from 512 up; 0 below MIN_CONTEXT. (main/contract/memory-fit.ts has the same rule.)
 */
function fittingPositions(room: number, growing: number, windowed: number, rows: number): number {
  const atBound = (growing + windowed) * rows;
  const n = Math.floor(rows !== Infinity && atBound <= room ? (room - windowed * rows) / growing : room / (growing + windowed));
  if (!(n >= MIN_CONTEXT)) return 0;
  return n >= 512 ? n - (n % 256) : n;
}

/** Whether a bundle's weights are stored quantized already (any format other than the float ones). */
export function weightsQuantized(weights: { counts: Record<string, number> } | undefined): boolean {
  return Object.keys(weights?.counts ?? {}).some((f) => !/^(float32|float16|bfloat16)$/.test(f));
}

/**
 * Refuses a load that cannot fit, saying what would: the largest max context that fits, a float16
 * KV cache where that would fit, and, for float weights only, 4-bit weights (the window's Weights choice, the terminal's `--quantize q4`;
 * weights stored quantized already are not offered it).
 * @param available bytes the model may use (the OS's available memory by default).
 * @param quantized the weights are stored quantized already.
 * @param offerHalfKv the KV cache is float32 and the setting can make it float16 (the CPU graphs):
 *   offered where the estimate with half the KV bytes fits.
 * @throws ModelLoadError quoting the estimate, its parts, the max context and what is available.
 */
export function checkMemory(e: MemoryEstimate, maxContext: number, available: number, dir: string, quantized = false, offerHalfKv = false): void {
  if (e.totalBytes <= available) return;
  const fits = largestFittingContext(e, maxContext, available);
  const fourBit = 'open it with 4-bit weights (Weights: Quantize to 4 bits; in the terminal --quantize q4)';
  // A float16 KV cache holds the same positions in half the bytes (KV cache: float16; --kv-cache float16).
  const halfKv = offerHalfKv && e.totalBytes - e.kvCacheBytes / 2 <= available
    ? `, or set the KV cache to float16 (half its bytes: KV cache setting; in the terminal --kv-cache float16)`
    : '';
  const todo =
    fits > 0
      ? `set the max context to ${fits} or less${halfKv}${quantized ? '' : `, or ${fourBit}`}`
      : `its weights alone do not fit; ${quantized ? '' : `${fourBit} or `}choose a smaller model`;
  throw new ModelLoadError(
    `the model needs about ${gib(e.totalBytes)} (weights ${gib(e.weightBytes)} + KV cache ${gib(e.kvCacheBytes)} at max context ${maxContext}) ` +
      `but only ${gib(available)} of memory is available; ${todo}`,
    dir,
  );
}

/** Memory available to this process, bytes: `process.availableMemory()` (Node ≥ 20.13, cgroup-aware), else free memory. */
export function availableMemory(): number {
  const p = process as NodeJS.Process & { availableMemory?: () => number };
  return typeof p.availableMemory === 'function' ? p.availableMemory() : os.freemem();
}
