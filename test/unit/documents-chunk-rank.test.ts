/**
 * Chunking by tokens (paragraph boundaries, overlap, parts, full coverage) and BM25 ranking and
 * selection, with a word-count tokenizer so the numbers can be checked by hand.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chunkDocument, type CountTokens } from '../../main/documents/chunk.ts';
import { rankChunks, selectChunks } from '../../main/documents/rank.ts';

/** One token per whitespace-separated word: a stand-in tokenizer whose counts are obvious. */
const words: CountTokens = async (texts) => texts.map((t) => t.split(/\s+/).filter(Boolean).length);

const para = (topic: string, n: number) => Array.from({ length: n }, (_, i) => `${topic}${i}`).join(' ') + '.';

describe('chunkDocument', () => {
  it('cuts on paragraph boundaries, overlaps by whole paragraphs and covers every character', async () => {
    const text = [para('a', 10), para('b', 10), para('c', 10), para('d', 10), para('e', 3)].join('\n\n');
    const chunks = await chunkDocument(text, [{ label: 'page 1', start: 0 }, { label: 'page 2', start: text.indexOf('c0') }], words, { chunkTokens: 25, overlapTokens: 10 });
    assert.deepEqual(
      chunks.map((c) => [c.index, c.text.split(/\s+/)[0], c.tokens, c.part]),
      [
        [1, 'a0', 20, 'page 1'],
        [2, 'b0', 20, 'page 1'], // b repeated (10 tokens ≤ overlap), then c
        [3, 'c0', 23, 'page 2'],
      ],
    );
    assert.ok(chunks.every((c) => c.tokens <= 25));
    assert.equal(chunks[0].start, 0);
    assert.equal(chunks[chunks.length - 1].end, text.length);
    for (let i = 1; i < chunks.length; i++) assert.ok(chunks[i].start < chunks[i - 1].end, 'consecutive chunks overlap');
  });

  it('splits a paragraph longer than a chunk at sentences, then between words', async () => {
    const long = `${para('s', 12)} ${para('t', 12)} ${para('u', 40)}`;
    const chunks = await chunkDocument(long, [], words, { chunkTokens: 16, overlapTokens: 0 });
    assert.ok(chunks.every((c) => c.tokens <= 16), JSON.stringify(chunks.map((c) => c.tokens)));
    assert.equal(chunks.map((c) => c.text).join(''), long, 'without overlap the chunks concatenate to the text');
    assert.ok(chunks[0].text.endsWith('s11. '), 'the first sentence is a chunk of its own');
  });

  it('rejects chunk and overlap sizes that cannot make progress', async () => {
    await assert.rejects(chunkDocument('x', [], words, { chunkTokens: 4 }), /at least 8/);
    await assert.rejects(chunkDocument('x', [], words, { chunkTokens: 16, overlapTokens: 8 }), /overlap must be in \[0, 8\)/);
  });
});

describe('rankChunks and selectChunks', () => {
  const docs = ['The ropewalk twists hemp into rope.', 'Sailors tie a bowline knot.', 'Tar keeps hemp rope from rotting.', 'Lunch was at noon.'];
  const chunks = docs.map((text, i) => ({ index: i + 1, start: 0, end: text.length, text, tokens: text.split(' ').length, part: '' }));

  it('ranks by BM25 relevance, then the unmatched chunks in document order', () => {
    assert.deepEqual(rankChunks(chunks, 'why is rope tarred with tar?'), [3, 1, 2, 4]);
    assert.deepEqual(rankChunks(chunks, 'bowline'), [2, 1, 3, 4]);
  });

  it('fills the budget with the best chunks and returns them in document order', () => {
    const ranking = rankChunks(chunks, 'hemp rope tar');
    assert.deepEqual(selectChunks(chunks, ranking, 13).map((c) => c.index), [1, 3]);
    // A separator of 1 token each: chunk 3 (6 + 1), chunk 1 would pass 13 (+ 7), chunk 2 fits (+ 6).
    assert.deepEqual(selectChunks(chunks, ranking, 13, 1).map((c) => c.index), [2, 3]);
  });
});
