/**
 * Whether a loaded model fits this machine's memory at another max context, before anything is
 * reloaded: the load's own estimate (main/engine/model/memory.ts `estimateForShape` and
 * `largestFittingContext`; test/unit/memory-fit.test.ts holds the two equal), from the facts the
 * engine reports at load (`ModelInfo.memory`):
 *   total(n) = weightBytes + n × (kvBytesPerPosition + ropeBytesPerPosition)
 *              + windowKvBytesPerPosition × min(n, windowRows)   (sliding-window layers, bounded)
 *   fits(n)  = total(n) ≤ availableBytes               (the memory the load measured, before it loaded)
 * Dependency-free, so the window computes it as the Max context field is typed.
 */

/** What the estimate needs, bytes: the weights as stored, one position's KV and RoPE rows, and the memory available at load. */
export interface MemoryFacts {
  weightBytes: number;
  /** KV bytes per position of the layers that hold every position. */
  kvBytesPerPosition: number;
  /** The sliding-window layers' KV bytes per position, up to `windowRows` positions (absent: none). */
  windowKvBytesPerPosition?: number;
  windowRows?: number;
  ropeBytesPerPosition: number;
  availableBytes: number;
}

/** The smallest max context a model loads with (the settings' lower bound). */
export const MIN_MAX_CONTEXT = 16;

/** The estimate at `maxContext` positions: the caches' bytes, the total and whether it fits. */
export function memoryAt(f: MemoryFacts, maxContext: number): { kvCacheBytes: number; totalBytes: number; fits: boolean } {
  const kvCacheBytes = f.kvBytesPerPosition * maxContext + (f.windowKvBytesPerPosition ?? 0) * Math.min(maxContext, f.windowRows ?? Infinity);
  const totalBytes = f.weightBytes + kvCacheBytes + f.ropeBytesPerPosition * maxContext;
  return { kvCacheBytes, totalBytes, fits: totalBytes <= f.availableBytes };
}

/**
 * The largest max context that fits: the bytes left after the weights over a position's bytes,
 * rounded down to a multiple of 256 from 512 up; 0 when not even MIN_MAX_CONTEXT fits.
 */
export function largestFittingContext(f: MemoryFacts): number {
  const room = f.availableBytes - f.weightBytes;
  const growing = f.kvBytesPerPosition + f.ropeBytesPerPosition;
  const [windowed, rows] = [f.windowKvBytesPerPosition ?? 0, f.windowRows ?? Infinity];
  const n = Math.floor(rows !== Infinity && (growing + windowed) * rows <= room ? (room - windowed * rows) / growing : room / (growing + windowed));
  if (!(n >= MIN_MAX_CONTEXT)) return 0;
  return n >= 512 ? n - (n % 256) : n;
}

/** Bytes in MiB below 1 GiB, else GiB, one decimal: `1536 × 2^20` → "1.5 GiB". */
export function formatMemory(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

/**
 * One line for the Max context field: e.g. "KV cache at 131,072 positions: 28.0 GiB; with the
 * weights and RoPE tables 28.5 GiB of 8.0 GiB available: does not fit (35,072 or less does)".
 */
export function maxContextMemoryNote(f: MemoryFacts, maxContext: number): string {
  const { kvCacheBytes, totalBytes, fits } = memoryAt(f, maxContext);
  const head = `KV cache at ${maxContext.toLocaleString('en-US')} positions: ${formatMemory(kvCacheBytes)}; with the weights and RoPE tables ${formatMemory(totalBytes)} of ${formatMemory(f.availableBytes)} available`;
  if (fits) return `${head}: fits`;
  const largest = largestFittingContext(f);
  return `${head}: does not fit (${largest > 0 ? `${largest.toLocaleString('en-US')} or less does` : 'the weights alone do not'})`;
}
