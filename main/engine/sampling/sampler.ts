/**
 * The sampler: logits [V] float32 of the last position → one token id. Contract:
 *   - options are validated up front (`validateSamplerOptions`), quoting the bad value;
 *   - repetition penalty, presence/frequency penalties (over the tokens this sampler drew), a
 *     constraint's mask when given (json-constraint.ts), then greedy (temperature 0: argmax, ties → lowest id) or
 *     temperature → top-k → top-p → min-p → softmax → one seeded draw (Hugging Face's order);
 *   - the same seed and the same inputs give the same token sequence;
 *   - a step allocates nothing once the scratch buffers (sized V) exist, and a generation none
 *     when it is lent a `SamplerScratch`; the logits are never modified (they may be a buffer
 *     the backend reuses);
 *   - a step's cost is O(V) passes plus work on the candidates: top-k with a small k keeps a
 *     bounded heap instead of partitioning the vocabulary, and top-p first drops the tail by
 *     probability threshold (measured in `npm run bench`).
 * The rules themselves live in `logits-processors.ts`, the generator in `prng.ts`.
 */
import { randomInt } from 'node:crypto';
import { EngineError, InvalidOptionError } from '../errors.ts';
import {
  applyPresenceFrequencyPenalty,
  applyRepetitionPenalty,
  argmax,
  collectCandidates,
  collectTopK,
  filterMinP,
  narrowForTopP,
  sampleIndex,
  selectTopK,
  selectTopP,
  softmax,
} from './logits-processors.ts';
import { Xoshiro128 } from './prng.ts';

/** How the next token is chosen. Each rule has a value that turns it off. */
export interface SamplerOptions {
  /** Divides logits; 0 = greedy (argmax). Finite, ≥ 0. */
  temperature: number;
  /** Keep the k most likely tokens; 0 = off. Integer ≥ 0. */
  topK: number;
  /** Nucleus: keep the smallest set with mass ≥ topP; 1 = off. In (0, 1]. */
  topP: number;
  /** Keep tokens with prob ≥ minP × the top prob; 0 = off. In [0, 1). */
  minP: number;
  /** CTRL repetition penalty on tokens already seen; 1 = off. Finite, > 0. */
  repetitionPenalty: number;
  /** OpenAI's presence penalty on tokens generated so far; 0 = off (default). In [−2, 2]. */
  presencePenalty?: number;
  /** OpenAI's frequency penalty, per occurrence in the tokens generated so far; 0 = off (default). In [−2, 2]. */
  frequencyPenalty?: number;
  /** PRNG seed (safe integer); absent = a random one (see `Sampler.seed`). */
  seed?: number;
}

function quote(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

function isNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/**
 * Checks every option and returns a clean copy (no extra fields).
 * @throws InvalidOptionError naming the option and quoting its value when: temperature is not a
 *   finite number ≥ 0; topK is not an integer ≥ 0; topP is not in [0, 1]; minP is not in
 *   [0, 1); repetitionPenalty is not a finite number > 0; presencePenalty or frequencyPenalty is
 *   present and not in [−2, 2]; seed is present and not a safe integer.
 */
export function validateSamplerOptions(o: SamplerOptions): SamplerOptions {
  if (typeof o !== 'object' || o === null) {
    throw new InvalidOptionError('sampler options', `expected an object, got ${quote(o)}`);
  }
  const { temperature, topK, topP, minP, repetitionPenalty, presencePenalty, frequencyPenalty, seed } = o;
  if (!isNumber(temperature) || temperature < 0) {
    throw new InvalidOptionError('temperature', `expected a finite number ≥ 0, got ${quote(temperature)}`);
  }
  if (!Number.isInteger(topK) || topK < 0) {
    throw new InvalidOptionError('topK', `expected an integer ≥ 0 (0 = off), got ${quote(topK)}`);
  }
  if (!isNumber(topP) || topP < 0 || topP > 1) {
    throw new InvalidOptionError('topP', `expected a number in [0, 1] (1 = off, 0 = only the most likely token), got ${quote(topP)}`);
  }
  if (!isNumber(minP) || minP < 0 || minP >= 1) {
    throw new InvalidOptionError('minP', `expected a number in [0, 1) (0 = off), got ${quote(minP)}`);
  }
  if (!isNumber(repetitionPenalty) || repetitionPenalty <= 0) {
    throw new InvalidOptionError(
      'repetitionPenalty',
      `expected a finite number > 0 (1 = off), got ${quote(repetitionPenalty)}`,
    );
  }
  for (const [name, v] of [['presencePenalty', presencePenalty], ['frequencyPenalty', frequencyPenalty]] as const) {
    if (v !== undefined && (!isNumber(v) || v < -2 || v > 2)) throw new InvalidOptionError(name, `expected a number in [-2, 2] (0 = off), got ${quote(v)}`);
  }
  if (seed !== undefined && !Number.isSafeInteger(seed)) {
    throw new InvalidOptionError('seed', `expected a safe integer, got ${quote(seed)}`);
  }
  // topP 0 (OpenAI allows it): the smallest nucleus, the most likely token alone; the same as
  // topK 1 with the nucleus off, which is how it runs.
  const clean: SamplerOptions = topP === 0 ? { temperature, topK: 1, topP: 1, minP, repetitionPenalty } : { temperature, topK, topP, minP, repetitionPenalty };
  if (presencePenalty) clean.presencePenalty = presencePenalty;
  if (frequencyPenalty) clean.frequencyPenalty = frequencyPenalty;
  if (seed !== undefined) clean.seed = seed;
  return clean;
}

/**
 * The sampler's work buffers for a vocabulary of V tokens: scores [V] float64 (working logits),
 * probs [V] float64 (valid for the current candidates), ids [V] int32 (candidate token ids),
 * drawn [V] int32 (how often each id was returned in this generation, for the presence/frequency
 * penalties) and drawnIds (the distinct ids with drawn[id] > 0). An engine keeps one per model
 * and lends it to each generation's `Sampler`, so neither a step nor a new generation allocates
 * anything proportional to V. Not shared by concurrent samplers.
 */
export class SamplerScratch {
  readonly scores: Float64Array;
  readonly probs: Float64Array;
  readonly ids: Int32Array;
  readonly drawn: Int32Array;
  readonly drawnIds: number[] = [];

  /** @throws InvalidOptionError when V is not a positive integer. */
  constructor(readonly vocabSize: number) {
    if (!Number.isInteger(vocabSize) || vocabSize < 1) {
      throw new InvalidOptionError('vocabulary size', `expected a positive integer, got ${quote(vocabSize)}`);
    }
    this.scores = new Float64Array(vocabSize);
    this.probs = new Float64Array(vocabSize);
    this.ids = new Int32Array(vocabSize);
    this.drawn = new Int32Array(vocabSize);
  }

  /** Forgets the drawn counts of the previous generation (O(distinct ids drawn)). */
  resetDrawn(): void {
    for (const id of this.drawnIds) this.drawn[id] = 0;
    this.drawnIds.length = 0;
  }
}

/** Top-k above this fraction of the vocabulary goes through partitions instead of a heap. */
const HEAP_TOP_K_FRACTION = 1 / 16;

/** Chooses next tokens from logits; one instance per generation (it owns the PRNG state). */
export class Sampler {
  /** The validated options. */
  readonly options: Readonly<SamplerOptions>;
  /** The seed in use: `options.seed`, or a random one drawn at construction (to replay a run). */
  readonly seed: number;
  private readonly rng: Xoshiro128;
  /** Work buffers sized V: the lent ones, or our own made on the first step (and when V changes). */
  private scratch: SamplerScratch | null;

  /**
   * @param scratch work buffers to use while V equals `scratch.vocabSize` (see `SamplerScratch`);
   *   its drawn counts are reset here, as this sampler's generation starts.
   * @throws InvalidOptionError for bad options (see `validateSamplerOptions`).
   */
  constructor(opts: SamplerOptions, scratch?: SamplerScratch) {
    this.options = Object.freeze(validateSamplerOptions(opts));
    this.seed = this.options.seed ?? randomInt(0, 2 ** 48 - 1);
    this.rng = new Xoshiro128(this.seed);
    this.scratch = scratch ?? null;
    scratch?.resetDrawn();
  }

  /**
   * Picks the next token.
   * @param logits  [V] float32, the last position's logits (not modified).
   * @param previousTokens  token ids seen so far (prompt + generated) for the repetition
   *   penalty; ignored when repetitionPenalty = 1.
   * @param mask  [V] 0/1, constrained decoding's allowed ids (json-constraint.ts): the others
   *   are set to −∞ after the penalties, before every other rule. Absent: no pass at all.
   * @returns a token id in [0, V).
   * @throws InvalidOptionError when logits is empty or a previous token is outside [0, V).
   * @throws EngineError('SESSION_RUN') when no logit is comparable (all NaN or −∞).
   */
  sample(logits: Float32Array, previousTokens: ArrayLike<number>, mask?: Uint8Array): number {
    const V = logits.length;
    if (V === 0) throw new InvalidOptionError('logits', 'expected at least one logit, got an empty array');
    if (this.scratch?.vocabSize !== V) this.scratch = new SamplerScratch(V);
    const scratch = this.scratch;
    const token = this.choose(logits, previousTokens, scratch, mask);
    if (scratch.drawn[token]++ === 0) scratch.drawnIds.push(token);
    return token;
  }

  private choose(logits: Float32Array, previousTokens: ArrayLike<number>, scratch: SamplerScratch, mask: Uint8Array | undefined): number {
    const V = logits.length;
    const { temperature, topK, topP, minP, repetitionPenalty, presencePenalty = 0, frequencyPenalty = 0 } = this.options;
    const { scores, probs, ids } = scratch;
    scores.set(logits);

    // 1. Repetition penalty on the raw logits, then OpenAI's presence/frequency penalties.
    if (repetitionPenalty !== 1) applyRepetitionPenalty(scores, logits, previousTokens, repetitionPenalty);
    if (presencePenalty !== 0 || frequencyPenalty !== 0) applyPresenceFrequencyPenalty(scores, scratch.drawn, scratch.drawnIds, presencePenalty, frequencyPenalty);
    if (mask) for (let i = 0; i < V; i++) if (mask[i] === 0) scores[i] = -Infinity;

    // 2. Greedy: no randomness, no softmax.
    if (temperature === 0) {
      const best = argmax(scores);
      if (best < 0) throw noFiniteLogits(V);
      return best;
    }

    // 3. Temperature.
    if (temperature !== 1) for (let i = 0; i < V; i++) scores[i] /= temperature;

    // 4. Candidates, top-k (a small k in one pass over V; otherwise partitions).
    let n: number;
    if (topK > 0 && topK <= V * HEAP_TOP_K_FRACTION) {
      n = collectTopK(scores, ids, topK);
      if (n === 0) throw noFiniteLogits(V);
    } else {
      n = collectCandidates(scores, ids);
      if (n === 0) throw noFiniteLogits(V);
      n = selectTopK(ids, n, scores, topK);
    }

    // 5. Softmax over the candidates, top-p (on a narrowed list, same nucleus), min-p.
    softmax(ids, n, scores, probs);
    n = selectTopP(ids, narrowForTopP(ids, n, probs, topP), scores, probs, topP);
    n = filterMinP(ids, n, probs, minP);

    // 6. One draw from what is left (renormalized implicitly).
    return sampleIndex(ids, n, probs, this.rng.nextFloat());
  }
}

function noFiniteLogits(V: number): EngineError {
  return new EngineError('SESSION_RUN', `the model produced no usable logits (all ${V} are NaN or -Infinity)`);
}
