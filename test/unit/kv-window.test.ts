/**
 * The sliding-window KV rule (cache/kv-window.ts) and KvCache's windowed layers: rows tagged with
 * their position are written as a run would, and after every step the windowed buffers must hold
 * exactly positions [windowStart, length) from row 0, at a capacity within the bound, moving rows
 * only when a run does not fit; rewinds and context shifts keep the tags where they belong.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { defaultWindowSlack, exactDrop, planWindowRun, windowDiscard, windowGroup, windowKeeps } from '../../main/engine/cache/kv-window.ts';
import { InvalidOptionError } from '../../main/engine/errors.ts';

const L = 3; // layers 0 and 2 windowed, 1 global
const H = 2;
const D = 2;
const W = 8; // window: H_rows = 7
const SLACK = 4;
const MAX = 200;
const tag = (l: number, v: number, h: number, p: number, d: number) => 1 + l * 1e5 + v * 1e4 + h * 1e3 + p + d * 0.25;

function make(): KvCache {
  const window = windowGroup([W, 0, W], MAX, SLACK);
  assert.ok(window);
  return new KvCache({ numLayers: L, numKvHeads: H, headDim: D, maxContext: MAX, window });
}

/** A run of T tokens: ensure, write each layer's rows at its own offsets, commit. */
function run(kv: KvCache, T: number): void {
  const P = kv.length;
  kv.ensure(P + T);
  for (let l = 0; l < L; l++) {
    for (const [v, buf] of [kv.key(l), kv.value(l)].entries()) {
      for (let h = 0; h < H; h++) {
        for (let p = P; p < P + T; p++) {
          for (let d = 0; d < D; d++) buf[(h * kv.capacityOf(l) + p - kv.startOf(l)) * D + d] = tag(l, v, h, p, d);
        }
      }
    }
  }
  kv.commit(T);
}

/** Every layer's rows hold the tags of their positions (a windowed layer's row r: windowStart + r). */
function checkRows(kv: KvCache): void {
  for (let l = 0; l < L; l++) {
    for (const [v, buf] of [kv.key(l), kv.value(l)].entries()) {
      for (let h = 0; h < H; h++) {
        for (let p = kv.startOf(l); p < kv.length; p++) {
          for (let d = 0; d < D; d++) {
            const got = buf[(h * kv.capacityOf(l) + p - kv.startOf(l)) * D + d];
            assert.equal(got, tag(l, v, h, p, d), `layer ${l} ${v ? 'value' : 'key'} head ${h} position ${p}`);
          }
        }
      }
    }
  }
}

describe('kv-window rule', () => {
  it('windowGroup: one window for all sliding layers, null when it would not bound anything', () => {
    assert.deepEqual(windowGroup([8, 0, 8], 200, 4), { layers: [true, false, true], rows: 7, slack: 4 });
    assert.equal(windowGroup([0, 0], 200), null);
    assert.equal(windowGroup([8, 16], 200), null, 'windows that differ');
    assert.equal(windowGroup([8, 0], 11, 4), null, 'H + S ≥ max context');
    assert.equal(defaultWindowSlack(1023), 256);
    assert.equal(defaultWindowSlack(4095), 1024);
  });

  it('planWindowRun: warm when it fits; else keep H + S/2 (H for a long run), grow within H + max(S, T)', () => {
    const w = { layers: [true], rows: 7, slack: 4 };
    assert.deepEqual(planWindowRun(w, 5, 1, 8, MAX), { dropFront: 0, capacity: 8 });
    assert.deepEqual(planWindowRun(w, 11, 1, 11, MAX), { dropFront: 2, capacity: 11 }, 'keeps H + 2');
    assert.deepEqual(planWindowRun(w, 11, 4, 11, MAX), { dropFront: 4, capacity: 11 }, 'H + 2 + 4 passes H + 4: keeps H');
    assert.deepEqual(planWindowRun(w, 3, 10, 4, MAX), { dropFront: 0, capacity: 16 }, 'a long first run');
    assert.deepEqual(planWindowRun(w, 0, 20, 0, MAX), { dropFront: 0, capacity: 27 }, 'bounded by H + T');
  });

  it('windowKeeps: a prefix is kept only while the window still holds the H rows before it', () => {
    const w = { layers: [true], rows: 7, slack: 4 };
    assert.ok(windowKeeps(w, 0, 3));
    assert.ok(windowKeeps(w, 5, 12));
    assert.ok(!windowKeeps(w, 5, 11));
    assert.ok(!windowKeeps(w, 5, 3));
  });

  it('windowDiscard: rows inside the cut leave, the rest are renumbered', () => {
    assert.deepEqual(windowDiscard(50, 20, 1, 30), { keepRows: 0, dropRows: 0, start: 20 }, 'window after the cut: only renumbered');
    assert.deepEqual(windowDiscard(20, 50, 1, 30), { keepRows: 0, dropRows: 11, start: 1 }, 'window starts inside the cut');
    assert.deepEqual(windowDiscard(0, 70, 1, 30), { keepRows: 1, dropRows: 30, start: 0 }, 'window holds everything');
  });

  it('exactDrop: a cut that would leave the window reaching into a prefix it no longer holds drops less', () => {
    const w = { layers: [true], rows: 15, slack: 8 };
    assert.equal(exactDrop(w, 40, 60, 1, 29), 29, 'the tail (30) covers the window');
    assert.equal(exactDrop(w, 40, 60, 30, 20), 15, 'tail 10 < 15: keep + 15 stay');
    assert.equal(exactDrop(w, 0, 60, 30, 20), 20, 'the window holds everything (start 0)');
    assert.equal(exactDrop(w, 25, 60, 30, 20), 20, 'the window still holds the prefix rows it will read');
    assert.equal(exactDrop(w, 40, 40, 30, 5), 5, 'fewer than H + 1 after the prefix: nothing exact is possible');
  });
});

describe('KvCache with a window group', () => {
  it('180 decode steps after a prefill: the windowed rows are the last ones, capacity ≤ H + max(S, T), rows move at most once per S/2 steps', () => {
    const kv = make();
    run(kv, 5);
    run(kv, 6); // T = 6 > S
    let moves = 0;
    let lastStart = kv.windowStart;
    for (let step = 0; step < 180; step++) {
      run(kv, 1);
      if (kv.windowStart !== lastStart) moves++;
      lastStart = kv.windowStart;
      assert.ok(kv.windowCapacity <= W - 1 + 6, `capacity ${kv.windowCapacity}`);
      assert.ok(kv.length - kv.windowStart >= W - 1, `holds [${kv.windowStart}, ${kv.length})`);
      checkRows(kv);
    }
    assert.ok(moves <= Math.ceil(180 / (SLACK / 2)), `${moves} moves`);
    assert.equal(kv.capacity, MAX, 'the global layer holds everything');
    assert.equal(kv.stats.bytes, (kv.capacity + 2 * kv.windowCapacity) * H * D * 4 * 2);
    assert.equal(kv.stats.windowBytes, 2 * kv.windowCapacity * H * D * 4 * 2);
  });

  it('rewindTo keeps a prefix the window still holds, refuses one it does not; reusable says 0 then', () => {
    const kv = make();
    run(kv, 10);
    for (let i = 0; i < 30; i++) run(kv, 1);
    const start = kv.windowStart;
    assert.ok(start > 0);
    assert.equal(kv.reusable(kv.length - 1), kv.length - 1);
    assert.equal(kv.reusable(start + W - 2), 0);
    assert.throws(() => kv.rewindTo(start + W - 2), InvalidOptionError);
    kv.rewindTo(start + W - 1);
    checkRows(kv);
    run(kv, 3);
    checkRows(kv);
    kv.rewindTo(0);
    assert.equal(kv.windowStart, 0);
  });

  it('snapshot / restore round-trips the windowed rows with their start', () => {
    const kv = make();
    run(kv, 10);
    for (let i = 0; i < 20; i++) run(kv, 1);
    const [length, start] = [kv.length, kv.windowStart];
    const snap = kv.snapshot();
    assert.equal(snap.length, kv.snapshotFloats(length, start));
    assert.equal(snap.length, 2 * H * D * (length + 2 * (length - start)));
    kv.reset();
    run(kv, 4);
    kv.ensureHeld(length, start);
    kv.restore(snap, length, start);
    assert.equal(kv.windowStart, start);
    checkRows(kv);
  });

  it('discard renumbers the windowed rows and keeps their values in order', () => {
    const kv = make();
    run(kv, 10);
    for (let i = 0; i < 40; i++) run(kv, 1);
    const start = kv.windowStart;
    const held = kv.length - start;
    const valueAt = (l: number, r: number) => kv.value(l)[r * D];
    const before = Array.from({ length: held }, (_, r) => valueAt(0, r));
    kv.discard(1, 20, { cos: new Float32Array([1]), sin: new Float32Array([0]), rotaryDim: 2, interleaved: false });
    assert.equal(kv.windowStart, start - 20);
    assert.equal(kv.length - kv.windowStart, held);
    assert.deepEqual(Array.from({ length: held }, (_, r) => valueAt(0, r)), before);
  });
});
