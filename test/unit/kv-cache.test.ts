/**
 * KvCache: BNSH layout, growth that keeps each head's rows at the new stride, overflow that
 * changes nothing, commit / rewind / reset, stats and validation; the context shift's move and
 * key rotation (both pair layouts, partial rotary) against RoPE's definition.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { ContextOverflowError, InvalidOptionError } from '../../main/engine/errors.ts';

const L = 2;
const H = 3;
const D = 8;

/** A value that names its place: layer, key/value, head, position, dim. */
const tag = (l: number, v: number, h: number, p: number, d: number): number => l * 10000 + v * 5000 + h * 1000 + p * 10 + d;

/** Writes positions [from, to) of every layer/head as a run with past = present would. */
function write(kv: KvCache, from: number, to: number): void {
  const C = kv.capacity;
  for (let l = 0; l < L; l++) {
    for (const [v, buf] of [kv.key(l), kv.value(l)].entries()) {
      for (let h = 0; h < H; h++) {
        for (let p = from; p < to; p++) {
          for (let d = 0; d < D; d++) buf[(h * C + p) * D + d] = tag(l, v, h, p, d);
        }
      }
    }
  }
}

/** Checks positions [0, n) hold their tags and [n, capacity) are zero. */
function check(kv: KvCache, n: number, zeroAfter = true): void {
  const C = kv.capacity;
  for (let l = 0; l < L; l++) {
    for (const [v, buf] of [kv.key(l), kv.value(l)].entries()) {
      assert.equal(buf.length, H * C * D);
      for (let h = 0; h < H; h++) {
        for (let p = 0; p < C; p++) {
          for (let d = 0; d < D; d++) {
            const got = buf[(h * C + p) * D + d];
            const want = p < n ? tag(l, v, h, p, d) : 0;
            if (p < n || zeroAfter) assert.equal(got, want, `layer ${l} ${v ? 'value' : 'key'} head ${h} pos ${p} dim ${d}`);
          }
        }
      }
    }
  }
}

const make = (maxContext = 40): KvCache => new KvCache({ numLayers: L, numKvHeads: H, headDim: D, maxContext });

describe('KvCache', () => {
  it('starts empty: capacity 0, nothing allocated', () => {
    const kv = make();
    assert.deepEqual(kv.stats, { capacity: 0, length: 0, growths: 0, bytes: 0, maxContext: 40, windowCapacity: 0, windowBytes: 0, windowRowsDropped: 0 });
    assert.equal(kv.key(0).length, 0);
    assert.deepEqual(kv.shape, [1, H, 0, D]);
  });

  it('grows to powers of two bounded by maxContext and keeps each head at the new stride', () => {
    const kv = make(40);
    kv.ensure(5); // prefill 5
    assert.equal(kv.capacity, 8);
    assert.deepEqual(kv.shape, [1, H, 8, D]);
    write(kv, 0, 5);
    kv.commit(5);
    check(kv, 5);
    for (let P = 5; P < 12; P++) {
      kv.ensure(P + 1); // decode
      write(kv, P, P + 1);
      kv.commit(1);
    }
    assert.equal(kv.capacity, 16);
    check(kv, 12);
    kv.ensure(12 + 20); // a 20-token chunk → 32
    assert.equal(kv.capacity, 32);
    check(kv, 12);
    kv.ensure(33); // bounded: min(64, 40)
    assert.equal(kv.capacity, 40);
    check(kv, 12);
    assert.deepEqual(kv.stats, { capacity: 40, length: 12, growths: 4, bytes: L * 2 * H * 40 * D * 4, maxContext: 40, windowCapacity: 0, windowBytes: 0, windowRowsDropped: 0 });
  });

  it('reserve grows once for a prefill of several runs: the held rows kept, later ensures warm, overflow refused with nothing changed', () => {
    const kv = make(40);
    kv.ensure(3);
    write(kv, 0, 3);
    kv.commit(3);
    kv.reserve(3 + 25); // a 25-token prompt about to run in chunks of 5 → min(32, 40)
    assert.equal(kv.capacity, 32);
    check(kv, 3);
    const k0 = kv.key(0);
    for (let P = 3; P < 28; P += 5) {
      kv.ensure(P + 5);
      write(kv, P, P + 5);
      kv.commit(5);
    }
    assert.equal(kv.key(0), k0, 'a chunk after reserve grew the cache again');
    assert.equal(kv.stats.growths, 2);
    check(kv, 28);
    kv.reserve(20); // warm
    assert.equal(kv.key(0), k0);
    assert.throws(() => kv.reserve(41), ContextOverflowError);
    assert.throws(() => kv.reserve(2.5), InvalidOptionError);
    assert.equal(kv.capacity, 32);
    assert.equal(kv.stats.growths, 2);
    check(kv, 28);
  });

  it('a warm ensure keeps the same buffers', () => {
    const kv = make();
    kv.ensure(16);
    const k0 = kv.key(0);
    const shape = kv.shape;
    for (let end = 1; end <= 16; end++) kv.ensure(end);
    assert.equal(kv.key(0), k0);
    assert.equal(kv.shape, shape);
    assert.equal(kv.stats.growths, 1);
  });

  it('overflow throws ContextOverflowError before anything changes', () => {
    const kv = make(40);
    kv.ensure(10);
    write(kv, 0, 10);
    kv.commit(10);
    const before = kv.stats;
    const k1 = kv.key(1);
    assert.throws(
      () => kv.ensure(41),
      (e: unknown) => e instanceof ContextOverflowError && e.requested === 41 && e.maxContext === 40,
    );
    assert.deepEqual(kv.stats, before);
    assert.equal(kv.key(1), k1);
    check(kv, 10);
    kv.ensure(40); // still usable
    check(kv, 10);
    assert.throws(() => kv.commit(31), ContextOverflowError);
    assert.equal(kv.length, 10);
  });

  it('commit past capacity or with a bad count throws; length is unchanged', () => {
    const kv = make();
    kv.ensure(4);
    assert.throws(() => kv.commit(5), /ensure\(5\)/);
    assert.throws(() => kv.commit(-1), InvalidOptionError);
    assert.throws(() => kv.commit(1.5), InvalidOptionError);
    assert.equal(kv.length, 0);
    kv.commit(4);
    assert.equal(kv.length, 4);
  });

  it('rewindTo keeps a prefix; growth copies only that prefix', () => {
    const kv = make();
    kv.ensure(6);
    write(kv, 0, 6);
    kv.commit(6);
    kv.rewindTo(3);
    assert.equal(kv.length, 3);
    check(kv, 6); // data past length is still there, just not counted
    kv.ensure(9);
    assert.equal(kv.capacity, 16);
    check(kv, 3); // only [0, 3) carried to the new buffers
    assert.throws(() => kv.rewindTo(4), /\[0, 3\].*4/);
    assert.throws(() => kv.rewindTo(-1), InvalidOptionError);
    kv.rewindTo(0);
    assert.equal(kv.length, 0);
  });

  it('reset empties the cache and keeps its buffers', () => {
    const kv = make();
    kv.ensure(20);
    kv.commit(20);
    const v0 = kv.value(0);
    kv.reset();
    assert.equal(kv.length, 0);
    assert.equal(kv.capacity, 32);
    assert.equal(kv.value(0), v0);
  });

  it('validates sizes and layers, quoting the value', () => {
    assert.throws(() => new KvCache({ numLayers: 0, numKvHeads: 1, headDim: 8, maxContext: 4 }), /numLayers.*0/);
    assert.throws(() => new KvCache({ numLayers: 1, numKvHeads: 1.5, headDim: 8, maxContext: 4 }), /numKvHeads.*1\.5/);
    assert.throws(() => new KvCache({ numLayers: 1, numKvHeads: 1, headDim: -8, maxContext: 4 }), /headDim.*-8/);
    assert.throws(() => new KvCache({ numLayers: 1, numKvHeads: 1, headDim: 8, maxContext: NaN }), /maxContext.*NaN/);
    const kv = make();
    assert.throws(() => kv.key(L), InvalidOptionError);
    assert.throws(() => kv.value(-1), InvalidOptionError);
    assert.throws(() => kv.ensure(-1), InvalidOptionError);
  });
});

describe('KvCache without host buffers (the native backend holds the memory)', () => {
  it('follows the same growth rule and counts, but has no buffers to hand out', () => {
    const kv = new KvCache({ numLayers: L, numKvHeads: H, headDim: D, maxContext: 100, hostBuffers: false });
    kv.ensure(3);
    kv.commit(3);
    kv.ensure(9);
    assert.deepEqual(kv.stats, { capacity: 16, length: 3, growths: 2, bytes: 16 * H * D * 4 * 2 * L, maxContext: 100, windowCapacity: 0, windowBytes: 0, windowRowsDropped: 0 });
    assert.deepEqual(kv.shape, [1, H, 16, D]);
    assert.throws(() => kv.key(0), (e: unknown) => e instanceof InvalidOptionError && /held by the backend/.test(e.message));
    assert.throws(() => kv.ensure(101), ContextOverflowError);
  });
});

describe('KvCache.discard (context shift)', () => {
  /** RoPE of one head row at position p, by the definition (Su et al. 2021), float64; dims past R pass through. */
  function roped(x: number[], p: number, R: number, theta: number, interleaved: boolean): number[] {
    const out = [...x];
    for (let i = 0; i < R / 2; i++) {
      const angle = p * theta ** (-(2 * i) / R);
      const [ia, ib] = interleaved ? [2 * i, 2 * i + 1] : [i, i + R / 2];
      out[ia] = x[ia] * Math.cos(angle) - x[ib] * Math.sin(angle);
      out[ib] = x[ib] * Math.cos(angle) + x[ia] * Math.sin(angle);
    }
    return out;
  }

  for (const layout of ['interleaved', 'half'] as const) {
    it(`${layout}: moved keys equal RoPE at their new positions (partial rotary: the rest unchanged); values only move`, () => {
      const R = 6; // partial rotary: 6 of D = 8 dims
      const theta = 100;
      const kv = new KvCache({ numLayers: 1, numKvHeads: H, headDim: D, maxContext: 64 });
      const n = 20;
      kv.ensure(n);
      const raw = (h: number, p: number) => Array.from({ length: D }, (_, d) => Math.sin(h * 7 + p * 3 + d));
      for (let h = 0; h < H; h++) {
        for (let p = 0; p < n; p++) {
          kv.key(0).set(roped(raw(h, p), p, R, theta, layout === 'interleaved'), (h * kv.capacity + p) * D);
          kv.value(0).set(raw(h, p).map((x) => -x), (h * kv.capacity + p) * D);
        }
      }
      kv.commit(n);
      const keep = 2;
      const drop = 7;
      const rope = new RopeCache({ theta, rotaryDim: R, layout }, 64);
      kv.discard(keep, drop, { ...rope.shiftRotation(drop), rotaryDim: R, interleaved: layout === 'interleaved' });
      assert.equal(kv.length, n - drop);
      let maxErr = 0;
      for (let h = 0; h < H; h++) {
        for (let q = 0; q < n - drop; q++) {
          const p = q < keep ? q : q + drop; // where the row came from
          const want = roped(raw(h, p), q, R, theta, layout === 'interleaved');
          const got = kv.key(0).subarray((h * kv.capacity + q) * D, (h * kv.capacity + q + 1) * D);
          for (let d = 0; d < D; d++) maxErr = Math.max(maxErr, Math.abs(got[d] - want[d]));
          assert.deepEqual(Array.from(kv.value(0).subarray((h * kv.capacity + q) * D, (h * kv.capacity + q + 1) * D)), Array.from(Float32Array.from(raw(h, p).map((x) => -x))));
        }
      }
      assert.ok(maxErr < 1e-6, `max error ${maxErr}`);
    });
  }

  it('refuses a range outside the held positions, changing nothing', () => {
    const kv = new KvCache({ numLayers: 1, numKvHeads: 1, headDim: 4, maxContext: 8 });
    kv.ensure(4);
    kv.commit(4);
    const rotation = { cos: new Float32Array(2), sin: new Float32Array(2), rotaryDim: 4, interleaved: true };
    assert.throws(() => kv.discard(2, 3, rotation), (e) => e instanceof InvalidOptionError && /\[2, 5\) of 4/.test(e.message));
    assert.throws(() => kv.discard(0, 0, rotation), InvalidOptionError);
    assert.equal(kv.length, 4);
  });

  it('checkDiscard (what a backend with its own memory calls before moving it) refuses a rotation that does not fit the head, as discard does', () => {
    const kv = new KvCache({ numLayers: 1, numKvHeads: 1, headDim: 4, maxContext: 8, hostBuffers: false });
    kv.ensure(4);
    kv.commit(4);
    const wide = { cos: new Float32Array(4), sin: new Float32Array(4), rotaryDim: 8, interleaved: true };
    assert.throws(() => kv.checkDiscard(1, 2, wide), (e) => e instanceof InvalidOptionError && /8 dims with 4 angles does not fit head size 4/.test(e.message));
    assert.throws(() => kv.discard(1, 2, wide), InvalidOptionError);
    assert.equal(kv.length, 4);
  });
});
