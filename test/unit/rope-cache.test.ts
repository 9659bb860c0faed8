/**
 * RopeCache: the two seed bugs (end-position check with bounded power-of-two growth; zero work
 * on a warm step), values of every RoPE variant against a per-position float64 reference
 * written here from the formulas, bit-exact growth, and float64 angles at large positions.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { ContextOverflowError, InvalidOptionError } from '../../main/engine/errors.ts';
import type { RopeConfig } from '../../main/engine/model/manifest.ts';

// ---------------------------------------------------------------------------------------------
// Reference: one pair's inverse frequency straight from the formulas, float64, per element.

function refInvFreq(rope: RopeConfig, maxContext: number, i: number): number {
  const R = rope.rotaryDim;
  const plain = (base: number): number => Math.exp((-2 * i * Math.log(base)) / R);
  const s = rope.scaling;
  if (!s) return plain(rope.theta);
  switch (s.type) {
    case 'linear':
      return plain(rope.theta) / s.factor;
    case 'llama3': {
      const f = plain(rope.theta);
      const wavelen = (2 * Math.PI) / f;
      const orig = s.originalMaxPositionEmbeddings;
      if (wavelen < orig / s.highFreqFactor) return f;
      if (wavelen > orig / s.lowFreqFactor) return f / s.factor;
      const smooth = (orig / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      return (1 - smooth) * (f / s.factor) + smooth * f;
    }
    case 'yarn': {
      const dimFor = (rot: number): number =>
        (R * Math.log(s.originalMaxPositionEmbeddings / (rot * 2 * Math.PI))) / (2 * Math.log(rope.theta));
      const low = Math.max(Math.floor(dimFor(s.betaFast)), 0);
      let high = Math.min(Math.ceil(dimFor(s.betaSlow)), R - 1);
      if (high === low) high += 0.001;
      const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
      const f = plain(rope.theta);
      return ramp * (f / s.factor) + (1 - ramp) * f;
    }
    case 'dynamic': {
      const L = maxContext > s.originalMaxPositionEmbeddings ? maxContext : s.originalMaxPositionEmbeddings;
      const ratio = (s.factor * L) / s.originalMaxPositionEmbeddings - (s.factor - 1);
      return plain(rope.theta * ratio ** (R / (R - 2)));
    }
    case 'longrope':
      return plain(rope.theta) / (maxContext > s.originalMaxPositionEmbeddings ? s.longFactor : s.shortFactor)[i];
  }
}

function refScale(rope: RopeConfig): number {
  const s = rope.scaling;
  if (s?.type === 'longrope') return s.attentionFactor;
  if (s?.type !== 'yarn') return 1;
  return s.attentionFactor ?? (s.factor <= 1 ? 1 : 1 + 0.1 * Math.log(s.factor));
}

/** Largest |cache − reference| over rows [start, start+count). */
function maxRowError(cache: RopeCache, rope: RopeConfig, maxContext: number, start: number, count: number): number {
  const h = rope.rotaryDim / 2;
  const inv = Array.from({ length: h }, (_, i) => refInvFreq(rope, maxContext, i));
  const scale = refScale(rope);
  const { cos, sin } = cache.rows(start, count);
  assert.equal(cos.length, count * h, `cos view length: expected ${count * h}, got ${cos.length}`);
  let err = 0;
  for (let t = 0; t < count; t++) {
    const p = start + t;
    for (let i = 0; i < h; i++) {
      err = Math.max(err, Math.abs(cos[t * h + i] - Math.cos(p * inv[i]) * scale));
      err = Math.max(err, Math.abs(sin[t * h + i] - Math.sin(p * inv[i]) * scale));
    }
  }
  return err;
}

const isPow2 = (n: number): boolean => n > 0 && (n & (n - 1)) === 0;
const plain: RopeConfig = { theta: 10000, rotaryDim: 64, layout: 'half' };

// ---------------------------------------------------------------------------------------------

describe('RopeCache seed 1: check P + T, grow to a bounded power of two', () => {
  it('prefill 7 then decode one token at a time to 2048; every step fits and capacity is bounded', () => {
    const max = 2048;
    const cache = new RopeCache(plain, max);
    assert.deepEqual(cache.stats, { capacity: 0, rowsComputed: 0, growths: 0, bytes: 0, maxContext: max });
    let P = 0;
    const steps: number[] = [7];
    while (P + steps.reduce((a, b) => a + b, 0) < max) steps.push(1);
    const capacities = new Set<number>();
    for (const T of steps) {
      cache.ensure(P + T);
      const { capacity } = cache.stats;
      assert.ok(capacity >= P + T, `capacity ${capacity} < end ${P + T}`);
      assert.ok(capacity <= max, `capacity ${capacity} > max ${max}`);
      assert.ok(isPow2(capacity) || capacity === max, `capacity ${capacity} is not a power of two`);
      const { cos, sin } = cache.rows(P, T);
      assert.equal(cos.length, T * cache.halfDim);
      assert.equal(sin.length, T * cache.halfDim);
      capacities.add(capacity);
      P += T;
    }
    assert.equal(P, max);
    assert.deepEqual([...capacities], [8, 16, 32, 64, 128, 256, 512, 1024, 2048]);
    const s = cache.stats;
    assert.equal(s.rowsComputed, 2048, 'each row computed exactly once');
    assert.equal(s.growths, 9);
    assert.equal(s.bytes, 2 * 2048 * 32 * 4);
    assert.ok(maxRowError(cache, plain, max, 0, max) < 1e-6);
  });

  it('ensure(maxContext + 1) throws ContextOverflowError and changes nothing', () => {
    const cache = new RopeCache(plain, 2048);
    cache.ensure(2048);
    const before = cache.stats;
    const lastRow = Float32Array.from(cache.rows(2047, 1).cos);
    const buffer = cache.rows(0, 1).cos.buffer;
    assert.throws(
      () => cache.ensure(2049),
      (e: unknown) => e instanceof ContextOverflowError && e.requested === 2049 && e.maxContext === 2048,
    );
    assert.deepEqual(cache.stats, before);
    assert.equal(cache.rows(0, 1).cos.buffer, buffer);
    assert.deepEqual(cache.rows(2047, 1).cos, lastRow);
    cache.ensure(2048); // still usable
    assert.deepEqual(cache.stats, before);
  });

  it('overflow from an empty cache allocates nothing', () => {
    const cache = new RopeCache(plain, 100);
    assert.throws(() => cache.ensure(101), ContextOverflowError);
    assert.deepEqual(cache.stats, { capacity: 0, rowsComputed: 0, growths: 0, bytes: 0, maxContext: 100 });
  });

  it('capacity stops at a maxContext that is not a power of two', () => {
    const cache = new RopeCache(plain, 1000);
    cache.ensure(513);
    assert.equal(cache.stats.capacity, 1000);
    assert.equal(cache.stats.rowsComputed, 1000);
  });

  it('a short step at large P after a long prefill (the bug of checking T alone)', () => {
    const cache = new RopeCache(plain, 2048);
    cache.ensure(0 + 1000); // prefill P=0, T=1000
    assert.equal(cache.stats.capacity, 1024);
    cache.ensure(1000 + 1); // decode P=1000, T=1
    assert.ok(maxRowError(cache, plain, 2048, 1000, 1) < 1e-6);

    const exact = new RopeCache(plain, 2048);
    exact.ensure(1024); // prefill fills the table exactly
    // Checking T alone would call ensure(1): no growth, and the view below would be past the end.
    exact.ensure(1);
    assert.throws(() => exact.rows(1024, 1), InvalidOptionError, 'rows past capacity must throw, not clamp');
    exact.ensure(1024 + 1);
    assert.equal(exact.stats.capacity, 2048);
    assert.equal(exact.rows(1024, 1).cos.length, exact.halfDim);
    assert.ok(maxRowError(exact, plain, 2048, 1024, 1) < 1e-6);
  });
});

describe('RopeCache seed 2: a warm step does zero work', () => {
  it('200 decode steps after warm-up compute no rows, grow nothing, keep the buffers', () => {
    const cache = new RopeCache(plain, 4096);
    cache.ensure(100); // prefill 100 → capacity 128
    cache.ensure(300); // warm-up to 512
    const before = cache.stats;
    const cosBuf = cache.rows(0, 1).cos.buffer;
    const sinBuf = cache.rows(0, 1).sin.buffer;
    for (let P = 100; P < 300; P++) {
      cache.ensure(P + 1);
      const r = cache.rows(P, 1);
      assert.equal(r.cos.buffer, cosBuf);
      assert.equal(r.sin.buffer, sinBuf);
      assert.equal(cache.rows(P, 1), r, 'same (start, count) returns the same views');
    }
    assert.deepEqual(cache.stats, before);
    assert.equal(cache.stats.rowsComputed, 512);
  });
});

describe('RopeCache.tables: the whole cache the graph takes, one object per growth', () => {
  it('is the same object on warm steps, a new one on each growth, holding rows [0, capacity) bit for bit', () => {
    const cache = new RopeCache(plain, 4096);
    assert.equal(cache.tables.rows, 0, 'nothing before the first ensure');
    cache.ensure(10);
    const first = cache.tables;
    assert.equal(first.rows, 16);
    assert.equal(first.cos.length, 16 * cache.halfDim);
    for (let P = 10; P < 16; P++) {
      cache.ensure(P + 1);
      assert.equal(cache.tables, first, `a warm step at ${P} handed out another tables object`);
    }
    cache.ensure(17); // growth to 32
    const second = cache.tables;
    assert.notEqual(second, first);
    assert.equal(second.rows, 32);
    assert.equal(second.sin.length, 32 * cache.halfDim);
    // The rows a step at P = 20 gathers are exactly rows(20, 3).
    const rows = cache.rows(20, 3);
    const h = cache.halfDim;
    assert.deepEqual(second.cos.subarray(20 * h, 23 * h), rows.cos);
    assert.deepEqual(second.sin.subarray(20 * h, 23 * h), rows.sin);
    assert.deepEqual(second.cos.subarray(0, 16 * h), first.cos, 'growth keeps the old rows');
  });
});

describe('RopeCache values', () => {
  const variants: Array<[string, RopeConfig, number]> = [
    ['plain', plain, 4096],
    ['linear', { theta: 10000, rotaryDim: 64, layout: 'half', scaling: { type: 'linear', factor: 4 } }, 4096],
    [
      'llama3',
      {
        theta: 500000,
        rotaryDim: 128,
        layout: 'half',
        scaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
      },
      4096,
    ],
    [
      'yarn',
      {
        theta: 1000000,
        rotaryDim: 128,
        layout: 'half',
        scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1 },
      },
      4096,
    ],
    [
      'yarn with attentionFactor',
      {
        theta: 10000,
        rotaryDim: 64,
        layout: 'half',
        scaling: {
          type: 'yarn',
          factor: 16,
          originalMaxPositionEmbeddings: 4096,
          betaFast: 32,
          betaSlow: 1,
          attentionFactor: 0.7,
        },
      },
      2048,
    ],
    [
      'dynamic (maxContext > original)',
      { theta: 10000, rotaryDim: 64, layout: 'half', scaling: { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 1024 } },
      4096,
    ],
    [
      'dynamic (maxContext ≤ original)',
      { theta: 10000, rotaryDim: 64, layout: 'half', scaling: { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 4096 } },
      2048,
    ],
    ['partial rotary (R = 32 of headDim 64)', { theta: 10000, rotaryDim: 32, layout: 'interleaved' }, 4096],
    ...([[4096, 'long factors'], [1024, 'short factors']] as const).map(([max, which]): [string, RopeConfig, number] => [
      `longrope, maxContext ${max} (${which})`,
      {
        theta: 10000, rotaryDim: 16, layout: 'half',
        scaling: {
          type: 'longrope', originalMaxPositionEmbeddings: 2048, attentionFactor: 1.19,
          shortFactor: [1, 1.1, 1.2, 1.5, 2, 3, 4, 5], longFactor: [1, 1.5, 2, 4, 8, 16, 24, 32],
        },
      },
      max,
    ]),
  ];
  for (const [name, rope, max] of variants) {
    it(`${name}: every row matches the float64 reference within 1e-6`, () => {
      const cache = new RopeCache(rope, max);
      cache.ensure(max);
      assert.equal(cache.halfDim, rope.rotaryDim / 2);
      const err = maxRowError(cache, rope, max, 0, max);
      assert.ok(err < 1e-6, `max error ${err}`);
    });
  }

  it('yarn scales cos and sin by the attention factor (row 0: cos = scale, sin = 0)', () => {
    const [, rope] = variants[3];
    const cache = new RopeCache(rope, 16);
    cache.ensure(1);
    const { cos, sin } = cache.rows(0, 1);
    assert.equal(cache.attentionScale, 1 + 0.1 * Math.log(4));
    assert.ok(cos.every((c) => c === Math.fround(1 + 0.1 * Math.log(4))));
    assert.ok(sin.every((x) => x === 0));
  });

  it('growth keeps old rows bit-exactly and new rows equal a cache sized big from the start', () => {
    const [, rope, max] = variants[2];
    const grown = new RopeCache(rope, max);
    grown.ensure(7);
    const old = Float32Array.from(grown.rows(0, 8).cos);
    const oldSin = Float32Array.from(grown.rows(0, 8).sin);
    for (let end = 8; end <= max; end++) grown.ensure(end);
    assert.deepEqual(grown.rows(0, 8).cos, old);
    assert.deepEqual(grown.rows(0, 8).sin, oldSin);
    const fresh = new RopeCache(rope, max);
    fresh.ensure(max);
    assert.equal(fresh.stats.growths, 1);
    assert.deepEqual(grown.rows(0, max).cos, fresh.rows(0, max).cos);
    assert.deepEqual(grown.rows(0, max).sin, fresh.rows(0, max).sin);
  });
});

describe('RopeCache float64 angles', () => {
  it('position 1_000_000 with θ = 10000 matches float64 within 1e-6; float32 angles would not', () => {
    const rope: RopeConfig = { theta: 10000, rotaryDim: 8, layout: 'interleaved' };
    const P = 1_000_000;
    const cache = new RopeCache(rope, P + 1);
    cache.ensure(P + 1);
    assert.equal(cache.stats.capacity, P + 1);
    const { cos, sin } = cache.rows(P, 1);
    let err64 = 0;
    let err32 = 0;
    for (let i = 0; i < 4; i++) {
      const f = Math.pow(10000, (-2 * i) / 8);
      const ref = [Math.cos(P * f), Math.sin(P * f)];
      err64 = Math.max(err64, Math.abs(cos[i] - ref[0]), Math.abs(sin[i] - ref[1]));
      const angle32 = Math.fround(Math.fround(P) * Math.fround(f)); // what a float32 pipeline does
      err32 = Math.max(err32, Math.abs(Math.cos(angle32) - ref[0]), Math.abs(Math.sin(angle32) - ref[1]));
    }
    assert.ok(err64 < 1e-6, `float64 error ${err64}`);
    assert.ok(err32 > 10 * 1e-6, `the test must discriminate: float32 error is only ${err32}`);
  });
});

describe('RopeCache validation', () => {
  it('rejects bad maxContext, rotaryDim, end and row ranges, quoting the value', () => {
    assert.throws(() => new RopeCache(plain, 0), /maxContext.*0/);
    assert.throws(() => new RopeCache(plain, 1.5), InvalidOptionError);
    assert.throws(() => new RopeCache({ ...plain, rotaryDim: 7 }, 16), /rotaryDim.*7/);
    assert.throws(() => new RopeCache({ ...plain, rotaryDim: 0 }, 16), InvalidOptionError);
    const cache = new RopeCache(plain, 16);
    assert.throws(() => cache.ensure(-1), InvalidOptionError);
    assert.throws(() => cache.ensure(2.5), InvalidOptionError);
    assert.throws(() => cache.rows(0, 1), /ensure\(1\)/);
    cache.ensure(3);
    assert.throws(() => cache.rows(-1, 1), InvalidOptionError);
    assert.equal(cache.rows(4, 0).cos.length, 0);
  });
});
