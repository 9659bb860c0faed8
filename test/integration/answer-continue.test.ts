/**
 * Answers past their end, with the real engine (stories260K in its worker) and real SQLite,
 * through the router as the window calls them: Continue after an answer reached max new tokens
 * (the same message grows, the KV cache holds its tokens so almost nothing is prefilled, and
 * greedy decoding gives what one longer answer gives), the live tokens/s on the deltas, and an
 * answer's text edited (a new version at its place; the next turn's prompt reads it); and each
 * answer's stats keeping the model and settings that wrote it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { MethodName, RequestOf, ResponseOf } from '../../main/contract/channels.ts';
import type { Message } from '../../main/contract/types.ts';
import { RouterError } from '../../main/composition/router.ts';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import { STORIES_BIN } from '../helpers/paths.ts';
import { nextEvent, record } from '../helpers/router-events.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-continue-test-'));
let s: Backend;

function call<M extends MethodName>(method: M, payload: RequestOf<M>): Promise<ResponseOf<M>> {
  return s.router.call(method, payload) as Promise<ResponseOf<M>>;
}

/** Runs `start` and waits for the answerDone of the conversation. */
async function answered(conversationId: string, start: () => Promise<unknown>): Promise<Message> {
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === conversationId, 60_000);
  await start();
  return (await done).message;
}

const SHORT = 12;

before(async () => {
  s = await startBackend({ dataDir: path.join(root, 'data'), cacheDir: path.join(root, 'cache'), defaultModel: STORIES_BIN, executionProvider: 'cpu' });
  await s.modelLoaded;
  await call('updateSettings', { temperature: 0, maxTokens: SHORT, repetitionPenalty: 1 });
});
after(async () => {
  await s?.dispose();
  rmSync(root, { recursive: true, force: true });
});

test('Continue after "length": the same message grows, the prompt comes from the KV cache, and greedy gives the longer answer', async (t) => {
  const { id } = await call('createConversation', {});
  const first = await answered(id, () => call('sendMessage', { conversationId: id, content: 'Once upon a time' }));
  assert.equal(first.stats?.finishReason, 'length', JSON.stringify(first.stats));
  assert.equal(first.stats?.generatedTokens, SHORT);

  const events = record(s.router);
  const continued = await answered(id, async () => {
    const { assistantMessage } = await call('continueAnswer', { conversationId: id, messageId: first.id });
    assert.equal(assistantMessage.id, first.id, 'the same message');
    assert.equal(assistantMessage.status, 'streaming');
    assert.equal(assistantMessage.content, first.content, 'it starts from the text it had');
  });
  events.stop();
  assert.equal(continued.id, first.id);
  assert.ok(continued.content.startsWith(first.content) && continued.content.length > first.content.length, continued.content);
  const stats = continued.stats!;
  assert.equal(stats.finishReason, 'length');
  assert.equal(stats.generatedTokens, 2 * SHORT, 'the answer counts both runs');
  // The answer's last token was sampled but never fed back: that one is prefilled, nothing else.
  const prefilled = stats.promptTokens - stats.reusedTokens;
  t.diagnostic(`continue: prompt ${stats.promptTokens} tokens, ${stats.reusedTokens} reused, TTFT ${stats.ttftMs} ms`);
  assert.equal(prefilled, 1, `prefilled ${prefilled} of ${stats.promptTokens} prompt tokens`);
  const deltas = events.of('answerDelta').filter((d) => d.messageId === first.id);
  assert.equal(deltas.map((d) => d.text).join(''), continued.content.slice(first.content.length), 'the deltas carry the new text only');
  assert.ok(deltas.every((d) => d.generatedTokens > SHORT), 'the token count goes on from the first run');

  const conv = await call('getConversation', { id });
  assert.deepEqual(conv.messages.map((m) => [m.role, m.id]), [['user', conv.messages[0].id], ['assistant', first.id]], 'one answer, not two');
  assert.equal(conv.messages[1].content, continued.content, 'stored whole');

  // Greedy: one answer of 2 × SHORT tokens is the same text.
  await call('updateSettings', { maxTokens: 2 * SHORT });
  const { id: other } = await call('createConversation', {});
  const whole = await answered(other, () => call('sendMessage', { conversationId: other, content: 'Once upon a time' }));
  await call('updateSettings', { maxTokens: SHORT });
  assert.equal(continued.content, whole.content);
});

test('Continue is refused, quoting why, for an answer that did not reach max new tokens and for a user message', async () => {
  await call('updateSettings', { maxTokens: 400 });
  const { id } = await call('createConversation', {});
  const done = await answered(id, async () => {
    await call('sendMessage', { conversationId: id, content: 'The cat' });
    await call('stopGeneration', { conversationId: id });
  });
  await call('updateSettings', { maxTokens: SHORT });
  assert.equal(done.stats?.finishReason ?? done.status, 'cancelled');
  await assert.rejects(call('continueAnswer', { conversationId: id, messageId: done.id }), (e: unknown) => {
    assert.ok(e instanceof RouterError);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, /reached max new tokens can be continued; this one ended with "cancelled"/);
    return true;
  });
  const user = (await call('getConversation', { id })).messages[0];
  await assert.rejects(call('continueAnswer', { conversationId: id, messageId: user.id }), /only an answer can be continued/);
});

test('live tokens/s: the deltas after the second token carry a positive rate near the final one', async () => {
  await call('updateSettings', { maxTokens: 60 });
  const { id } = await call('createConversation', {});
  const events = record(s.router);
  const done = await answered(id, () => call('sendMessage', { conversationId: id, content: 'A dog' }));
  events.stop();
  await call('updateSettings', { maxTokens: SHORT });
  const deltas = events.of('answerDelta').filter((d) => d.messageId === done.id);
  for (const d of deltas) {
    if (d.generatedTokens < 2) assert.equal(d.tokensPerSec, undefined, 'nothing measured before two tokens');
    else assert.ok(d.tokensPerSec! > 0, JSON.stringify(d));
  }
  // What wrote it is kept with it (exports stamp each answer with its own), and imports back.
  assert.equal(done.stats?.model, 'stories260K');
  assert.deepEqual(done.stats?.settings, { maxContext: 512, maxTokens: 60, temperature: 0, topK: 40, topP: 0.95, minP: 0.05, repetitionPenalty: 1, seed: null });
  const imported = await call('importConversation', { title: 'back', messages: [{ role: 'assistant', content: done.content, status: 'complete', stats: done.stats, error: null }] });
  assert.deepEqual(imported.messages[0].stats, done.stats);
  const last = deltas.at(-1)!;
  assert.ok(last.tokensPerSec !== undefined, 'the last delta has a rate');
  // The same definition as the engine's; the two clocks differ by the worker hop only.
  const final = done.stats!.decodeTokensPerSec;
  assert.ok(Math.abs(last.tokensPerSec! - final) / final < 0.5, `live ${last.tokensPerSec} vs final ${final} tok/s`);
});

test("an answer's text edited: a new version at its place (‹ 2/2 ›), no generation, and the next prompt reads the edited text", async () => {
  const { id } = await call('createConversation', {});
  const done = await answered(id, () => call('sendMessage', { conversationId: id, content: 'Once upon a time' }));
  const edited = 'there was a red ball.';
  const conv = await call('editAnswer', { conversationId: id, messageId: done.id, content: edited });
  const answer = conv.messages.at(-1)!;
  assert.equal(conv.messages.length, 2);
  assert.equal(answer.role, 'assistant');
  assert.equal(answer.content, edited);
  assert.equal(answer.status, 'complete');
  assert.equal(answer.stats, null, 'the model did not write it');
  assert.deepEqual(answer.branches, [done.id, answer.id]);

  // The next turn's prompt: the transcript with the edited answer, counted by the engine itself.
  const next = await answered(id, () => call('sendMessage', { conversationId: id, content: 'The end' }));
  const expected = await s.engine.countTokens({ messages: [{ role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: edited }, { role: 'user', content: 'The end' }] });
  assert.equal(next.stats?.promptTokens, expected);

  // The earlier version is one click away, with what followed it (nothing).
  const back = await call('selectBranch', { conversationId: id, messageId: done.id });
  assert.equal(back.messages.at(-1)!.content, done.content);
  await assert.rejects(call('editAnswer', { conversationId: id, messageId: back.messages[0].id, content: 'x' }), /not an answer/);
  await assert.rejects(call('editAnswer', { conversationId: id, messageId: done.id, content: '   ' }), /the answer is empty/);
});
