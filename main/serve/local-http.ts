/**
 * The HTTP server under both Ropewalk listeners on 127.0.0.1 (`serve` mode's server and the
 * desktop app's Local server): requests reach their handler only with one well-formed Host
 * header, and whatever is wrong with the request line or headers is answered as the API answers
 * its other errors, `{ error: { message, type, param, code } }` (openai.ts), never with Node's
 * own empty 400.
 *
 * - Host (RFC 9112 §3.2: exactly one, `host[:port]`): missing, empty, doubled or malformed is a
 *   400 `invalid_host` that quotes the value and says what to send, with `Connection: close`.
 *   A well-formed Host that names another server is the listener's business (`isOwnHost`: 403).
 * - An absolute-form request target (RFC 9112 §3.2.2: `GET http://127.0.0.1:PORT/v1/models`,
 *   which a server must accept): its authority takes the Host's place, as that section says. One
 *   that names this server (`isOwnHost`) is routed by its path, as if sent in origin form (the
 *   handler sees `url` = path and query, `host` = the authority); another server's is the 403
 *   `forbidden_host` a foreign Host gets under /v1, on every path; a target that is neither a
 *   path nor an `http://` URL (`*`, other schemes) is a 400 `invalid_request` quoting it.
 * - A request Node's parser refuses (a control character in a header, a bad request line, headers
 *   over Node's limit, a request too slow to arrive): the same JSON body on the socket, 400
 *   (`invalid_host` when the refused line is the Host header, else `invalid_request`), 431 or
 *   408, then the connection closes. As Node's own handler, only on a connection that has not
 *   been answered yet: a second response written into the first would corrupt it.
 * - Slow and numerous clients (`EDGE_LIMITS`): headers must arrive within 10 s, a whole request
 *   within 30 s (checked every second: 408, closed), an idle kept-alive connection closes after
 *   5 s, and one client address holds at most 64 connections (the next: 503, closed).
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { errorJson, sendError } from './openai.ts';
import { ApiError } from './openai-request.ts';
import { forbiddenHost, isOwnHost } from './api-routes.ts';

/** `host[:port]` as RFC 3986 writes an authority's host: an IP literal in brackets, or letters, digits and the characters a reg-name allows. */
const HOST_SYNTAX = /^(?:\[[0-9a-f:.]+\]|[a-z0-9\-._~!$&'()*+,;=%]+)(?::\d{1,5})?$/i;

/** A value for a message: JSON-quoted (control characters escaped), at most 100 characters of it. */
const quote = (v: string) => JSON.stringify(v.slice(0, 100));

/** What to send instead, for every Host error. */
const sendInstead = (port: number) => `send Host: 127.0.0.1:${port} (or localhost:${port})`;

/**
 * Why a request's Host header names no server, as the 400 to answer (`invalid_host`, quoting the
 * value), or null when there is exactly one and it is `host[:port]`.
 * @param rawHeaders the request's header names and values as received (Node keeps only the first
 *   Host in `headers`, so a second one is seen here only).
 * @param port the listener's port, for the message.
 */
export function malformedHost(rawHeaders: string[], port: number): ApiError | null {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === 'host') values.push(rawHeaders[i + 1].trim());
  const invalid = (why: string) => new ApiError(400, 'invalid_host', `${why}; ${sendInstead(port)}`, null, { Connection: 'close' });
  if (values.length === 0) return invalid('no Host header');
  if (values.length > 1) return invalid(`${values.length} Host headers (${values.map(quote).join(', ')}); HTTP allows one`);
  if (values[0] === '') return invalid('the Host header is empty');
  if (!HOST_SYNTAX.test(values[0])) return invalid(`malformed Host header ${quote(values[0])}: expected host[:port]`);
  return null;
}

/**
 * For an absolute-form request target naming this server, rewrites the request to its origin
 * form (`url` = path and query, `host` = the target's authority) and returns null; otherwise the
 * error to answer: 403 `forbidden_host` for another server, 400 `invalid_request` for a target
 * that is not an `http://` URL. A target in origin form (`/…`) is left as it is (null).
 * @param port the listener's port, for the own-host check and the messages.
 */
export function absoluteTarget(req: http.IncomingMessage, port: number): ApiError | null {
  const target = req.url ?? '';
  if (target.startsWith('/')) return null;
  let url: URL | null = null;
  try {
    url = new URL(target);
  } catch {
    // not a URL: answered below
  }
  if (!url || url.protocol !== 'http:' || url.username || url.password) {
    return new ApiError(400, 'invalid_request', `request target ${quote(target)} is neither a path nor an http:// URL of this server; send a path, e.g. GET /v1/models`);
  }
  if (!isOwnHost(url.host, port)) return forbiddenHost(url.host, port);
  req.url = `${url.pathname}${url.search}`;
  req.headers.host = url.host;
  return null;
}

/**
 * The error for a request Node's parser refused (`clientError`): status and code by Node's error
 * code, naming the header line the parser stopped in (`rawPacket` at `bytesParsed`).
 */
function parseError(err: Error & { code?: string; reason?: string; rawPacket?: Buffer; bytesParsed?: number }, port: number): ApiError {
  if (err.code === 'HPE_HEADER_OVERFLOW') return new ApiError(431, 'headers_too_large', 'the request headers are larger than this server accepts');
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return new ApiError(408, 'request_timeout', 'the request did not arrive in time');
  const reason = err.reason ?? err.message;
  const packet = err.rawPacket?.toString('latin1') ?? '';
  const at = Math.min(err.bytesParsed ?? 0, packet.length);
  const end = packet.indexOf('\r\n', at);
  const line = packet.slice(packet.lastIndexOf('\n', at - 1) + 1, end === -1 ? undefined : end);
  const colon = line.indexOf(':');
  if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'host') {
    return new ApiError(400, 'invalid_host', `malformed Host header ${quote(line.slice(colon + 1).trim())} (${reason}); ${sendInstead(port)}`);
  }
  return new ApiError(400, 'invalid_request', `malformed HTTP request (${reason})${line ? ` at ${quote(line)}` : ''}`);
}

/** Writes `err` as a whole HTTP response on a socket that has no request object, then closes it. */
function answerOnSocket(socket: Duplex, err: ApiError): void {
  const body = JSON.stringify(errorJson(err));
  socket.end(
    `HTTP/1.1 ${err.status} ${http.STATUS_CODES[err.status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/** The edge's bounds on slow and numerous clients (both listeners use `EDGE_LIMITS`). */
export interface EdgeLimits {
  /** Time for a request's headers to arrive (Node's `headersTimeout`), ms. */
  headersTimeoutMs: number;
  /** Time for a whole request, body included, to arrive (`requestTimeout`), ms; ≥ headersTimeoutMs. */
  requestTimeoutMs: number;
  /** Idle time of a kept-alive connection between requests (`keepAliveTimeout`), ms. */
  keepAliveTimeoutMs: number;
  /** How often Node checks the two request timeouts (`connectionsCheckingInterval`), ms. */
  checkIntervalMs: number;
  /** Open connections one client address may hold; the next is answered 503 and closed. */
  maxConnectionsPerClient: number;
}

/**
 * Node's defaults are 60 s for headers and 300 s for a request, checked every 30 s: a client
 * sending a byte a second held its connection for over a minute. A local client sends a request
 * in milliseconds; an answer that streams for minutes is not bounded by these (they end when the
 * request has arrived). Every client here is 127.0.0.1, so the per-client cap bounds all of them:
 * 64 is ten browsers' worth of connections and far below the process's file descriptors.
 */
export const EDGE_LIMITS: EdgeLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  checkIntervalMs: 1_000,
  maxConnectionsPerClient: 64,
};

/** Counts each client address's open connections; one past the cap is answered 503 and closed. */
function capConnections(server: http.Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const client = socket.remoteAddress ?? '';
    const n = (open.get(client) ?? 0) + 1;
    if (n > max) {
      socket.on('error', () => socket.destroy());
      answerOnSocket(socket, new ApiError(503, 'too_many_connections', `${client} already has ${max} open connections to this server; close some and retry`));
      return;
    }
    open.set(client, n);
    socket.once('close', () => {
      const left = (open.get(client) ?? 1) - 1;
      if (left > 0) open.set(client, left);
      else open.delete(client);
    });
  });
}

/**
 * An HTTP server whose `handler` sees only requests with one well-formed Host and an origin-form
 * target (an absolute-form one for this server is rewritten to it; see the top of this file for
 * what the others get), within `limits` (a request too slow to arrive: 408; a client over the
 * connection cap: 503; both then closed). Listen on 127.0.0.1 as before.
 * @param port the port it listens on, once known (for the messages).
 * @param limits `EDGE_LIMITS` unless a test injects short ones.
 */
export function createLocalHttpServer(port: () => number, handler: http.RequestListener, limits: EdgeLimits = EDGE_LIMITS): http.Server {
  // Node answers a missing Host itself (an empty 400) unless told not to; malformedHost does.
  const server = http.createServer({
    requireHostHeader: false,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
  }, (req, res) => {
    const bad = malformedHost(req.rawHeaders, port()) ?? absoluteTarget(req, port());
    if (bad) sendError(res, bad);
    else handler(req, res);
  });
  capConnections(server, limits.maxConnectionsPerClient);
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex & { bytesWritten?: number }) => {
    // Node's own rule: a reset needs no answer, and an answered connection gets none (it would
    // land inside the earlier response).
    if (err.code === 'ECONNRESET' || !socket.writable || (socket.bytesWritten ?? 0) > 0) socket.destroy();
    else answerOnSocket(socket, parseError(err, port()));
  });
  return server;
}
