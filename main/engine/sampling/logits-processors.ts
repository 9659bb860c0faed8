/**
 * One function per logits rule, composed by `Sampler` in Hugging Face's order: repetition
 * penalty → presence/frequency penalty → temperature → top-k → top-p → min-p → sample. Contract: every function works in
 * place on caller-owned scratch buffers sized V (never allocates), over a candidate list
 * `ids[0, n)` of token ids. Candidates are ranked by score descending, ties broken by lower
 * id, so every selection is deterministic. Selections use quickselect-style partitions
 * (expected O(n)), so a step never sorts the whole vocabulary; the kept candidates come back in
 * an unspecified but deterministic order.
 */
import { InvalidOptionError } from '../errors.ts';

/**
 * Repetition penalty (Keskar et al. 2019, "CTRL", §4.1; transformers
 * `RepetitionPenaltyLogitsProcessor`): for every distinct id in `previousTokens`,
 * scores[id] = logits[id] / penalty if logits[id] > 0, else logits[id] · penalty. Repeated ids
 * are penalized once, as in transformers (it gathers, then scatters).
 * @param scores  [V] float64 scratch, already a copy of `logits`; modified in place.
 * @param logits  [V] the model's raw logits (read only).
 * @throws InvalidOptionError when an id is not an integer in [0, V).
 */
export function applyRepetitionPenalty(
  scores: Float64Array,
  logits: Float32Array,
  previousTokens: ArrayLike<number>,
  penalty: number,
): void {
  const V = logits.length;
  for (let j = 0; j < previousTokens.length; j++) {
    const id = previousTokens[j];
    if (!Number.isInteger(id) || id < 0 || id >= V) {
      throw new InvalidOptionError('previousTokens', `token id ${id} is outside the vocabulary [0, ${V})`);
    }
    const x = logits[id];
    scores[id] = x > 0 ? x / penalty : x * penalty;
  }
}

/**
 * Presence and frequency penalties (OpenAI's definition, API reference "Parameter details"):
 * scores[j] −= c[j] · frequency + (c[j] > 0) · presence, where c[j] counts how often token j was
 * generated so far (the prompt is not counted). Positive values discourage repeats; range [−2, 2].
 * @param scores  [V] float64 scratch, modified in place.
 * @param counts  [V] generation counts per token id.
 * @param seen  the distinct ids with counts[id] > 0 (so a step costs O(distinct generated ids)).
 */
export function applyPresenceFrequencyPenalty(scores: Float64Array, counts: Int32Array, seen: readonly number[], presence: number, frequency: number): void {
  for (const id of seen) scores[id] -= counts[id] * frequency + presence;
}

/**
 * Index of the largest finite-or-+∞ score; ties go to the lowest id; NaN is skipped.
 * @returns -1 when no entry is comparable (all NaN or all −∞).
 */
export function argmax(scores: ArrayLike<number>): number {
  let best = -1;
  let bestScore = -Infinity;
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i];
    if (s > bestScore) {
      bestScore = s;
      best = i;
    }
  }
  return best;
}

/**
 * Fills ids[0, n) with every id whose score is > −∞ (NaN excluded), in id order.
 * @returns n, the number of candidates.
 */
export function collectCandidates(scores: Float64Array, ids: Int32Array): number {
  let n = 0;
  for (let i = 0; i < scores.length; i++) if (scores[i] > -Infinity) ids[n++] = i;
  return n;
}

/** True when token a ranks before token b: higher score, or equal score and lower id. */
function before(scores: Float64Array, a: number, b: number): boolean {
  const sa = scores[a];
  const sb = scores[b];
  return sa > sb || (sa === sb && a < b);
}

/**
 * Partitions ids[lo, hi) around a median-of-three pivot: afterwards ids[lo, q) rank before
 * ids[q] (the pivot) and ids(q, hi) rank after it. Returns q.
 */
function partition(ids: Int32Array, lo: number, hi: number, scores: Float64Array): number {
  const last = hi - 1;
  const mid = lo + ((hi - lo) >> 1);
  // Median of three, moved to `last`.
  let a = ids[lo];
  let b = ids[mid];
  const c = ids[last];
  if (before(scores, b, a)) [a, b] = [b, a];
  const median = before(scores, c, a) ? a : before(scores, b, c) ? b : c;
  const mi = median === ids[lo] ? lo : median === ids[mid] ? mid : last;
  ids[mi] = ids[last];
  ids[last] = median;
  let store = lo;
  for (let j = lo; j < last; j++) {
    const id = ids[j];
    if (before(scores, id, median)) {
      ids[j] = ids[store];
      ids[store++] = id;
    }
  }
  ids[last] = ids[store];
  ids[store] = median;
  return store;
}

/**
 * Top-k (Fan et al. 2018, "Hierarchical Neural Story Generation"; transformers
 * `TopKLogitsWarper`): moves the k best candidates of ids[0, n) to ids[0, k).
 * @returns the new candidate count, min(k, n); k = 0 means off (returns n).
 */
export function selectTopK(ids: Int32Array, n: number, scores: Float64Array, k: number): number {
  if (k <= 0 || k >= n) return n;
  let lo = 0;
  let hi = n;
  // Invariant: ids[0, lo) rank < k, ids[hi, n) rank ≥ k.
  while (lo < hi) {
    const q = partition(ids, lo, hi, scores);
    if (q < k) lo = q + 1;
    else hi = q;
  }
  return k;
}

/**
 * Top-k straight from the scores, for k much smaller than V: one pass over `scores` keeping the
 * k best candidates (score > −∞, NaN excluded) in a bounded heap whose root is the worst kept,
 * so a token that does not beat the root costs one comparison. Same set as
 * `collectCandidates` + `selectTopK`, in O(V + k·log k·(replacements)) instead of partitions
 * over the whole vocabulary. Kept ids come back in ids[0, m) in heap order.
 * @param k ≥ 1.
 * @returns m = min(k, number of candidates).
 */
export function collectTopK(scores: Float64Array, ids: Int32Array, k: number): number {
  let m = 0;
  // The root (worst kept), cached: most tokens are rejected by this one comparison.
  let worstScore = Infinity;
  let worstId = -1;
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i];
    if (!(s > -Infinity)) continue;
    if (m < k) {
      // Append and sift up: parents rank after (are worse than) their children.
      let c = m++;
      while (c > 0) {
        const parent = (c - 1) >> 1;
        if (!before(scores, ids[parent], i)) break;
        ids[c] = ids[parent];
        c = parent;
      }
      ids[c] = i;
    } else if (s > worstScore || (s === worstScore && i < worstId)) {
      siftDownWorst(scores, ids, m, i);
    } else {
      continue;
    }
    worstId = ids[0];
    worstScore = scores[worstId];
  }
  return m;
}

/** Puts `id` at the root of the heap ids[0, m) (root = worst) and restores the heap order. */
function siftDownWorst(scores: Float64Array, ids: Int32Array, m: number, id: number): void {
  let c = 0;
  for (;;) {
    const l = 2 * c + 1;
    if (l >= m) break;
    const r = l + 1;
    // The worse child (ranks later) moves up.
    const w = r < m && before(scores, ids[l], ids[r]) ? r : l;
    if (!before(scores, id, ids[w])) break;
    ids[c] = ids[w];
    c = w;
  }
  ids[c] = id;
}

/**
 * Narrows a large candidate list before top-p without changing its result: moves to ids[0, c)
 * every candidate with prob ≥ t, lowering t (÷16 from 1/n, at most 6 passes) until their mass
 * exceeds p. Such a
 * set is closed under rank (a better-ranked token never has a smaller prob), so when its mass
 * exceeds p the nucleus lies inside it and `selectTopP` on ids[0, c) finds the same nucleus.
 * Peaked distributions, the usual case, end after one pass with c ≪ n.
 * @param probs  normalized over ids[0, n) (see `softmax`).
 * @returns c, the candidate count to give `selectTopP` (n when nothing can be dropped).
 */
export function narrowForTopP(ids: Int32Array, n: number, probs: Float64Array, p: number): number {
  if (p >= 1) return n;
  let c = 0;
  let mass = 0;
  for (let pass = 0, t = 1 / n; pass < 6; pass++, t /= 16) {
    for (let j = c; j < n; j++) {
      const id = ids[j];
      if (probs[id] >= t) {
        ids[j] = ids[c];
        ids[c++] = id;
        mass += probs[id];
      }
    }
    // A margin over p keeps summation-order rounding from cutting the nucleus short.
    if (mass > p + 1e-9) return c;
    if (c === n) return n;
  }
  return n;
}

/**
 * Softmax over the candidates: probs[id] = exp(scores[id] − max) / Σ, for id in ids[0, n);
 * other entries of `probs` are left stale. Subtracting the max keeps exp finite.
 * @param probs  [V] float64 scratch, indexed by token id.
 */
export function softmax(ids: Int32Array, n: number, scores: Float64Array, probs: Float64Array): void {
  let max = -Infinity;
  for (let j = 0; j < n; j++) max = Math.max(max, scores[ids[j]]);
  let sum = 0;
  if (max === Infinity) {
    // +∞ logits share all the mass.
    for (let j = 0; j < n; j++) sum += probs[ids[j]] = scores[ids[j]] === Infinity ? 1 : 0;
  } else {
    for (let j = 0; j < n; j++) {
      const id = ids[j];
      sum += probs[id] = Math.exp(scores[id] - max);
    }
  }
  const inv = 1 / sum;
  for (let j = 0; j < n; j++) probs[ids[j]] *= inv;
}

/**
 * Top-p / nucleus (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration";
 * transformers `TopPLogitsWarper`): keeps the smallest prefix of the ranked candidates whose
 * probability mass is ≥ p. Equivalently a candidate is kept iff the mass ranked strictly
 * before it is < p, so the best candidate is always kept. Moves the nucleus to ids[0, m).
 * @param probs  normalized over ids[0, n) (see `softmax`).
 * @returns m, the nucleus size; p ≥ 1 means off (returns n).
 */
export function selectTopP(ids: Int32Array, n: number, scores: Float64Array, probs: Float64Array, p: number): number {
  if (p >= 1) return n;
  let lo = 0;
  let hi = n;
  let massBefore = 0; // mass of ids[0, lo), all kept
  // Invariant: ids[0, lo) are kept, ids[hi, n) are not, and all of ids[0, lo) rank before ids[lo, hi).
  while (lo < hi) {
    const q = partition(ids, lo, hi, scores);
    let front = 0;
    for (let j = lo; j < q; j++) front += probs[ids[j]];
    if (massBefore + front < p) {
      massBefore += front + probs[ids[q]]; // pivot and everything before it are kept
      lo = q + 1;
    } else {
      hi = q; // the pivot's prefix already reaches p: it and everything after are dropped
    }
  }
  return lo;
}

/**
 * Min-p (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling"; transformers
 * `MinPLogitsWarper`): keeps candidates with prob ≥ minP · (largest prob), compacting
 * ids[0, n) in place (order preserved). Ratios do not depend on normalization, so `probs`
 * from any earlier softmax over a superset is fine. The best candidate is always kept.
 * @returns the new candidate count; minP = 0 means off (returns n).
 */
export function filterMinP(ids: Int32Array, n: number, probs: Float64Array, minP: number): number {
  if (minP <= 0) return n;
  let top = 0;
  for (let j = 0; j < n; j++) top = Math.max(top, probs[ids[j]]);
  const threshold = minP * top;
  let m = 0;
  for (let j = 0; j < n; j++) {
    const id = ids[j];
    if (probs[id] >= threshold) ids[m++] = id;
  }
  return m;
}

/**
 * Draws one candidate with probability probs[id] / Σ_{ids[0,n)} probs (inverse CDF).
 * @param u  uniform in [0, 1).
 */
export function sampleIndex(ids: Int32Array, n: number, probs: Float64Array, u: number): number {
  let total = 0;
  for (let j = 0; j < n; j++) total += probs[ids[j]];
  const target = u * total;
  let cum = 0;
  for (let j = 0; j < n; j++) {
    cum += probs[ids[j]];
    if (target < cum) return ids[j];
  }
  return ids[n - 1]; // rounding: u·total landed on the total
}
