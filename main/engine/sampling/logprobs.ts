/**
 * Log-probabilities of generated tokens (OpenAI's `logprobs` / `top_logprobs`): the model's own
 * log-softmax over the raw logits [V] float32, before repetition penalties, temperature, the
 * sampling filters and a constraint's mask: log p(i) = l_i − (m + ln Σ_j exp(l_j − m)), m = max l
 * (the usual shift for a stable log-sum-exp). Computed in float64; O(V) per step plus O(V·k) at
 * worst for the k ≤ 20 most likely. Runs only when a request asks for it.
 */
import { InvalidOptionError } from '../errors.ts';
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';

/** Most alternatives a request may ask for (OpenAI's bound on `top_logprobs`). */
export const MAX_TOP_LOGPROBS = 20;

/** One token and its log-probability (natural log, ≤ 0). */
export interface TokenLogprobEntry {
  id: number;
  /** The token's text (U+FFFD where it holds part of a UTF-8 character; special tokens by their text). */
  token: string;
  /** Its UTF-8 bytes (what `token` cannot show of a split character). */
  bytes: number[];
  logprob: number;
}

/** A generated token's log-probability and the `top` most likely tokens at its step, most likely first. */
export interface TokenLogprob extends TokenLogprobEntry {
  top: TokenLogprobEntry[];
}

/** @throws InvalidOptionError unless `k` is an integer in [0, MAX_TOP_LOGPROBS]. */
export function validateTopLogprobs(k: number): number {
  if (!Number.isInteger(k) || k < 0 || k > MAX_TOP_LOGPROBS) throw new InvalidOptionError('top logprobs', `expected an integer from 0 to ${MAX_TOP_LOGPROBS}, got ${JSON.stringify(k)}`);
  return k;
}

/**
 * log Σ exp(logits) over the finite logits (−∞ entries contribute nothing; NaN is skipped).
 * @returns −∞ when no logit is finite.
 */
export function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  if (max === -Infinity) return -Infinity;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) if (logits[i] > -Infinity) sum += Math.exp(logits[i] - max);
  return max + Math.log(sum);
}

/** The ids of the k largest logits, largest first (ties: lower id first). */
export function topIds(logits: Float32Array, k: number): number[] {
  const ids: number[] = [];
  for (let i = 0; i < logits.length && k > 0; i++) {
    const v = logits[i];
    if (!(v > -Infinity)) continue;
    if (ids.length === k && v <= logits[ids[k - 1]]) continue;
    if (ids.length < k) ids.push(i);
    let j = ids.length - 1;
    while (j > 0 && logits[ids[j - 1]] < v) {
      ids[j] = ids[j - 1];
      j--;
    }
    ids[j] = i;
  }
  return ids;
}

/** `token`'s log-probability and the `k` most likely tokens' at this step (see the file comment). */
export function tokenLogprob(logits: Float32Array, token: number, k: number, tokenizer: TextTokenizer): TokenLogprob {
  const logZ = logSumExp(logits);
  const entry = (id: number): TokenLogprobEntry => {
    const bytes = id < tokenizer.vocabSize ? tokenizer.tokenBytes()[id] : null;
    return {
      id,
      token: bytes ? Buffer.from(bytes).toString('utf8') : tokenizer.decode([id], { skipSpecial: false }),
      bytes: bytes ? Array.from(bytes) : Array.from(Buffer.from(tokenizer.decode([id], { skipSpecial: false }), 'utf8')),
      logprob: logits[id] - logZ,
    };
  };
  return { ...entry(token), top: topIds(logits, k).map(entry) };
}
