/**
 * Slow and numerous clients at the edge (createLocalHttpServer, under `serve` and the Local
 * server), on 127.0.0.1 with injected short limits: a client sending its headers a byte at a
 * time (the issue: one a second kept its connection over 60 s) is cut with a 408 within the
 * headers timeout plus one check interval while another client is served meanwhile; a body that
 * trickles is cut at the request timeout; an idle kept-alive connection is closed; a client past
 * the connection cap gets a 503 and the next one after a close is served. Every loop is bounded.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLocalHttpServer, EDGE_LIMITS, type EdgeLimits } from '../../main/serve/local-http.ts';

const LIMITS: EdgeLimits = { headersTimeoutMs: 400, requestTimeoutMs: 800, keepAliveTimeoutMs: 300, checkIntervalMs: 100, maxConnectionsPerClient: 6 };
let server: http.Server;
let port = 0;

before(async () => {
  server = createLocalHttpServer(() => port, (req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  }, LIMITS);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

/** A raw connection: what it received and when it closed (ms after `opened`). */
function connect(): Promise<{ socket: net.Socket; opened: number; received: () => string; closed: Promise<number> }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('utf8').on('data', (d: string) => (data += d));
    socket.on('error', () => {});
    socket.once('connect', () => {
      const opened = performance.now();
      const closed = new Promise<number>((r) => socket.once('close', () => r(performance.now() - opened)));
      resolve({ socket, opened, received: () => data, closed });
    });
  });
}

/** Writes `text` one byte every `everyMs` until done or the socket closes; bounded by text's length. */
async function trickle(socket: net.Socket, text: string, everyMs: number): Promise<void> {
  for (const ch of text) {
    if (socket.destroyed || !socket.writable) return;
    socket.write(ch);
    await sleep(everyMs);
  }
}

function getOk(): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    }).on('error', reject);
  });
}

describe('the edge', () => {
  it('has production limits far below Node\'s minute-long defaults', () => {
    assert.ok(EDGE_LIMITS.headersTimeoutMs <= 10_000 && EDGE_LIMITS.checkIntervalMs <= 1_000);
    assert.ok(EDGE_LIMITS.requestTimeoutMs >= EDGE_LIMITS.headersTimeoutMs && EDGE_LIMITS.requestTimeoutMs <= 30_000);
    assert.ok(EDGE_LIMITS.maxConnectionsPerClient > 0);
  });

  it('cuts headers sent a byte at a time within the headers timeout, serving others meanwhile', async () => {
    const slow = await connect();
    const dribble = trickle(slow.socket, `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: ${'a'.repeat(100)}\r\n\r\n`, 20);
    await sleep(100);
    assert.equal(await getOk(), 200); // served while the slow one is still sending
    const closedAfter = await slow.closed;
    await dribble;
    assert.ok(closedAfter >= LIMITS.headersTimeoutMs - 50, `closed after ${closedAfter} ms`);
    assert.ok(closedAfter < LIMITS.headersTimeoutMs + 2 * LIMITS.checkIntervalMs + 300, `closed after ${closedAfter} ms`);
    assert.match(slow.received(), /^HTTP\/1\.1 408 .*"code":"request_timeout"/s);
  });

  it('cuts a body that trickles at the request timeout', async () => {
    const slow = await connect();
    slow.socket.write(`POST / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: 200\r\n\r\n`);
    const dribble = trickle(slow.socket, 'x'.repeat(200), 20);
    const closedAfter = await slow.closed;
    await dribble;
    assert.ok(closedAfter >= LIMITS.requestTimeoutMs - 50 && closedAfter < LIMITS.requestTimeoutMs + 2 * LIMITS.checkIntervalMs + 300, `closed after ${closedAfter} ms`);
    assert.match(slow.received(), /408/);
  });

  it('closes an idle kept-alive connection after the keep-alive timeout', async () => {
    const c = await connect();
    c.socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    const closedAfter = await c.closed;
    assert.match(c.received(), /^HTTP\/1\.1 200 /);
    // Node closes a kept-alive socket about a second after keepAliveTimeout (measured 1,302 ms for 300).
    assert.ok(closedAfter < LIMITS.keepAliveTimeoutMs + 1500, `closed after ${closedAfter} ms`);
  });

  it('answers a client past the connection cap with 503, and serves again after one closes', async () => {
    const held = await Promise.all(Array.from({ length: LIMITS.maxConnectionsPerClient }, () => connect()));
    const extra = await connect();
    await extra.closed;
    assert.match(extra.received(), /^HTTP\/1\.1 503 .*already has 6 open connections.*"code":"too_many_connections"/s);
    held[0].socket.destroy();
    await held[0].closed;
    await sleep(20);
    assert.equal(await getOk(), 200);
    for (const h of held) h.socket.destroy();
    await Promise.all(held.map((h) => h.closed));
  });
});
