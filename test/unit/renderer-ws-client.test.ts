/**
 * The serve-mode transport (renderer/lib/ws-client.ts) against a real WebSocket server (`ws`)
 * speaking main/contract/wire.ts: calls queued before open, results and errors with their code,
 * pushed events, pending calls rejected when the socket drops, reconnection with backoff.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import type { WireCall } from '../../main/contract/wire.ts';
import { ApiError } from '../../renderer/lib/errors.ts';
import { createWsApi, type ConnectionStatus, type SocketLike, type WsApi } from '../../renderer/lib/ws-client.ts';
import { ManualTimers } from './renderer-fakes.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, what: string, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A wire server; `answer` decides each call's reply (null: never answer). */
async function server(answer: (call: WireCall) => object | null) {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.once('listening', r));
  const sockets = new Set<WebSocket>();
  const calls: WireCall[] = [];
  wss.on('connection', (ws) => {
    sockets.add(ws);
    ws.on('close', () => sockets.delete(ws));
    ws.on('message', (data) => {
      const call = JSON.parse(String(data)) as WireCall;
      calls.push(call);
      const reply = answer(call);
      if (reply) ws.send(JSON.stringify({ kind: 'result', id: call.id, ...reply }));
    });
  });
  const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/ws`;
  return {
    url,
    calls,
    sockets,
    push: (event: string, data: unknown) => {
      for (const s of sockets) s.send(JSON.stringify({ kind: 'event', event, data }));
    },
    close: () => new Promise<void>((r) => {
      for (const s of sockets) s.terminate();
      wss.close(() => r());
    }),
  };
}

const clients: WsApi[] = [];
const servers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) await s.close();
});

function client(url: string): WsApi {
  const api = createWsApi(url, (u) => new WebSocket(u) as unknown as SocketLike, { initialDelayMs: 10, maxDelayMs: 40 });
  clients.push(api);
  return api;
}

describe('renderer WebSocket client', () => {
  it('queues calls made before the socket opens, then resolves them', async () => {
    const s = await server((c) => ({ ok: true, value: { echo: c.method, payload: c.payload } }));
    servers.push(s);
    const api = client(s.url);
    assert.equal(api.status, 'connecting');
    const [a, b] = await Promise.all([api.getSettings({}), api.listConversations({ search: 'x' })]);
    assert.deepEqual(a, { echo: 'getSettings', payload: {} });
    assert.deepEqual(b, { echo: 'listConversations', payload: { search: 'x' } });
    assert.deepEqual(s.calls.map((c) => c.kind), ['call', 'call']);
    assert.equal(api.status, 'open');
  });

  it('rejects with ApiError carrying the wire error code', async () => {
    const s = await server(() => ({ ok: false, error: { code: 'INVALID_REQUEST', message: 'invalid getConversation request: id: too short' } }));
    servers.push(s);
    const api = client(s.url);
    await assert.rejects(api.getConversation({ id: '' }), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.code, 'INVALID_REQUEST');
      assert.match(e.message, /too short/);
      return true;
    });
  });

  it('delivers pushed events to listeners until they unsubscribe', async () => {
    const s = await server(() => ({ ok: true, value: null }));
    servers.push(s);
    const api = client(s.url);
    await api.stopGeneration({ conversationId: 'c1' });
    const seen: string[] = [];
    const off = api.on('answerDelta', (e) => seen.push(e.text));
    s.push('answerDelta', { conversationId: 'c1', messageId: 'm1', text: 'Hel', generatedTokens: 1 });
    s.push('modelState', { status: 'ready' });
    s.push('answerDelta', { conversationId: 'c1', messageId: 'm1', text: 'lo', generatedTokens: 2 });
    await until(() => seen.length === 2, 'two deltas');
    off();
    // One socket delivers in order: once a later event reaches a second listener, '!' has been delivered too.
    const later: string[] = [];
    api.on('answerDelta', (e) => later.push(e.text));
    s.push('answerDelta', { conversationId: 'c1', messageId: 'm1', text: '!', generatedTokens: 3 });
    s.push('answerDelta', { conversationId: 'c1', messageId: 'm1', text: '?', generatedTokens: 4 });
    await until(() => later.length === 2, 'both later deltas at the second listener');
    assert.deepEqual(seen, ['Hel', 'lo']);
  });

  it('rejects pending calls when the socket drops, then reconnects and works again', async () => {
    let answering = false;
    const s = await server(() => (answering ? { ok: true, value: 'pong' } : null));
    servers.push(s);
    const api = client(s.url);
    const statuses: ConnectionStatus[] = [];
    api.onStatus((st) => statuses.push(st));
    const pending = api.getModel({});
    await until(() => s.calls.length === 1, 'the call to reach the server');
    for (const socket of s.sockets) socket.terminate();
    await assert.rejects(pending, (e: unknown) => e instanceof ApiError && e.code === 'DISCONNECTED' && /connection/i.test(e.message));
    answering = true;
    await until(() => api.status === 'open', 'reconnection');
    assert.equal(await api.getModel({}), 'pong');
    assert.deepEqual(statuses.slice(0, 2), ['open', 'reconnecting']);
    assert.equal(statuses.at(-1), 'open');
  });

  it('keeps retrying while the server is down, with calls queued meanwhile', async () => {
    const s = await server(() => ({ ok: true, value: 1 }));
    const port = new URL(s.url).port;
    await s.close();
    const timers = new ManualTimers();
    const api = createWsApi(s.url, (u) => new WebSocket(u) as unknown as SocketLike, { initialDelayMs: 10, maxDelayMs: 40, timers });
    clients.push(api);
    const queued = api.getSettings({});
    // Each refused connection schedules the next attempt: run three of them by hand, no sleeping.
    for (let attempt = 0; attempt < 3; attempt++) {
      await until(() => timers.queued.size === 1, `reconnect ${attempt + 1} scheduled`);
      assert.equal(api.status, 'reconnecting');
      timers.runDue();
    }
    await until(() => timers.queued.size === 1, 'the fourth reconnect scheduled');
    const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(port) });
    servers.push({ close: () => new Promise((r) => wss.close(() => r())) });
    wss.on('connection', (ws) => ws.on('message', (d) => ws.send(JSON.stringify({ kind: 'result', id: (JSON.parse(String(d)) as WireCall).id, ok: true, value: 'late' }))));
    await new Promise((r) => wss.once('listening', r));
    timers.runDue();
    assert.equal(await queued, 'late');
  });

  it('close rejects what is pending and stops reconnecting', async () => {
    const s = await server(() => null);
    servers.push(s);
    const api = client(s.url);
    const pending = api.getModel({});
    await until(() => s.calls.length === 1, 'the call');
    api.close();
    await assert.rejects(pending, (e: unknown) => e instanceof ApiError && e.code === 'CLOSED');
    await assert.rejects(api.getModel({}), (e: unknown) => e instanceof ApiError && e.code === 'CLOSED');
  });
});
