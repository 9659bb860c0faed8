/**
 * The token-count cache (by content hash and tokenizer, bounded, one batch per call) and the
 * lazy selection (`selectCounted`: the same choice as `selectChunks`, counting only what may
 * fit), with a word-count tokenizer so the numbers can be checked by hand.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChunkCache } from '../../main/documents/assemble.ts';
import { chunkDocument, splitChunks, type CountTokens } from '../../main/documents/chunk.ts';
import { rankChunks, selectChunks, selectCounted } from '../../main/documents/rank.ts';
import { TokenCountCache } from '../../main/documents/token-cache.ts';

const words = (t: string) => t.split(/\s+/).filter(Boolean).length;

/** A word counter that records each batch it is given. */
function recording() {
  const batches: string[][] = [];
  const count: CountTokens = async (texts) => {
    batches.push(texts);
    return texts.map(words);
  };
  return { count, batches };
}

describe('TokenCountCache', () => {
  it('counts each distinct text once per tokenizer, in one batch, and answers the rest from the cache', async () => {
    const cache = new TokenCountCache();
    const { count, batches } = recording();
    const a = cache.counter('model-a', count);
    assert.deepEqual(await a(['one two', 'three', 'one two']), [2, 1, 2]);
    assert.deepEqual(await a(['three', 'four five six']), [1, 3]);
    assert.deepEqual(batches, [['one two', 'three'], ['four five six']]);
    // Another tokenizer counts for itself.
    assert.deepEqual(await cache.counter('model-b', count)(['three']), [1]);
    assert.equal(batches.length, 3);
    assert.deepEqual(cache.stats, { hits: 2, counted: 4 });
  });

  it('keeps at most its capacity, the oldest leaving first, and caches nothing from a failed count', async () => {
    const cache = new TokenCountCache(2);
    const { count, batches } = recording();
    const c = cache.counter('m', count);
    await c(['a', 'b', 'c']);
    await c(['a']);
    assert.deepEqual(batches.at(-1), ['a'], "'a' left when 'c' came in");
    await assert.rejects(cache.counter('m', async () => Promise.reject(new Error('worker gone')))(['x']), /worker gone/);
    await c(['x']);
    assert.deepEqual(batches.at(-1), ['x']);
    assert.throws(() => new TokenCountCache(0), /capacity must be a positive integer, got 0/);
  });
});

describe('selectCounted', () => {
  const text = Array.from({ length: 40 }, (_, i) => `Part ${i} ${i % 7 === 0 ? 'rope tar hemp' : 'sea wind sail'} ${'word '.repeat(3 + (i % 5))}.`).join('\n\n');

  it('chooses what selectChunks chooses from the chunks counted whole, counting only chunks that may fit', async () => {
    const exact = await chunkDocument(text, [], async (t) => t.map(words), { chunkTokens: 24, overlapTokens: 2 });
    const { count, batches } = recording();
    const spans = await splitChunks(text, [], async (t) => t.map(words), { chunkTokens: 24, overlapTokens: 2 });
    for (const budget of [10, 40, 75, 200]) {
      const ranking = rankChunks(spans, 'rope tar');
      const lazy = await selectCounted(spans, ranking, budget, 1, count);
      assert.deepEqual(lazy, selectChunks(exact, ranking, budget, 1), `budget ${budget}`);
    }
    // The 10-token budget fits no 24-token chunk: estimates over it plus the slack are not counted.
    assert.ok(batches.flat().length < 4 * exact.length, `${batches.flat().length} chunk counts for ${exact.length} chunks × 4 budgets`);
  });
});

describe('ChunkCache', () => {
  it('keeps at most maxChars of texts (the oldest leaving first, the latest always) and chunks a kept one once', async () => {
    const cache = new ChunkCache(8, undefined, 100);
    const { count, batches } = recording();
    const doc = (key: string, chars: number) => ({ key, name: key, text: 'word '.repeat(chars / 5), parts: [], fit: 'relevant' as const });
    const a = doc('a', 60);
    await cache.get(a, 16, count);
    const first = batches.length;
    await cache.get(a, 16, count);
    assert.equal(batches.length, first, 'a kept document is not chunked again');
    await cache.get(doc('b', 30), 16, count);
    assert.equal(cache.size, 2);
    await cache.get(doc('c', 30), 16, count);
    assert.equal(cache.size, 2, "'a' left: 60 + 30 + 30 > 100");
    await cache.get(doc('huge', 500), 16, count);
    assert.equal(cache.size, 1, 'the latest stays even alone over the bound');
  });
});
