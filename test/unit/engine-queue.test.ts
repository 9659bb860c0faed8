/**
 * EngineQueue: one turn at a time, waiters served in order, a waiter whose signal aborts leaves
 * the queue (CANCELLED) without disturbing the others, and past the bound a request is refused
 * (QUEUE_FULL) instead of waiting.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EngineQueue } from '../../main/services/engine-queue.ts';
import { ServiceError } from '../../main/services/errors.ts';

const code = (c: string) => (e: unknown) => e instanceof ServiceError && e.code === c;

test('turns in FIFO order; an aborted waiter leaves; past the bound QUEUE_FULL', async () => {
  const q = new EngineQueue(2);
  const order: string[] = [];
  const releaseA = await q.acquire();
  const aheads: number[] = [];
  const b = q.acquire(undefined, (ahead) => aheads.push(ahead)).then((r) => (order.push('b'), r));
  const leaving = new AbortController();
  const c = q.acquire(leaving.signal, (ahead) => aheads.push(ahead));
  assert.deepEqual(aheads, [1, 2]);
  assert.equal(q.waiting, 2);
  await assert.rejects(q.acquire(), code('QUEUE_FULL'));
  leaving.abort();
  await assert.rejects(c, code('CANCELLED'));
  assert.equal(q.waiting, 1, 'the aborted waiter left the queue');
  const d = q.acquire().then((r) => (order.push('d'), r));
  releaseA();
  releaseA(); // idempotent: does not hand out a second turn
  const releaseB = await b;
  assert.deepEqual(order, ['b']);
  releaseB();
  (await d)();
  assert.deepEqual(order, ['b', 'd']);
  assert.equal(q.busy, false);
  await assert.rejects(q.acquire(AbortSignal.abort()), code('CANCELLED'));
});
