/**
 * The preload bridge (app/bridge.ts `buildApi`, the function app/preload.ts exposes) and main's
 * invoke handler (app/ipc-dispatch.ts), driven with fakes for ipcRenderer/ipcMain and with the real
 * Router. Also the Disposable store the shell keeps its registrations in.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildApi, isRopewalkError, unwrapResult, type IpcResult } from '../../app/bridge.ts';
import { createInvokeHandler } from '../../app/ipc-dispatch.ts';
import { DisposableStore, toDisposable } from '../../app/lifecycle.ts';
import { channelOf, EVENT_NAMES, METHOD_NAMES } from '../../main/contract/names.ts';
import { ContextOverflowError } from '../../main/engine/errors.ts';
import { Router, RouterError, type Handlers } from '../../main/composition/router.ts';

/** A fake ipcRenderer: records invokes, answers from `answer`, delivers pushed messages. */
function fakeIpc(answer: (channel: string, request: unknown) => unknown = () => ({ ok: true, value: null })) {
  const invokes: Array<[string, unknown]> = [];
  const subscribers = new Set<(m: unknown) => void>();
  let subscribeCalls = 0;
  const api = buildApi(
    async (channel, request) => {
      invokes.push([channel, request]);
      return answer(channel, request);
    },
    (onMessage) => {
      subscribeCalls++;
      subscribers.add(onMessage);
      return () => subscribers.delete(onMessage);
    },
  );
  const push = (m: unknown) => [...subscribers].forEach((s) => s(m));
  return { api, invokes, push, subscribers, subscribeCalls: () => subscribeCalls };
}

describe('preload api (buildApi)', () => {
  it('exposes exactly one function per METHOD_NAME plus on, frozen', () => {
    const { api } = fakeIpc();
    assert.deepEqual(Object.keys(api).sort(), [...METHOD_NAMES, 'on'].sort());
    for (const key of Object.keys(api)) assert.equal(typeof (api as unknown as Record<string, unknown>)[key], 'function', key);
    assert.ok(Object.isFrozen(api));
    for (const forbidden of ['invoke', 'send', 'ipcRenderer', 'off', 'removeAllListeners']) assert.ok(!(forbidden in api), forbidden);
  });

  it("invokes each method's channel with its one request and unwraps the value", async () => {
    const { api, invokes } = fakeIpc((channel, request) => ({ ok: true, value: { channel, request } }));
    for (const method of METHOD_NAMES) {
      const call = (api as unknown as Record<string, (r: unknown) => Promise<unknown>>)[method];
      const request = { probe: method };
      assert.deepEqual(await call(request), { channel: channelOf(method), request });
    }
    assert.deepEqual(
      invokes.map(([c]) => c),
      METHOD_NAMES.map(channelOf),
    );
  });

  it('rejects with a plain RopewalkError object (contextBridge keeps its code) carrying the code and the sentence', async () => {
    const { api } = fakeIpc(() => ({ ok: false, error: { code: 'CONTEXT_OVERFLOW', message: 'the message does not fit' } }));
    await assert.rejects(api.getSettings({}), (e: unknown) => {
      assert.ok(isRopewalkError(e));
      // A plain object, so structured cloning across contextBridge keeps every field.
      assert.deepEqual(structuredClone(e), e);
      assert.equal(e.code, 'CONTEXT_OVERFLOW');
      assert.equal(e.message, 'the message does not fit');
      return true;
    });
  });

  it('treats anything but an IpcResult as a protocol error', () => {
    for (const bad of [undefined, null, 'x', {}, { ok: 'yes' }, { ok: false }, { ok: false, error: 'x' }]) {
      assert.throws(() => unwrapResult(bad), (e: unknown) => isRopewalkError(e) && (e.code === 'IPC_PROTOCOL' || e.code === 'INTERNAL'));
    }
    assert.equal(unwrapResult({ ok: true, value: 0 }), 0);
  });

  it('on() accepts only contract events and functions', () => {
    const { api } = fakeIpc();
    const on = api.on as (e: unknown, l: unknown) => () => void;
    for (const bad of ['answerdelta', 'ropewalk:event', '__proto__', 'constructor', '', 1, null]) {
      assert.throws(() => on(bad, () => {}), TypeError, String(bad));
    }
    assert.throws(() => on('answerDelta', 'not a function'), TypeError);
    for (const name of EVENT_NAMES) on(name, () => {})();
  });

  it("gives listeners only their event's data, until unsubscribed", () => {
    const { api, push, subscribers, subscribeCalls } = fakeIpc();
    const seen: unknown[][] = [];
    const offDelta = api.on('answerDelta', (...args: unknown[]) => seen.push(['delta', ...args]));
    const offModel = api.on('modelState', (...args: unknown[]) => seen.push(['model', ...args]));
    assert.equal(subscribeCalls(), 1, 'one IPC subscription for all listeners');
    const delta = { conversationId: 'c', messageId: 'm', text: 'hi', generatedTokens: 1 };
    push({ event: 'answerDelta', data: delta });
    push({ event: 'modelState', data: { status: 'ready' } });
    push({ event: 'notAnEvent', data: 1 });
    push('garbage');
    push(null);
    assert.deepEqual(seen, [
      ['delta', delta],
      ['model', { status: 'ready' }],
    ]);
    offDelta();
    offDelta(); // idempotent
    push({ event: 'answerDelta', data: delta });
    assert.equal(seen.length, 2);
    assert.equal(subscribers.size, 1);
    offModel();
    assert.equal(subscribers.size, 0, 'the IPC subscription closes with the last listener');
    api.on('answerDone', () => {});
    assert.equal(subscribeCalls(), 2, 'and reopens with the next');
  });

  it('keeps delivering when one listener throws', () => {
    const { api, push } = fakeIpc();
    const original = console.error;
    console.error = () => {};
    try {
      let got = 0;
      api.on('answerDelta', () => {
        throw new Error('broken listener');
      });
      api.on('answerDelta', () => got++);
      push({ event: 'answerDelta', data: {} });
      assert.equal(got, 1);
    } finally {
      console.error = original;
    }
  });
});

type FakeEvent = { trusted: boolean };

function handlers(overrides: Partial<Handlers>): Handlers {
  const fail = async () => {
    throw new Error('not faked');
  };
  return Object.fromEntries(METHOD_NAMES.map((m) => [m, overrides[m] ?? fail])) as Handlers;
}

describe('main invoke handler (createInvokeHandler)', () => {
  const settings = { maxContext: 512 };
  const router = new Router(
    handlers({
      getSettings: async () => settings as never,
      getConversation: async () => {
        throw new ContextOverflowError(600, 512);
      },
      deleteConversation: async () => {
        throw new Error('disk on fire\nstack details');
      },
    }),
  );
  const make = (method: (typeof METHOD_NAMES)[number], calls: string[] = []) =>
    createInvokeHandler<FakeEvent>(method, {
      router: async () => ({ call: (m, p) => (calls.push(String(m)), router.call(m, p)) }),
      isTrustedSender: (e) => e.trusted,
    });

  it("refuses an untrusted sender without calling the router", async () => {
    const calls: string[] = [];
    const r = await make('getSettings', calls)({ trusted: false }, {});
    assert.deepEqual(r, { ok: false, error: { code: 'FORBIDDEN', message: 'this window is not allowed to call the app' } });
    assert.deepEqual(calls, []);
  });

  it('refuses an oversized payload without calling the router', async () => {
    const calls: string[] = [];
    const r = await make('sendMessage', calls)({ trusted: true }, { conversationId: 'c', content: 'x'.repeat(5_000_000) });
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.error.code, 'PAYLOAD_TOO_LARGE');
    assert.deepEqual(calls, []);
  });

  it('answers with the value, or the error as { code, message }', async () => {
    assert.deepEqual(await make('getSettings')({ trusted: true }, {}), { ok: true, value: settings });
    const invalid = (await make('getSettings')({ trusted: true }, { extra: 1 })) as Extract<IpcResult, { ok: false }>;
    assert.equal(invalid.error.code, 'INVALID_REQUEST');
    const overflow = (await make('getConversation')({ trusted: true }, { id: 'c1' })) as Extract<IpcResult, { ok: false }>;
    assert.deepEqual(overflow.error, { code: 'CONTEXT_OVERFLOW', message: 'the sequence needs 600 positions but the max context is 512' });
    const internal = (await make('deleteConversation')({ trusted: true }, { id: 'c1' })) as Extract<IpcResult, { ok: false }>;
    assert.deepEqual(internal.error, { code: 'INTERNAL', message: 'disk on fire' });
    // The result is plain data: it survives structured clone (what Electron's IPC does).
    assert.deepEqual(structuredClone(overflow), overflow);
  });

  it('reports services that failed to start', async () => {
    const h = createInvokeHandler<FakeEvent>('getSettings', {
      router: async () => {
        throw new RouterError('DATA_DIR', 'the data folder cannot be written');
      },
      isTrustedSender: () => true,
    });
    assert.deepEqual(await h({ trusted: true }, {}), { ok: false, error: { code: 'DATA_DIR', message: 'the data folder cannot be written' } });
  });
});

describe('DisposableStore', () => {
  it('disposes in reverse order, once, and disposes late additions at once', () => {
    const order: string[] = [];
    const store = new DisposableStore();
    store.add(toDisposable(() => order.push('a')));
    store.add(toDisposable(() => order.push('b')));
    store.dispose();
    store.dispose();
    assert.deepEqual(order, ['b', 'a']);
    store.add(toDisposable(() => order.push('late')));
    assert.deepEqual(order, ['b', 'a', 'late']);
  });
});
