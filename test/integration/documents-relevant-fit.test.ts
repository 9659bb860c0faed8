/**
 * "Use the relevant parts" on large texts (issue 20, item 1), with stories260K's real tokenizer in
 * the engine worker (EngineHost): the path tokenizes each piece at most once and never the whole
 * text (a counting wrapper around the host records every text it is asked to count), counts only
 * a sample of a text longer than EXACT_CHARS, and on a smaller text chooses exactly the chunks the
 * old path chose (test/helpers/chunk-oracle.ts: every unit and chunk counted, no cache).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ChunkCache, chunkTokensFor, fitDocuments, type AttachedText, type TokenCounter } from '../../main/documents/assemble.ts';
import { EXACT_CHARS } from '../../main/documents/chunk.ts';
import { countInPieces, documentTokens, PIECE_CHARS } from '../../main/documents/token-cache.ts';
import { documentBlock, userTurnText } from '../../main/documents/prompt.ts';
import type { ChatMessage } from '../../main/engine/generate/types.ts';
import { EngineHost } from '../../main/engine-host/host.ts';
import { oldRelevantRanges } from '../helpers/chunk-oracle.ts';
import { variedText } from '../helpers/documents.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

const ROOM = 492;
let host: EngineHost;
let cacheDir: string;

before(async () => {
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-relevant-fit-'));
  host = new EngineHost();
  await host.load(STORIES_BIN, { cacheDir, maxContext: 512, executionProvider: 'cpu' });
});

after(async () => {
  await host?.dispose();
  await rm(cacheDir, { recursive: true, force: true });
});

/** The host's counts, recording every text (countEach) and every prompt (countTokens) asked for. */
function counting(inner: TokenCounter) {
  const texts: string[] = [];
  const prompts: string[] = [];
  const counter: TokenCounter = {
    countEach: (xs) => {
      texts.push(...xs);
      return inner.countEach(xs);
    },
    countTokens: (r) => {
      prompts.push(r.messages.map((m) => m.content).join('\n'));
      return inner.countTokens(r);
    },
  };
  return { counter, texts, prompts };
}

function attached(text: string): AttachedText {
  return { key: 'book', name: 'book.txt', text, parts: [], fit: 'relevant' };
}

function renderFor(a: AttachedText, question: string) {
  return (body: (d: AttachedText) => string): ChatMessage[] => [{ role: 'user', content: userTurnText(question, [documentBlock(a.name, body(a))]) }];
}

/** How often each text was sent to be counted, the most first. */
function repeats(texts: string[]): [string, number][] {
  const n = new Map<string, number>();
  for (const t of texts) n.set(t, (n.get(t) ?? 0) + 1);
  return [...n].filter(([, k]) => k > 1).sort((a, b) => b[1] - a[1]);
}

const QUESTIONS = ['How many barrels of tar?', 'Where did the sailor tie the bowline knot?', 'What did the little girl see at the harbour?'];

describe('relevant parts of a large text', () => {
  for (const [label, chars] of [
    ['a text counted unit by unit (under EXACT_CHARS)', 200_000],
    ['a text measured from a sample (over EXACT_CHARS)', 1_200_000],
  ] as const) {
    it(`${label}: each piece is tokenized at most once over three questions, the whole text never`, async () => {
      const text = variedText(chars);
      assert.equal(text.length > EXACT_CHARS, chars > EXACT_CHARS);
      const a = attached(text);
      const { counter, texts, prompts } = counting(host);
      const cache = new ChunkCache();
      for (const question of QUESTIONS) {
        const fitted = await fitDocuments({ counter, render: renderFor(a, question), attachments: [a], question, room: ROOM, cache });
        assert.ok(fitted.usedRanges && fitted.usedRanges.length >= 3, `${question}: ${fitted.usedRanges?.length} parts`);
        assert.ok((await host.countTokens({ messages: fitted.messages })) <= ROOM, 'the prompt fits the room');
      }
      assert.deepEqual(repeats(texts).slice(0, 3), [], 'no text counted twice');
      const longest = Math.max(...texts.map((t) => t.length));
      assert.ok(longest <= 16 * 1024, `the longest text counted has ${longest} characters`);
      assert.ok(prompts.every((p) => p.length < text.length), 'the prompt with the whole text is never counted');
      const countedChars = texts.reduce((n, t) => n + t.length, 0);
      if (text.length > EXACT_CHARS) assert.ok(countedChars < text.length / 20, `${countedChars} characters counted of ${text.length}`);
      // Paragraphs, the sentences of those over a chunk, the runs of words of sentences over a chunk, and the chunks considered, each once.
      else assert.ok(countedChars < 3.5 * text.length, `${countedChars} characters counted of ${text.length}`);
    });
  }

  it('chooses the same parts as the old path (every unit and chunk counted) on a smaller text', async () => {
    const text = variedText(60_000, 777);
    const a = attached(text);
    const size = chunkTokensFor(ROOM);
    const count = (xs: string[]) => host.countEach(xs);
    const [separator] = await host.countEach(['\n\n[document.pdf p. 10]\n']);
    for (const question of QUESTIONS) {
      const render = renderFor(a, question);
      const fitted = await fitDocuments({ counter: host, render, attachments: [a], question, room: ROOM, cache: new ChunkCache() });
      const budget = ROOM - (await host.countTokens({ messages: render(() => '') }));
      const old = await oldRelevantRanges(text, question, size, budget, separator, count);
      assert.deepEqual(fitted.usedRanges?.map((r) => [r.start, r.end]), old, question);
    }
  });

  it('counts a long text for its info in pieces of at most PIECE_CHARS, within 2 % of counting it whole', async () => {
    const text = variedText(100_000, 99);
    const { counter, texts } = counting(host);
    const pieces = await countInPieces(text, (xs) => counter.countEach(xs));
    const [whole] = await host.countEach([text]);
    assert.ok(texts.every((t) => t.length <= PIECE_CHARS));
    assert.equal(texts.join(''), text, 'the pieces cover the text in order');
    assert.ok(Math.abs(pieces - whole) / whole < 0.02, `${pieces} in pieces against ${whole} whole`);
  });

  it("measures a text over EXACT_CHARS for its info from a 16 Ki sample, within 5 % of its paragraphs' count", async () => {
    const text = variedText(600_000, 5);
    const { counter, texts } = counting(host);
    const measured = await documentTokens(text, (xs) => counter.countEach(xs));
    assert.equal(measured.estimated, true);
    assert.ok(texts.join('').length <= 16 * 1024, `${texts.join('').length} characters tokenized`);
    const counted = await countInPieces(text, (xs) => host.countEach(xs));
    assert.ok(Math.abs(measured.tokens - counted) / counted < 0.05, `measured ${measured.tokens} against ${counted} counted`);
    const small = await documentTokens(text.slice(0, 50_000), (xs) => host.countEach(xs));
    assert.deepEqual(small, { tokens: (await host.countEach([text.slice(0, 50_000)]))[0], estimated: false });
  });

  it('a whole document of megabytes that surely does not fit is measured, not counted (the window attaches whole first)', async () => {
    const text = variedText(1_200_000, 8);
    const a: AttachedText = { ...attached(text), fit: 'whole' };
    const { counter, texts, prompts } = counting(host);
    const fitted = await fitDocuments({ counter, render: renderFor(a, 'q'), attachments: [a], question: 'q', room: ROOM, cache: new ChunkCache() });
    assert.ok(fitted.measured, 'measured');
    assert.ok(fitted.measured.tokens > 2 * ROOM, `${fitted.measured.tokens} tokens`);
    assert.ok(!fitted.measured.messages.some((m) => m.content.includes(text.slice(0, 1000))), 'the measured prompt leaves the document out');
    assert.ok(texts.join('').length <= 16 * 1024 && prompts.length === 0, 'only the sample was tokenized');
    assert.equal(fitted.messages[0].content.includes(text), true, 'the prompt itself still holds the whole text');
    // A whole document that may fit is counted as before.
    const small = { ...a, text: text.slice(0, 2000) };
    assert.equal((await fitDocuments({ counter: host, render: renderFor(small, 'q'), attachments: [small], question: 'q', room: ROOM, cache: new ChunkCache() })).measured, null);
  });
});
