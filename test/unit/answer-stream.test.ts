/**
 * The parts of an answer's stream (main/services/answer-stream.ts) on an injected clock and
 * mocked timers: the delta batcher spaces deltas and loses no text; the periodic saver writes
 * only when due and changed, and retries a failed write; the final state of each kind of end.
 */
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { DeltaBatcher, finalState, PeriodicSaver, type DoneEvent } from '../../main/services/answer-stream.ts';
import type { GenerationStats } from '../../main/engine/generate/types.ts';

test('DeltaBatcher: the first text goes out at once, later text waits out the interval, flush sends the rest', () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    let now = 0;
    const sent: string[] = [];
    const b = new DeltaBatcher((d) => sent.push(d), 16, () => now);
    b.push('Once');
    mock.timers.tick(0);
    assert.deepEqual(sent, ['Once']);
    b.push(' upon');
    b.push(' a');
    now = 10;
    mock.timers.tick(10);
    assert.deepEqual(sent, ['Once'], 'nothing before 16 ms');
    assert.equal(b.text, 'Once upon a');
    now = 16;
    mock.timers.tick(6);
    assert.deepEqual(sent, ['Once', ' upon a']);
    b.push(' time');
    b.push('');
    b.flush();
    assert.deepEqual(sent, ['Once', ' upon a', ' time']);
    assert.equal(b.sent, 'Once upon a time');
    b.flush();
    assert.equal(sent.length, 3, 'an empty flush sends nothing');
  } finally {
    mock.timers.reset();
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
  promptTokens: 5,
  generatedTokens: 3,
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
  done: { type: 'done', reason, text, promptTokens: [1], tokens: [2, 3, 4], stats: STATS, ...(error ? { error } : {}) },
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
