/**
 * renderer/lib/early-arrivals.ts: answer events that reach the window before the call that
 * created their message has answered — kept text is appended in order, a kept done wins, a
 * snapshot keeps its own text (no doubling), and claiming forgets what it applied.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Message } from '../../main/contract/types.ts';
import { applyEarly, EarlyArrivals } from '../../renderer/lib/early-arrivals.ts';

const answer = (id: string, content: string, status: Message['status'] = 'streaming'): Message => ({
  id,
  conversationId: 'c1',
  role: 'assistant',
  content,
  status,
  stats: null,
  error: null,
  createdAt: 1,
});
const chunk = (text: string, generatedTokens: number, reasoning = '') => ({ conversationId: 'c1', text, reasoning, generatedTokens });

describe('applyEarly', () => {
  it('appends kept text to a streaming message and reports its token count', () => {
    const { message, generatedTokens } = applyEarly(answer('a', ''), chunk('Once upon', 2), undefined);
    assert.equal(message.content, 'Once upon');
    assert.equal(message.status, 'streaming');
    assert.equal(generatedTokens, 2);
  });

  it('a kept done wins over kept text and ends the stream', () => {
    const final = answer('a', 'Once upon a time', 'complete');
    const { message, generatedTokens } = applyEarly(answer('a', ''), chunk('Once', 1), final);
    assert.equal(message, final);
    assert.equal(generatedTokens, null);
  });

  it('nothing kept: a streaming message starts at 0 tokens; an ended one has no live progress', () => {
    assert.equal(applyEarly(answer('a', ''), undefined, undefined).generatedTokens, 0);
    assert.equal(applyEarly(answer('a', 'x', 'cancelled'), undefined, undefined).generatedTokens, null);
  });
});

describe('EarlyArrivals', () => {
  it('keeps text across frames in order, then claim applies and forgets it', () => {
    const early = new EarlyArrivals();
    early.keepText('a', chunk('early ', 1));
    early.keepText('a', chunk('bird', 2));
    assert.equal(early.size, 1);
    const claimed = early.claim(answer('a', ''));
    assert.equal(claimed.message.content, 'early bird');
    assert.equal(claimed.generatedTokens, 2);
    assert.equal(early.size, 0);
    assert.equal(early.claim(answer('a', '')).message.content, '', 'a second claim finds nothing');
  });

  it('copies the first chunk it keeps (later frames append to the copy, not to the caller’s object)', () => {
    const early = new EarlyArrivals();
    const first = chunk('a', 1);
    early.keepText('m', first);
    early.keepText('m', chunk('b', 2));
    assert.equal(first.text, 'a');
  });

  it('a done kept after text replaces it', () => {
    const early = new EarlyArrivals();
    early.keepText('a', chunk('Once', 1));
    early.keepDone(answer('a', 'Once upon', 'complete'));
    const claimed = early.claim(answer('a', ''));
    assert.equal(claimed.message.content, 'Once upon');
    assert.equal(claimed.message.status, 'complete');
    assert.equal(claimed.generatedTokens, null);
  });

  it('forgetText drops kept text only', () => {
    const early = new EarlyArrivals();
    early.keepText('a', chunk('x', 1));
    early.forgetText('a');
    assert.equal(early.size, 0);
  });

  it('over a snapshot: kept dones replace their message, kept text is dropped (already in the snapshot)', () => {
    const early = new EarlyArrivals();
    early.keepText('a', chunk('Once', 1)); // the snapshot already holds it
    early.keepDone(answer('b', 'final b', 'complete'));
    const snapshot = [answer('a', 'Once'), answer('b', 'fin')];
    const result = early.overSnapshot(snapshot);
    assert.deepEqual(result.map((m) => [m.content, m.status]), [
      ['Once', 'streaming'],
      ['final b', 'complete'],
    ]);
    assert.equal(early.size, 0);
  });

  it('clear forgets everything (the open conversation changed)', () => {
    const early = new EarlyArrivals();
    early.keepText('a', chunk('x', 1));
    early.keepDone(answer('b', 'y', 'complete'));
    early.clear();
    assert.equal(early.size, 0);
    assert.equal(early.claim(answer('b', '')).message.status, 'streaming');
  });
});
