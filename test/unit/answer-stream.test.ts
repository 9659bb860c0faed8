/**
 * The parts of an answer's stream (main/services/answer-stream.ts) on an injected clock and
 * scheduler (no real time passes): the delta batcher spaces deltas and loses no text; the periodic saver writes
 * only when due and changed, and retries a failed write; the final state of each kind of end;
 * the live decode rate; a resumed batcher (Continue) that counts the old text as sent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DecodeRate, DeltaBatcher, every, finalState, PeriodicSaver, type DoneEvent } from '../../main/services/answer-stream.ts';
import { ManualScheduler } from '../helpers/manual-scheduler.ts';
import { mulberry32 } from '../helpers/prng.ts';
import type { GenerationStats } from '../../main/engine/generate/types.ts';

test('DeltaBatcher: the first text goes out at once, later text waits out the interval, flush sends the rest', () => {
  const clock = new ManualScheduler();
  const sent: string[] = [];
  const b = new DeltaBatcher((d) => sent.push(d), 16, clock);
  b.push('Once');
  clock.advance(0);
  assert.deepEqual(sent, ['Once']);
  b.push(' upon');
  b.push(' a');
  clock.advance(10);
  assert.deepEqual(sent, ['Once'], 'nothing before 16 ms');
  assert.equal(b.text, 'Once upon a');
  clock.advance(6);
  assert.deepEqual(sent, ['Once', ' upon a']);
  b.push(' time');
  b.push('');
  b.flush();
  assert.deepEqual(sent, ['Once', ' upon a', ' time']);
  assert.equal(b.sent, 'Once upon a time');
  b.flush();
  assert.equal(sent.length, 3, 'an empty flush sends nothing');
  clock.advance(100);
  assert.equal(sent.length, 3, 'a flush cancels the pending timer');
});

test('DeltaBatcher: reasoning and answer text batch together but stay apart', () => {
  const clock = new ManualScheduler();
  const sent: [string, string][] = [];
  const b = new DeltaBatcher((d, r) => sent.push([d, r]), 16, clock);
  b.push('Let me', 'reasoning');
  clock.advance(0);
  b.push(' see.', 'reasoning');
  b.push('Hello', 'content');
  clock.advance(16);
  assert.deepEqual(sent, [['', 'Let me'], ['Hello', ' see.']]);
  assert.deepEqual([b.sent, b.sentReasoning, b.text, b.reasoning], ['Hello', 'Let me see.', 'Hello', 'Let me see.']);
});

test("finalState: the reasoning is the engine's, or what was streamed when longer", () => {
  const withReasoning = { done: { ...done('stop', 'Answer').done, reasoning: 'Thought' } };
  assert.deepEqual([finalState(withReasoning, 'Ans', 'Tho').reasoning, finalState(withReasoning, 'Ans', 'Tho').content], ['Thought', 'Answer']);
  assert.equal(finalState({ failure: { message: 'x', crashed: false } }, '', 'Half a thou').reasoning, 'Half a thou');
});

test('DeltaBatcher: tokens at random times (0–40 ms apart) → deltas at least 16 ms apart, each token out within 16 ms, no text lost', () => {
  const random = mulberry32(9);
  for (let run = 0; run < 20; run++) {
    const clock = new ManualScheduler();
    const sends: { at: number; text: string }[] = [];
    const b = new DeltaBatcher((text) => sends.push({ at: clock.time, text }), 16, clock);
    let pushed = '';
    const pushedAt: number[] = []; // per character of `pushed`
    for (let i = 0; i < 200; i++) {
      clock.advance(random() < 0.7 ? random() * 3 : random() * 40); // bursts of fast tokens, some slow ones
      const token = `t${i} `;
      b.push(token);
      pushed += token;
      for (let k = 0; k < token.length; k++) pushedAt.push(clock.time);
    }
    clock.advance(16);
    b.flush();
    assert.equal(sends.map((d) => d.text).join(''), pushed, 'the deltas add up to the text');
    const gaps = sends.slice(1).map((d, i) => d.at - sends[i].at);
    assert.ok(gaps.every((g) => g >= 16), `run ${run}: every gap ≥ 16 ms: ${gaps.filter((g) => g < 16).join(' ')}`);
    assert.ok(sends.length < 200, `run ${run}: batched: ${sends.length} deltas for 200 tokens`);
    let offset = 0;
    for (const d of sends) {
      const waited = d.at - pushedAt[offset];
      assert.ok(waited <= 16, `run ${run}: text pushed at ${pushedAt[offset]} ms went out at ${d.at} ms`);
      offset += d.text.length;
    }
  }
});

test('PeriodicSaver: writes when due and changed; a failed write is retried', () => {
  let now = 0;
  const writes: string[] = [];
  let failNext = false;
  const saver = new PeriodicSaver((t) => {
    if (failNext) {
      failNext = false;
      throw new Error('disk full');
    }
    writes.push(t);
  }, 875, () => now);
  saver.maybeSave('a');
  assert.deepEqual(writes, [], 'not due yet');
  now = 900;
  failNext = true;
  saver.maybeSave('ab');
  assert.deepEqual(writes, [], 'the write failed');
  now = 1000;
  saver.maybeSave('ab');
  assert.deepEqual(writes, ['ab'], 'retried');
  now = 3000;
  saver.maybeSave('ab');
  assert.deepEqual(writes, ['ab'], 'unchanged text is not written again');
});

const STATS: GenerationStats = {
  backend: 'js',
  executionProvider: 'cpu',
  nodesOnCpu: 48,
  promptTokens: 5,
  generatedTokens: 3,
  reasoningTokens: 0,
  reasoningMs: 0,
  reusedTokens: 0,
  prefilledTokens: 5,
  ttftMs: 12,
  prefillTokensPerSec: 100,
  decodeTokensPerSec: 50,
  contextUsed: 8,
  contextShifts: 0,
  droppedTokens: 0,
  maxContext: 512,
  rope: { capacity: 16, growths: 1, bytes: 1, rowsComputed: 16 },
  kv: { capacity: 16, growths: 1, bytes: 1 },
};
const done = (reason: DoneEvent['reason'], text: string, error?: DoneEvent['error']): { done: DoneEvent } => ({
  done: { type: 'done', reason, text, reasoning: '', promptTokens: [1], tokens: [2, 3, 4], stats: STATS, ...(error ? { error } : {}) },
});

test('finalState: complete, cancelled, engine error, thrown failure', () => {
  const complete = finalState(done('length', 'Once upon'), 'Once upon');
  assert.equal(complete.status, 'complete');
  assert.equal(complete.stats?.finishReason, 'length');
  assert.equal(complete.error, null);
  assert.equal(finalState(done('cancelled', 'Once'), 'Once').status, 'cancelled');
  const failed = finalState(done('error', 'Once', { code: 'SESSION_RUN', message: 'ONNX Runtime run failed' }), 'Once');
  assert.deepEqual([failed.status, failed.error, failed.content], ['error', 'ONNX Runtime run failed', 'Once']);
  const crashed = finalState({ failure: { message: 'the engine stopped', crashed: true } }, 'Once up');
  assert.deepEqual(crashed, { content: 'Once up', status: 'error', stats: null, error: 'the engine stopped' });
});

test('DecodeRate: (n − 1) tokens over the time since the first one; nothing before two tokens', () => {
  let t = 1000;
  const rate = new DecodeRate(() => t);
  assert.equal(rate.perSec(), null, 'no token yet');
  rate.tick(1);
  assert.equal(rate.perSec(), null, 'one token: no interval yet');
  t += 50;
  rate.tick(2);
  assert.equal(rate.perSec(), 20, '1 step in 50 ms');
  t += 250; // 4 more tokens over 250 ms: 5 steps in 300 ms
  for (let n = 3; n <= 6; n++) rate.tick(n);
  assert.equal(rate.perSec(), 16.7);
});

test('DeltaBatcher.resume: the text an answer had counts as sent; deltas carry only the new text', () => {
  const sent: string[] = [];
  const b = new DeltaBatcher((d) => sent.push(d), 16, new ManualScheduler());
  b.resume('Once upon', 'hmm');
  b.push(' a time');
  b.flush();
  assert.deepEqual(sent, [' a time']);
  assert.equal(b.sent, 'Once upon a time');
  assert.equal(b.text, 'Once upon a time');
  assert.equal(b.sentReasoning, 'hmm');
});

test('every: ticks at each interval on the injected scheduler, re-armed after each run, never after stop', () => {
  const clock = new ManualScheduler();
  const at: number[] = [];
  const ticker = every(clock, 250, () => at.push(clock.now()));
  clock.advance(1000);
  assert.deepEqual(at, [250, 500, 750, 1000]);
  ticker.stop();
  clock.advance(1000);
  assert.equal(at.length, 4);
  assert.equal(clock.pending, 0, 'no timer left armed');
});
