/**
 * The KV caches an engine keeps of sequences it switched away from: compact host copies
 * (`DecoderBackend.saveKv`), each with the token ids it holds, least recently used first, their
 * bytes bounded by a budget (the oldest go first when it is exceeded). So coming back to an
 * earlier conversation — a long document, say — costs a copy back instead of a prefill. Sequences
 * are matched by token ids only: the keeper knows nothing of conversations.
 *
 * Errors: `InvalidOptionError` for a budget that is not a whole number of bytes ≥ 0.
 */
import { InvalidOptionError } from '../errors.ts';

/** Default memory for the KV caches of earlier sequences: 1 GiB. */
export const DEFAULT_KV_CACHE_BUDGET_BYTES = 1 << 30;

/** Length of the longest common prefix of two token sequences. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** A kept KV cache: the token ids it holds and its compact copy (the backend's saveKv layout). */
export interface KeptKv {
  tokens: number[];
  data: Float32Array;
  /** The position the copy's sliding-window layers start at (KvCache.windowStart; 0 without them). */
  windowStart: number;
}

/** Validates a KV cache budget (bytes, a non-negative integer). @throws InvalidOptionError quoting it. */
export function validateKvCacheBudget(n: unknown): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new InvalidOptionError('KV cache budget', `${String(n)} is not a whole number of bytes ≥ 0`);
  }
  return n;
}

/** Kept KV caches of earlier sequences, least recently used first, within a byte budget. */
export class KeptKvCaches {
  private readonly entries: KeptKv[] = [];
  private budget: number;

  /** @throws InvalidOptionError for a bad budget (bytes). */
  constructor(budgetBytes: number = DEFAULT_KV_CACHE_BUDGET_BYTES) {
    this.budget = validateKvCacheBudget(budgetBytes);
  }

  /** How many are kept, their bytes (≤ the budget) and the budget. */
  get stats(): { entries: number; bytes: number; budgetBytes: number } {
    return { entries: this.entries.length, bytes: this.bytes(), budgetBytes: this.budget };
  }

  /** Sets the budget (bytes), dropping the least recently used until the rest fit. @throws InvalidOptionError. */
  setBudget(bytes: number): void {
    this.budget = validateKvCacheBudget(bytes);
    this.evict();
  }

  /**
   * Takes out the kept cache sharing the longest prefix with `prompt`, when that prefix is longer
   * than `atLeast` tokens (what the live cache already shares), with the prefix's length; else null.
   */
  take(prompt: readonly number[], atLeast: number): { kept: KeptKv; shared: number } | null {
    let best = -1;
    let shared = atLeast;
    this.entries.forEach((e, i) => {
      const n = commonPrefix(e.tokens, prompt);
      if (n > shared) [best, shared] = [i, n];
    });
    return best < 0 ? null : { kept: this.entries.splice(best, 1)[0]!, shared };
  }

  /**
   * Keeps a copy of a sequence as the most recent, replacing any kept cache that is a prefix of
   * it; `bytes` is the copy's size, checked before `save` makes it (nothing is copied when it
   * alone exceeds the budget).
   */
  keep(tokens: readonly number[], bytes: number, save: () => Float32Array, windowStart = 0): void {
    if (bytes > this.budget) return;
    const ids = [...tokens];
    for (let i = this.entries.length - 1; i >= 0; i--) {
      if (commonPrefix(this.entries[i]!.tokens, ids) === this.entries[i]!.tokens.length) this.entries.splice(i, 1);
    }
    this.entries.push({ tokens: ids, data: save(), windowStart });
    this.evict();
  }

  /** Forgets every kept cache. */
  clear(): void {
    this.entries.length = 0;
  }

  private bytes(): number {
    return this.entries.reduce((n, e) => n + e.data.byteLength, 0);
  }

  /** Drops the least recently used until their bytes fit the budget. */
  private evict(): void {
    let bytes = this.bytes();
    while (bytes > this.budget) bytes -= this.entries.shift()!.data.byteLength;
  }
}
