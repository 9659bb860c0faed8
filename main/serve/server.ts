/**
 * `serve` mode's server: the built renderer over HTTP and the router over a WebSocket, on
 * 127.0.0.1 only, so the whole app runs in a browser on this machine.
 *
 * - GET/HEAD of files under `staticDir` (`/` is index.html), with content types and a strict CSP;
 *   anything else is 404 (never a file outside `staticDir`, whatever the encoding of `..`).
 * - WebSocket at `/ws` speaking `main/contract/wire.ts`: each call goes to `router.call`, every
 *   router event is pushed to every client. A frame that is not a valid call is answered with an
 *   error result; nothing a client sends can crash the server.
 * - With `completions`, `/health` and the OpenAI-compatible `/v1` endpoints (api-routes.ts,
 *   openai.ts), with CORS for the one `cors` origin if given.
 * - Requests whose Host is not this server (127.0.0.1, localhost or [::1] with its port: DNS
 *   rebinding) and upgrades whose Origin is not the page's own origin (another web page) are
 *   refused, so only the page served here drives it. A missing, empty, doubled or malformed Host,
 *   and a request Node cannot parse, get the API's JSON 400 on any path (local-http.ts).
 */
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import type { ServerFrame, WireCall } from '../contract/wire.ts';
import { WS_PATH } from '../contract/wire.ts';
import { MAX_DOCUMENT_BYTES } from '../contract/channels.ts';
import { toRouterError, type Router } from '../composition/router.ts';
import { isOwnHost, routeApi } from './api-routes.ts';
import { createLocalHttpServer } from './local-http.ts';
import type { CompletionBackend } from './openai.ts';
import { contentTypeOf, resolveStaticPath } from '../common/static-files.ts';

export const HOST = '127.0.0.1';


/**
 * Largest WebSocket frame accepted, bytes: an attached document's base64 (4/3 of the 16 MiB
 * limit, about 22.4 MB) plus its JSON envelope. A message is at most 1,000,000 characters.
 */
const MAX_FRAME_BYTES = Math.ceil((MAX_DOCUMENT_BYTES * 4) / 3) + (1 << 20);

export interface StartServerOptions {
  router: Router;
  /** TCP port on 127.0.0.1; 0 = any free one (default 0). */
  port?: number;
  /** Folder of the built renderer (index.html, JS, CSS). */
  staticDir: string;
  /** Serves the OpenAI-compatible `/v1` endpoints with this backend (none: 404). */
  completions?: CompletionBackend;
  /** The one origin allowed to call `/v1` from a browser (none: CORS off). */
  cors?: string | null;
}

export interface RunningServer {
  /** `http://127.0.0.1:PORT/` */
  url: string;
  port: number;
  server: http.Server;
  /** Closes every WebSocket and the listener. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts the HTTP + WebSocket server on 127.0.0.1.
 * @throws the listen error (EADDRINUSE, EACCES) as Node reports it.
 */
export async function startServer(opts: StartServerOptions): Promise<RunningServer> {
  const staticRoot = await realpath(path.resolve(opts.staticDir)).catch(() => path.resolve(opts.staticDir));
  let port = 0;
  const origin = () => `http://${HOST}:${port}`;
  const hostOk = (h: string | undefined) => isOwnHost(h, port);
  const api = opts.completions ? { port: () => port, completions: opts.completions, cors: opts.cors } : null;

  const server = createLocalHttpServer(() => port, (req, res) => {
    if (api && routeApi(req, res, api)) return;
    void serveStatic(req, res, staticRoot, port, hostOk(req.headers.host)).catch(() => {
      if (!res.headersSent) send(res, 500, 'internal error\n', port);
      else res.destroy();
    });
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  server.on('upgrade', (req, socket, head) => {
    socket.on('error', () => socket.destroy());
    const pathname = (req.url ?? '').split('?')[0];
    const refuse = (status: number, why: string) => {
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(why)}\r\n\r\n${why}`);
    };
    if (pathname !== WS_PATH) return refuse(404, 'not found\n');
    if (!hostOk(req.headers.host)) return refuse(403, `wrong host; open ${origin()}/\n`);
    if (req.headers.origin !== `http://${req.headers.host}`) return refuse(403, 'this WebSocket only serves pages from its own origin\n');
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  wss.on('connection', (ws) => {
    ws.on('error', () => ws.terminate());
    ws.on('message', (data, isBinary) => void answer(opts.router, ws, data, isBinary));
  });
  const unsubscribe = opts.router.onEvent((event, data) => {
    const frame = JSON.stringify({ kind: 'event', event, data } satisfies ServerFrame);
    for (const ws of wss.clients) if (ws.readyState === WebSocket.OPEN) ws.send(frame);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;

  let closing: Promise<void> | null = null;
  return {
    url: `${origin()}/`,
    port,
    server,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        unsubscribe();
        for (const ws of wss.clients) ws.terminate();
        wss.close();
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

/** Answers one WebSocket frame: a call's result, or an error result for anything malformed. */
async function answer(router: Router, ws: WebSocket, data: WebSocket.RawData, isBinary: boolean): Promise<void> {
  let id = -1;
  let frame: ServerFrame;
  try {
    if (isBinary) throw new WireFrameError('binary frames are not accepted; send JSON text');
    let msg: unknown;
    try {
      msg = JSON.parse(data.toString());
    } catch {
      throw new WireFrameError('the frame is not valid JSON');
    }
    const call = msg as Partial<WireCall> | null;
    if (call && typeof call === 'object' && typeof call.id === 'number' && Number.isFinite(call.id)) id = call.id;
    if (!call || typeof call !== 'object' || call.kind !== 'call' || id === -1) {
      throw new WireFrameError('expected { kind: "call", id: number, method, payload }');
    }
    frame = { kind: 'result', id, ok: true, value: await router.call(call.method, call.payload) };
  } catch (e) {
    const error = e instanceof WireFrameError ? { code: 'INVALID_FRAME', message: e.message } : toRouterError(e).toWire();
    frame = { kind: 'result', id, ok: false, error };
  }
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
}

class WireFrameError extends Error {}

async function serveStatic(req: http.IncomingMessage, res: http.ServerResponse, root: string, port: number, hostOk: boolean): Promise<void> {
  if (!hostOk) return send(res, 403, `wrong host; open http://${HOST}:${port}/\n`, port);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return send(res, 405, 'method not allowed\n', port);
  }
  const file = await resolveStatic(root, req.url ?? '/');
  if (!file) return send(res, 404, 'not found\n', port);
  const type = contentTypeOf(file);
  securityHeaders(res, port);
  res.writeHead(200, { 'Content-Type': type, 'Content-Length': String((await stat(file)).size), 'Cache-Control': 'no-cache' });
  if (req.method === 'HEAD') return void res.end();
  await new Promise<void>((resolve, reject) => {
    createReadStream(file).on('error', reject).pipe(res).on('finish', resolve).on('error', reject);
  });
}

/** The regular file under `root` that `url` names, or null (outside root, missing, a folder, a link out). */
export async function resolveStatic(root: string, url: string): Promise<string | null> {
  const pathname = url.split('?')[0].split('#')[0];
  if (!pathname.startsWith('/')) return null;
  const lookup = resolveStaticPath(root, pathname);
  if (!lookup.ok) return null;
  try {
    const real = await realpath(lookup.path);
    if (!real.startsWith(root + path.sep)) return null;
    return (await stat(real)).isFile() ? real : null;
  } catch {
    return null;
  }
}

function securityHeaders(res: http.ServerResponse, port: number): void {
  res.setHeader(
    'Content-Security-Policy',
    `default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws://${HOST}:${port}; object-src 'none'; base-uri 'none'; frame-ancestors 'none'`,
  );
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
}

function send(res: http.ServerResponse, status: number, body: string, port: number): void {
  securityHeaders(res, port);
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)) });
  res.end(body);
}
