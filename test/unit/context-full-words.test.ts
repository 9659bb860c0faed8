/**
 * The words for the context-full policies (main/contract/context-full.ts): the one sentence for a
 * context shift, shared by `npm run chat` (a `note:` line) and the window (the answer's stats
 * tooltip), the sentence for an answer that ended at the max context and the remedy for a prompt
 * that does not fit (a larger max context only below the trained context), and the table of the three policies' labels and hints the window shows (Settings, the
 * refusal line's buttons). Checked as the user reads them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CLI_CONTEXT_REMEDIES,
  CONTEXT_FULL_WORDS,
  contextFullNote,
  contextShiftNote,
  promptTooLongRemedy,
  raiseToFit,
  raiseUpToTrained,
  trainedContextReached,
  WINDOW_CONTEXT_REMEDIES,
} from '../../main/contract/context-full.ts';
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

test('CONTEXT_FULL_WORDS: each hint says what happens mid-answer, as the table in docs/desktop-app.md does', () => {
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

test('contextFullNote: an answer that stopped at the max context says so and what to do, raising only up to the trained context', () => {
  const stop = { reason: 'context-full', shifting: false, trainedContext: 512 } as const;
  assert.equal(
    contextFullNote({ ...stop, maxContext: 32 }, CLI_CONTEXT_REMEDIES),
    "The answer stopped at the max context (32 positions); to let it go on, raise --max-context (up to the model's trained context, 512) or use --context-full rolling-window.",
  );
  assert.equal(
    contextFullNote({ ...stop, maxContext: 512 }, CLI_CONTEXT_REMEDIES),
    "The answer stopped at the max context (512 positions, the model's trained context); to let it go on, use --context-full rolling-window (a max context past the trained context costs quality).",
  );
  assert.equal(
    contextFullNote({ ...stop, maxContext: 2048 }, CLI_CONTEXT_REMEDIES),
    "The answer stopped at the max context (2,048 positions, above the model's trained context, 512); to let it go on, use --context-full rolling-window (a max context past the trained context costs quality).",
  );
  // Before a model says its trained context, raising is the advice, without a bound.
  assert.equal(
    contextFullNote({ ...stop, maxContext: 32, trainedContext: null }, CLI_CONTEXT_REMEDIES),
    'The answer stopped at the max context (32 positions); to let it go on, raise --max-context or use --context-full rolling-window.',
  );
});

test('contextFullNote: a rolling window that could not shift says the max context is too small to shift', () => {
  const shifting = { reason: 'context-full', shifting: true, trainedContext: 512 } as const;
  assert.equal(
    contextFullNote({ ...shifting, maxContext: 2 }, CLI_CONTEXT_REMEDIES),
    "The max context (2 positions) was reached and is too small to shift the context: a shift keeps the start (the system prompt, or BOS) and needs at least 2 positions after it to drop; raise --max-context (up to the model's trained context, 512).",
  );
  // At the trained context only a long system prompt leaves nothing to drop.
  assert.equal(
    contextFullNote({ ...shifting, maxContext: 512 }, CLI_CONTEXT_REMEDIES),
    "The max context (512 positions, the model's trained context) was reached and is too small to shift the context: a shift keeps the start (the system prompt, or BOS) and needs at least 2 positions after it to drop; shorten the system prompt.",
  );
});

test('contextFullNote: nothing to say for any other end of an answer', () => {
  for (const reason of ['stop', 'length', 'cancelled', 'error']) {
    assert.equal(contextFullNote({ reason, shifting: false, maxContext: 32, trainedContext: 512 }, CLI_CONTEXT_REMEDIES), null);
  }
});

test('promptTooLongRemedy and raiseUpToTrained: raise the max context only while it is below the trained context', () => {
  assert.equal(promptTooLongRemedy(8, 512, CLI_CONTEXT_REMEDIES), "shorten the prompt or raise --max-context (up to the model's trained context, 512)");
  assert.equal(promptTooLongRemedy(8, null, CLI_CONTEXT_REMEDIES), 'shorten the prompt or raise --max-context');
  assert.equal(promptTooLongRemedy(512, 512, CLI_CONTEXT_REMEDIES), "shorten the prompt (the max context is already the model's trained context, 512; past it answers lose quality)");
  assert.equal(raiseUpToTrained(256, 512, CLI_CONTEXT_REMEDIES), "raise --max-context (up to the model's trained context, 512)");
  assert.equal(raiseUpToTrained(512, 512, CLI_CONTEXT_REMEDIES), null);
  assert.equal(promptTooLongRemedy(600, 512, CLI_CONTEXT_REMEDIES), "shorten the prompt (the max context is already above the model's trained context, 512; past it answers lose quality)");
});

test("the window's words: raise Max context in Settings only below the trained context, else why not", () => {
  assert.equal(raiseUpToTrained(256, 512, WINDOW_CONTEXT_REMEDIES), "raise Max context in Settings (up to the model's trained context, 512)");
  assert.equal(raiseUpToTrained(512, 512, WINDOW_CONTEXT_REMEDIES), null);
  assert.equal(raiseUpToTrained(600, 512, WINDOW_CONTEXT_REMEDIES), null);
  assert.equal(raiseUpToTrained(256, null, WINDOW_CONTEXT_REMEDIES), 'raise Max context in Settings');
  assert.equal(trainedContextReached(512, 512), "the max context is already the model's trained context, 512; past it answers lose quality");
  assert.equal(trainedContextReached(4096, 2048), "the max context is already above the model's trained context, 2,048; past it answers lose quality");
});

test('raiseToFit: the power of two that fits the total, offered only below the trained context and up to it', () => {
  assert.equal(raiseToFit(300, 256, 512), 512, 'below the trained context, and 512 holds 300');
  assert.equal(raiseToFit(512, 256, 512), 512, 'exactly the trained context');
  assert.equal(raiseToFit(600, 256, 512), null, 'fitting needs 1,024, past the trained context');
  assert.equal(raiseToFit(600, 512, 512), null, 'at the trained context: nothing larger is offered');
  assert.equal(raiseToFit(1500, 1024, 512), null, 'above the trained context: nothing larger is offered');
  assert.equal(raiseToFit(3000, 2048, null), 4096, 'an unknown trained context bounds nothing');
});
