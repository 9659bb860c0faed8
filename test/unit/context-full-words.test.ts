/**
 * The words for the context-full policies (main/contract/context-full.ts): the one sentence for a
 * context shift, shared by `npm run chat` (a `note:` line) and the window (the answer's stats
 * tooltip), and the table of the three policies' labels and hints the window shows (Settings, the
 * refusal line's buttons). Checked as the user reads them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONTEXT_FULL_WORDS, contextShiftNote } from '../../main/contract/context-full.ts';
import { CONTEXT_FULL_POLICIES } from '../../main/contract/types.ts';

test('contextShiftNote: one sentence with how many shifts and how many tokens left, thousands separated', () => {
  assert.equal(
    contextShiftNote({ shifts: 1, droppedTokens: 32 }),
    'The max context was reached; the context was shifted once and the answer went on (32 earlier tokens dropped).',
  );
  assert.equal(
    contextShiftNote({ shifts: 3, droppedTokens: 1536 }),
    'The max context was reached; the context was shifted 3 times and the answer went on (1,536 earlier tokens dropped).',
  );
  assert.equal(
    contextShiftNote({ shifts: 1, droppedTokens: 1 }),
    'The max context was reached; the context was shifted once and the answer went on (1 earlier token dropped).',
  );
});

test('contextShiftNote: no shift is not a shift (null), so callers need no second rule', () => {
  assert.equal(contextShiftNote({ shifts: 0, droppedTokens: 0 }), null);
  assert.equal(contextShiftNote(undefined), null);
});

test('CONTEXT_FULL_WORDS: every policy of the contract, in its order, has a label and a hint, and nothing else', () => {
  // In the contract's order: the window's menus list the table's keys.
  assert.deepEqual(Object.keys(CONTEXT_FULL_WORDS), [...CONTEXT_FULL_POLICIES]);
  assert.deepEqual(
    CONTEXT_FULL_POLICIES.map((p) => CONTEXT_FULL_WORDS[p].label),
    ['Stop', 'Truncate the middle', 'Rolling window'],
  );
});

test('CONTEXT_FULL_WORDS: each hint says what happens mid-answer, as the README table does', () => {
  assert.equal(
    CONTEXT_FULL_WORDS['truncate-middle'].hint,
    'Keeps the system prompt and the first exchange with its documents; leaves out the oldest exchanges after it. An answer that reaches the max context goes on: the first exchange is kept and the oldest turns after it are dropped.',
  );
  assert.equal(
    CONTEXT_FULL_WORDS['rolling-window'].hint,
    'Keeps the system prompt; leaves out the oldest exchanges. An answer that reaches the max context goes on: the oldest turns are dropped.',
  );
  assert.equal(
    CONTEXT_FULL_WORDS.stop.hint,
    'Leaves nothing out: Send refuses a message that does not fit, and an answer that reaches the max context ends there.',
  );
});
