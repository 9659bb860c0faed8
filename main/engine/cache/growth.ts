/**
 * The growth rule the RoPE cache and the KV cache share (docs/ARCHITECTURE.md, "RoPE cache" and
 * "KV cache"): positions [0, end) with end = P + T (past + new, never T alone) must fit; a miss
 * grows to the next power of two, bounded by the configured max context; past it is a typed
 * overflow raised before anything changes.
 */
import { ContextOverflowError, InvalidOptionError } from '../errors.ts';

/** Largest max context accepted anywhere (positions); the engine, the CLI and settings check it. */
export const MAX_CONTEXT_LIMIT = 1 << 20;

/** Smallest power of two ≥ n (n ≥ 1). */
export function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * The capacity a cache grows to so that it holds positions [0, end): min(nextPow2(end), maxContext).
 * Callers check the warm case (end ≤ capacity) first and call this only on a miss.
 * @throws InvalidOptionError when end is not a non-negative integer.
 * @throws ContextOverflowError(end, maxContext) when end > maxContext.
 */
export function grownCapacity(end: number, maxContext: number): number {
  if (!Number.isInteger(end) || end < 0) {
    throw new InvalidOptionError('end position', `expected a non-negative integer, got ${end}`);
  }
  if (end > maxContext) throw new ContextOverflowError(end, maxContext);
  return Math.min(nextPow2(end), maxContext);
}
