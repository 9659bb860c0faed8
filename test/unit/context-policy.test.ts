/**
 * Context-full policies at prompt assembly: which exchanges a conversation leaves out, with a
 * stand-in "fits" (the total characters of the kept history under a bound) so each case can be
 * worked out by hand; and the number of counts stays logarithmic.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message } from '../../main/contract/types.ts';
import { exchanges, keptHistory } from '../../main/services/context-policy.ts';

let n = 0;
const msg = (role: Message['role'], content: string): Message => ({ id: `${role[0]}${n++}`, conversationId: 'c', role, content, status: 'complete', stats: null, error: null, createdAt: n });
/** Five exchanges of 10 + 10 characters: "u0"…, the first one marked. */
const history = () => [0, 1, 2, 3, 4].flatMap((i) => [msg('user', `q${i}`.padEnd(10, '.')), msg('assistant', `a${i}`.padEnd(10, '.'))]);
const under = (limit: number, probes: { n: number }) => async (kept: Message[]) => {
  probes.n++;
  return kept.reduce((s, m) => s + m.content.length, 0) <= limit;
};
const firsts = (ms: Message[]) => ms.filter((m) => m.role === 'user').map((m) => m.content.slice(0, 2));

test('exchanges: a user message and what follows it', () => {
  const h = [msg('assistant', 'hello'), ...history().slice(0, 4), msg('user', 'again')];
  assert.deepEqual(exchanges(h).map((e) => e.length), [1, 2, 2, 1]);
});

test('stop leaves everything in; a history that fits is never cut', async () => {
  const h = history();
  assert.equal((await keptHistory('stop', h, false, under(10, { n: 0 }))).dropped.length, 0);
  assert.equal((await keptHistory('rolling-window', h, false, under(100, { n: 0 }))).dropped.length, 0);
});

test('rolling window drops the oldest exchanges, the fewest that make it fit', async () => {
  const probes = { n: 0 };
  const r = await keptHistory('rolling-window', history(), false, under(45, probes));
  assert.deepEqual(firsts(r.kept), ['q3', 'q4']);
  assert.deepEqual(firsts(r.dropped), ['q0', 'q1', 'q2']);
  assert.ok(probes.n <= 4, `${probes.n} counts for 5 exchanges`);
});

test('truncate middle keeps the first exchange (its documents) and drops the ones after it', async () => {
  const r = await keptHistory('truncate-middle', history(), false, under(45, { n: 0 }));
  assert.deepEqual(firsts(r.kept), ['q0', 'q4']);
  assert.deepEqual(firsts(r.dropped), ['q1', 'q2', 'q3']);
});

test('the exchange being answered is never dropped; when nothing helps, all droppable ones go', async () => {
  const h = [...history(), msg('user', 'the question')];
  const r = await keptHistory('rolling-window', h, true, under(5, { n: 0 }));
  assert.deepEqual(r.kept.map((m) => m.content), ['the question']);
  const t = await keptHistory('truncate-middle', h, true, under(5, { n: 0 }));
  assert.deepEqual(firsts(t.kept), ['q0', 'th']);
});
