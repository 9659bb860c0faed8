/**
 * KeptKvCaches (main/engine/cache/kv-keep.ts) on its own, without a model: the longest shared
 * prefix is taken out, a kept prefix of a newer sequence is replaced, the least recently used go
 * first when the budget is exceeded, and a copy larger than the budget is never made.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { commonPrefix, KeptKvCaches } from '../../main/engine/cache/kv-keep.ts';

const copy = (floats: number) => () => new Float32Array(floats);

describe('KeptKvCaches', () => {
  it('takes out the kept cache with the longest shared prefix, only when it beats the live one', () => {
    const kept = new KeptKvCaches(1 << 20);
    kept.keep([1, 2, 3], 12, copy(3));
    kept.keep([1, 9, 9, 9], 16, copy(4));
    assert.equal(kept.take([1, 2, 3, 4], 3), null, 'three shared tokens do not beat a live cache sharing three');
    const got = kept.take([1, 2, 3, 4], 1);
    assert.deepEqual(got?.kept.tokens, [1, 2, 3]);
    assert.equal(got?.shared, 3);
    assert.equal(kept.stats.entries, 1, 'taken out');
  });

  it('a newer sequence replaces a kept prefix of it', () => {
    const kept = new KeptKvCaches(1 << 20);
    kept.keep([5, 6], 8, copy(2));
    kept.keep([5, 6, 7], 12, copy(3));
    assert.deepEqual(kept.stats, { entries: 1, bytes: 12, budgetBytes: 1 << 20 });
  });

  it('drops the least recently used past the budget, and never copies what alone exceeds it', () => {
    const kept = new KeptKvCaches(40);
    kept.keep([1], 16, copy(4));
    kept.keep([2], 16, copy(4));
    kept.keep([3], 16, copy(4));
    assert.deepEqual(kept.stats, { entries: 2, bytes: 32, budgetBytes: 40 });
    assert.equal(kept.take([1], 0), null, 'the oldest went first');
    let called = false;
    kept.keep([4], 44, () => ((called = true), new Float32Array(11)));
    assert.equal(called, false);
    kept.setBudget(16);
    assert.deepEqual(kept.stats, { entries: 1, bytes: 16, budgetBytes: 16 });
  });

  it('refuses a budget that is not a whole number of bytes ≥ 0, quoting it', () => {
    assert.throws(() => new KeptKvCaches(-1), (e: unknown) => e instanceof InvalidOptionError && /-1/.test(e.message));
    assert.throws(() => new KeptKvCaches(1.5), InvalidOptionError);
  });

  it('commonPrefix counts the shared leading token ids', () => {
    assert.equal(commonPrefix([1, 2, 3], [1, 2, 4, 5]), 2);
    assert.equal(commonPrefix([], [1]), 0);
  });
});
