/**
 * The summary a new chat starts from (renderer/lib/recap.ts): the questions in order and the
 * last answer's beginning, within the bound, the oldest questions left out first (and said so);
 * nothing for a conversation without a question.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { conversationRecap } from '../../renderer/lib/recap.ts';

const chat = (n: number) =>
  Array.from({ length: n }, (_, i) => [
    { role: 'user' as const, content: `Question   number ${i + 1}?` },
    { role: 'assistant' as const, content: `Answer ${i + 1}. `.repeat(40) },
  ]).flat();

test('all questions and the last answer when they fit', () => {
  assert.equal(
    conversationRecap(chat(2), 1000),
    `Summary of an earlier chat:\n- I asked: Question number 1?\n- I asked: Question number 2?\n- The last answer began: ${'Answer 2. '.repeat(24).slice(0, 239).trimEnd()}…\n\n`,
  );
});

test('within the bound: the latest questions kept, the number left out said', () => {
  const r = conversationRecap(chat(30), 400);
  assert.ok(r.length <= 400 + 60, `${r.length} characters`);
  assert.match(r, /^Summary of an earlier chat:\n- \(\d+ earlier questions left out\)\n/);
  assert.match(r, /- I asked: Question number 30\?\n- The last answer began: Answer 30\./);
  assert.doesNotMatch(r, /Question number 1\?/);
});

test('no question, no summary', () => {
  assert.equal(conversationRecap([{ role: 'assistant', content: 'Hello' }], 500), '');
  assert.equal(conversationRecap([], 500), '');
});
