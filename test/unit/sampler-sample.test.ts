/**
 * Sampler: greedy, seeded determinism, the filters (top-k, top-p, min-p) checked empirically on
 * hand-made distributions and directly against sort-based references, repetition penalty,
 * validation, and the PRNG's reference vector.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { collectCandidates, collectTopK, narrowForTopP, selectTopK, selectTopP, softmax } from '../../main/engine/sampling/logits-processors.ts';
import { Xoshiro128 } from '../../main/engine/sampling/prng.ts';
import { Sampler, SamplerScratch, validateSamplerOptions, type SamplerOptions } from '../../main/engine/sampling/sampler.ts';

const off: SamplerOptions = { temperature: 1, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const greedy: SamplerOptions = { ...off, temperature: 0 };

/** Logits whose softmax is exactly `probs` (up to rounding). */
const logitsOf = (probs: number[]): Float32Array => Float32Array.from(probs, (p) => Math.log(p));

/** Counts of each token over n draws. */
function histogram(s: Sampler, logits: Float32Array, n: number): number[] {
  const counts = new Array<number>(logits.length).fill(0);
  for (let i = 0; i < n; i++) counts[s.sample(logits, [])]++;
  return counts;
}

/** Deterministic pseudo-random logits for tests. */
function randomLogits(V: number, seed: number): Float32Array {
  const g = new Xoshiro128(seed);
  return Float32Array.from({ length: V }, () => (g.nextFloat() - 0.5) * 8);
}

/** Ids ranked by logit descending, ties → lower id (the sampler's order). */
const ranked = (logits: ArrayLike<number>): number[] =>
  Array.from({ length: logits.length }, (_, i) => i).sort((a, b) => logits[b] - logits[a] || a - b);

describe('Sampler', () => {
  it('greedy is argmax with ties to the lowest id, and ignores the PRNG', () => {
    const s = new Sampler(greedy);
    assert.equal(s.sample(Float32Array.from([1, 5, 3, 5]), []), 1);
    assert.equal(s.sample(Float32Array.from([-Infinity, NaN, -3, -2]), []), 3);
    assert.equal(s.sample(Float32Array.from([0]), []), 0);
  });

  it('top-k = 1 equals greedy at any temperature', () => {
    for (let seed = 0; seed < 20; seed++) {
      const logits = randomLogits(500, seed);
      const g = new Sampler(greedy).sample(logits, []);
      assert.equal(new Sampler({ ...off, topK: 1, temperature: 1.7, seed }).sample(logits, []), g);
    }
    const tie = Float32Array.from([2, 7, 7, 1]);
    assert.equal(new Sampler({ ...off, topK: 1, seed: 3 }).sample(tie, []), 1);
  });

  it('same seed → same sequence; different seeds differ', () => {
    const opts = { ...off, temperature: 0.9, topK: 50, topP: 0.95, minP: 0.01, repetitionPenalty: 1.1 };
    const run = (seed: number): number[] => {
      const s = new Sampler({ ...opts, seed });
      const out: number[] = [];
      for (let step = 0; step < 200; step++) out.push(s.sample(randomLogits(300, 1000 + step), out));
      return out;
    };
    assert.deepEqual(run(42), run(42));
    const uniform = new Float32Array(100);
    const draws = (seed: number): number[] => {
      const s = new Sampler({ ...off, seed });
      return Array.from({ length: 200 }, () => s.sample(uniform, []));
    };
    const seqA = draws(1);
    const seqB = draws(2);
    const same = seqA.filter((t, i) => t === seqB[i]).length;
    assert.ok(same < 20, `seeds 1 and 2 agree on ${same} of 200 uniform draws over 100 tokens (expect ~2)`);
    // Without a seed, each sampler draws its own, and that seed replays its sequence.
    const a = new Sampler(off);
    const b = new Sampler(off);
    assert.notEqual(a.seed, b.seed, 'two unseeded samplers drew the same seed');
    const unseeded = Array.from({ length: 200 }, () => a.sample(uniform, []));
    assert.deepEqual(draws(a.seed), unseeded);
  });

  it('temperature 1 without filters samples the softmax distribution', () => {
    const probs = [0.5, 0.3, 0.15, 0.05];
    const counts = histogram(new Sampler({ ...off, seed: 7 }), logitsOf(probs), 20000);
    counts.forEach((c, i) => assert.ok(Math.abs(c / 20000 - probs[i]) < 0.015, `token ${i}: ${c / 20000} vs ${probs[i]}`));
  });

  it('top-p keeps the smallest set with mass ≥ p: tokens outside never appear', () => {
    // Token order scrambled so the nucleus is not a prefix of ids.
    const probs = [0.05, 0.3, 0.15, 0.5];
    const logits = logitsOf(probs);
    const c75 = histogram(new Sampler({ ...off, topP: 0.75, seed: 11 }), logits, 5000);
    assert.equal(c75[0] + c75[2], 0, `outside the 0.75 nucleus: ${c75}`);
    assert.ok(Math.abs(c75[3] / 5000 - 0.5 / 0.8) < 0.03, `renormalized: ${c75}`);
    const c85 = histogram(new Sampler({ ...off, topP: 0.85, seed: 11 }), logits, 5000);
    assert.equal(c85[0], 0);
    assert.ok(c85[1] > 0 && c85[2] > 0 && c85[3] > 0);
    const c10 = histogram(new Sampler({ ...off, topP: 0.1, seed: 11 }), logits, 500);
    assert.equal(c10[3], 500, 'a tiny p keeps only the best token');
    const c0 = histogram(new Sampler({ ...off, topP: 0, seed: 11 }), logits, 500);
    assert.equal(c0[3], 500, 'p = 0 (OpenAI allows it) keeps only the best token');
  });

  it('min-p keeps tokens with prob ≥ minP × top prob', () => {
    const logits = logitsOf([0.5, 0.3, 0.15, 0.05]);
    const c2 = histogram(new Sampler({ ...off, minP: 0.2, seed: 5 }), logits, 5000); // threshold 0.1
    assert.equal(c2[3], 0);
    assert.ok(c2[2] > 0);
    const c5 = histogram(new Sampler({ ...off, minP: 0.5, seed: 5 }), logits, 5000); // threshold 0.25
    assert.equal(c5[2] + c5[3], 0);
    assert.ok(c5[0] > 0 && c5[1] > 0);
  });

  it('repetition penalty changes the argmax (positive logits divided, negative multiplied)', () => {
    const pos = Float32Array.from([2.0, 1.5, 0.1]);
    assert.equal(new Sampler(greedy).sample(pos, [0]), 0);
    assert.equal(new Sampler({ ...greedy, repetitionPenalty: 1.5 }).sample(pos, [0, 0, 2]), 1); // 2/1.5 < 1.5
    assert.deepEqual(pos, Float32Array.from([2.0, 1.5, 0.1]), 'logits are not modified');
    const neg = Float32Array.from([-0.5, -0.6]);
    assert.equal(new Sampler({ ...greedy, repetitionPenalty: 2 }).sample(neg, [0]), 1); // -1.0 < -0.6
    assert.throws(() => new Sampler({ ...greedy, repetitionPenalty: 2 }).sample(neg, [2]), /token id 2/);
  });

  it('a lent SamplerScratch is used as is: same tokens as a sampler with its own, no new buffers', () => {
    const opts = { ...off, temperature: 0.9, topK: 10, topP: 0.9, minP: 0.02, repetitionPenalty: 1.2, seed: 5 };
    const scratch = new SamplerScratch(1000);
    const buffers = [scratch.scores, scratch.probs, scratch.ids];
    const lent = new Sampler(opts, scratch);
    const own = new Sampler(opts);
    const a: number[] = [];
    const b: number[] = [];
    for (let step = 0; step < 50; step++) {
      const logits = randomLogits(1000, 200 + step);
      a.push(lent.sample(logits, a));
      b.push(own.sample(logits, b));
    }
    assert.deepEqual(a, b);
    assert.deepEqual([scratch.scores, scratch.probs, scratch.ids].map((x, i) => x === buffers[i]), [true, true, true]);
    // Written to: the lent buffers hold this sampler's work, not zeros.
    assert.ok(scratch.ids.some((id) => id !== 0));
    assert.throws(() => new SamplerScratch(0), /vocabulary size.*0/);
  });

  it('a lent SamplerScratch starts every generation with no drawn tokens (presence/frequency penalties)', () => {
    const opts = { ...off, temperature: 0, presencePenalty: 2, frequencyPenalty: 1 };
    const scratch = new SamplerScratch(300);
    const generation = (s: Sampler) => Array.from({ length: 30 }, (_, step) => s.sample(randomLogits(300, 500 + step), []));
    const fresh = generation(new Sampler(opts));
    assert.deepEqual(generation(new Sampler(opts, scratch)), fresh);
    assert.deepEqual(generation(new Sampler(opts, scratch)), fresh, 'the second generation on the same scratch');
  });

  it('rejects logits with nothing to sample', () => {
    assert.throws(() => new Sampler(off).sample(new Float32Array(0), []), InvalidOptionError);
    assert.throws(() => new Sampler(off).sample(Float32Array.from([NaN, -Infinity]), []), /no usable logits/);
  });
});

describe('logits processors against sort-based references', () => {
  it('selectTopK and selectTopP pick exactly the ranked prefix (random and tied logits)', () => {
    for (let seed = 0; seed < 40; seed++) {
      const V = 50 + seed * 37;
      const raw = randomLogits(V, seed);
      if (seed % 3 === 0) for (let i = 0; i < V; i++) raw[i] = Math.round(raw[i]); // many ties
      if (seed % 2 === 1) for (let i = 0; i < V; i++) raw[i] *= 4; // peaked: narrowing drops the tail
      const scores = Float64Array.from(raw);
      const ids = new Int32Array(V);
      const order = ranked(scores);

      let n = collectCandidates(scores, ids);
      const k = 1 + (seed % 17);
      n = selectTopK(ids, n, scores, k);
      assert.equal(n, k);
      assert.deepEqual([...ids.subarray(0, n)].sort((a, b) => a - b), order.slice(0, k).sort((a, b) => a - b));

      // The one-pass heap: the same set, also when NaN and -Infinity are present.
      const holed = Float64Array.from(scores);
      holed[seed % V] = NaN;
      holed[(seed * 7) % V] = -Infinity;
      const holedOrder = order.filter((id) => holed[id] > -Infinity);
      const h = collectTopK(holed, ids, k);
      assert.equal(h, Math.min(k, holedOrder.length));
      assert.deepEqual([...ids.subarray(0, h)].sort((a, b) => a - b), holedOrder.slice(0, k).sort((a, b) => a - b));

      n = collectCandidates(scores, ids);
      const probs = new Float64Array(V);
      softmax(ids, n, scores, probs);
      const p = 0.05 + (seed % 10) * 0.1;
      // Narrowing first (what the sampler does) keeps the nucleus.
      const m = selectTopP(ids, narrowForTopP(ids, n, probs, p), scores, probs, p);
      let mass = 0;
      let want = 0;
      while (want < V && mass < p) mass += probs[order[want++]];
      assert.equal(m, want, `seed ${seed}: nucleus size`);
      assert.deepEqual([...ids.subarray(0, m)].sort((a, b) => a - b), order.slice(0, want).sort((a, b) => a - b));
    }
  });
});

describe('presence and frequency penalties (OpenAI semantics)', () => {
  it('subtract count · frequency + presence from the logits of tokens this sampler generated, not the prompt', () => {
    // Greedy over fixed logits [3, 2.5, 0]: without penalties always token 0.
    const logits = Float32Array.from([3, 2.5, 0]);
    const draw = (opts: Partial<SamplerOptions>, steps: number, prompt: number[] = []) => {
      const s = new Sampler({ ...greedy, ...opts });
      return Array.from({ length: steps }, () => s.sample(logits, prompt));
    };
    assert.deepEqual(draw({}, 4), [0, 0, 0, 0]);
    // presence 1: token 0 drops to 2 after its first draw, below token 1 (2.5), which then drops to 1.5.
    assert.deepEqual(draw({ presencePenalty: 1 }, 4), [0, 1, 0, 0]);
    // frequency 0.3: token 0 falls 0.3 per draw: 3, 2.7, then 2.4 < 2.5 → token 1; then 2.4 vs 2.2 → 0.
    assert.deepEqual(draw({ frequencyPenalty: 0.3 }, 4), [0, 0, 1, 0]);
    // Negative values encourage repeats; the prompt's tokens are not counted.
    assert.deepEqual(draw({ presencePenalty: -2 }, 3, [1, 1, 1]), [0, 0, 0]);
    assert.deepEqual(draw({ presencePenalty: 2 }, 3, [0, 0, 0]), [0, 1, 0]);
  });

  it('are validated in [-2, 2]', () => {
    for (const bad of [{ presencePenalty: 2.5 }, { frequencyPenalty: -3 }, { frequencyPenalty: NaN }]) {
      assert.throws(() => new Sampler({ ...off, ...bad }), (e: unknown) => e instanceof InvalidOptionError && /\[-2, 2\]/.test(e.message));
    }
  });
});

describe('validateSamplerOptions', () => {
  it('accepts the off values and returns a clean copy', () => {
    assert.deepEqual(validateSamplerOptions({ ...off, extra: 1 } as SamplerOptions), off);
    assert.deepEqual(validateSamplerOptions({ ...off, seed: -5 }), { ...off, seed: -5 });
  });

  it('rejects each bad value, naming the option and quoting the value', () => {
    const bad: Array<[Partial<SamplerOptions> | Record<string, unknown>, string, string]> = [
      [{ temperature: -0.1 }, 'temperature', '-0.1'],
      [{ temperature: Infinity }, 'temperature', 'Infinity'],
      [{ temperature: '1' }, 'temperature', '"1"'],
      [{ topK: 2.5 }, 'topK', '2.5'],
      [{ topK: -1 }, 'topK', '-1'],
      [{ topP: -0.1 }, 'topP', '-0.1'],
      [{ topP: 1.01 }, 'topP', '1.01'],
      [{ minP: 1 }, 'minP', '1'],
      [{ minP: -0.2 }, 'minP', '-0.2'],
      [{ repetitionPenalty: 0 }, 'repetitionPenalty', '0'],
      [{ repetitionPenalty: NaN }, 'repetitionPenalty', 'NaN'],
      [{ seed: 1.5 }, 'seed', '1.5'],
      [{ seed: 2 ** 60 }, 'seed', String(2 ** 60)],
    ];
    for (const [patch, option, value] of bad) {
      assert.throws(
        () => new Sampler({ ...off, ...patch } as SamplerOptions),
        (e: unknown) => e instanceof InvalidOptionError && e.option === option && e.message.includes(value),
        `${option} = ${value}`,
      );
    }
    assert.throws(() => validateSamplerOptions(null as unknown as SamplerOptions), InvalidOptionError);
  });
});

describe('Xoshiro128 (xoshiro128**)', () => {
  it('matches the reference output for state [1, 2, 3, 4]', () => {
    const g = Xoshiro128.fromState([1, 2, 3, 4]);
    const out = Array.from({ length: 10 }, () => g.nextUint32());
    assert.deepEqual(out, [11520, 0, 5927040, 70819200, 2031721883, 1637235492, 1287239034, 3734860849, 3729100597, 4258142804]);
  });

  it('nextFloat is in [0, 1) and roughly uniform; seeds are distinct', () => {
    const g = new Xoshiro128(123);
    let sum = 0;
    for (let i = 0; i < 10000; i++) {
      const x = g.nextFloat();
      assert.ok(x >= 0 && x < 1);
      sum += x;
    }
    assert.ok(Math.abs(sum / 10000 - 0.5) < 0.02);
    assert.notEqual(new Xoshiro128(1).nextUint32(), new Xoshiro128(2 ** 32 + 1).nextUint32());
  });
});
