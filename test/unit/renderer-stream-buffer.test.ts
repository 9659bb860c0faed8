/**
 * StreamBuffer (renderer/lib/stream-buffer.ts): deltas are buffered off-store and committed once
 * per frame, in order, per message; flush, discard and clear; the scheduler is asked for at most
 * one frame at a time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StreamBuffer, withChunk, type StreamChunk } from '../../renderer/lib/stream-buffer.ts';
import { ManualFrames } from './renderer-fakes.ts';


function setup() {
  const frames = new ManualFrames();
  const commits: Array<Map<string, StreamChunk>> = [];
  const buffer = new StreamBuffer(frames, (chunks) => commits.push(new Map([...chunks].map(([k, v]) => [k, { ...v }]))));
  return { frames, commits, buffer };
}

describe('StreamBuffer', () => {
  it('commits many deltas once per frame, concatenated in order', () => {
    const { frames, commits, buffer } = setup();
    for (const t of ['Once', ' upon', ' a', ' time']) buffer.push('c1', 'm1', t, 1);
    assert.equal(commits.length, 0, 'nothing before the frame');
    assert.equal(frames.requests, 1, 'one frame asked for four deltas');
    frames.tick();
    assert.equal(commits.length, 1);
    assert.deepEqual(commits[0].get('m1'), { conversationId: 'c1', text: 'Once upon a time', reasoning: '', generatedTokens: 1 });
    frames.tick();
    assert.equal(commits.length, 1, 'an idle frame commits nothing');
  });

  it('batches reasoning beside the answer, each in order, and appends each to its own field', () => {
    const { frames, commits, buffer } = setup();
    buffer.push('c1', 'm1', '', 1, 'Let me');
    buffer.push('c1', 'm1', '', 2, ' think');
    buffer.push('c1', 'm1', 'Hello', 3);
    frames.tick();
    const chunk = commits[0].get('m1')!;
    assert.deepEqual([chunk.text, chunk.reasoning, chunk.generatedTokens], ['Hello', 'Let me think', 3]);
    const m = { id: 'm1', conversationId: 'c1', role: 'assistant' as const, content: 'Hi', reasoning: 'Hmm. ', status: 'streaming' as const, stats: null, error: null, createdAt: 0 };
    assert.deepEqual([withChunk(m, chunk).content, withChunk(m, chunk).reasoning], ['HiHello', 'Hmm. Let me think']);
    const { reasoning: _r, ...plain } = m;
    assert.equal('reasoning' in withChunk(plain, { text: 'x', reasoning: '' }), false, 'no reasoning field without reasoning');
  });

  it('keeps the highest token count and separates messages', () => {
    const { frames, commits, buffer } = setup();
    buffer.push('c1', 'm1', 'a', 3);
    buffer.push('c1', 'm2', 'x', 1);
    buffer.push('c1', 'm1', 'b', 5);
    frames.tick();
    assert.equal(commits[0].get('m1')?.text, 'ab');
    assert.equal(commits[0].get('m1')?.generatedTokens, 5);
    assert.equal(commits[0].get('m2')?.text, 'x');
  });

  it('asks for a new frame after each commit', () => {
    const { frames, commits, buffer } = setup();
    buffer.push('c1', 'm1', 'a', 1);
    frames.tick();
    buffer.push('c1', 'm1', 'b', 2);
    buffer.push('c1', 'm1', 'c', 3);
    frames.tick();
    assert.deepEqual(commits.map((c) => c.get('m1')?.text), ['a', 'bc']);
    assert.equal(frames.requests, 2);
  });

  it('flush commits now and cancels the pending frame', () => {
    const { frames, commits, buffer } = setup();
    buffer.push('c1', 'm1', 'a', 1);
    buffer.flush();
    assert.equal(commits.length, 1);
    assert.equal(frames.queued.size, 0);
    buffer.flush();
    assert.equal(commits.length, 1, 'flushing an empty buffer commits nothing');
  });

  it('discard drops one message and cancels the frame when nothing is left', () => {
    const { frames, commits, buffer } = setup();
    buffer.push('c1', 'm1', 'a', 1);
    buffer.push('c1', 'm2', 'b', 1);
    buffer.discard('m1');
    assert.equal(buffer.size, 1);
    frames.tick();
    assert.deepEqual([...commits[0].keys()], ['m2']);
    buffer.push('c1', 'm3', 'c', 1);
    buffer.discard('m3');
    assert.equal(frames.queued.size, 0);
  });

  it('clear drops everything', () => {
    const { frames, commits, buffer } = setup();
    buffer.push('c1', 'm1', 'a', 1);
    buffer.clear();
    frames.tick();
    assert.equal(commits.length, 0);
    buffer.push('c1', 'm1', 'b', 1);
    frames.tick();
    assert.equal(commits[0].get('m1')?.text, 'b', 'usable after clear');
  });
});
