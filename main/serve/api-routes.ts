/**
 * What every Ropewalk HTTP server on 127.0.0.1 shares for the API (`serve` mode's server and the
 * desktop app's "Local server"):
 * - the Host check against DNS rebinding: `127.0.0.1`, `localhost` and `[::1]` with the server's
 *   own port are accepted, every other Host is refused (under /v1 as an OpenAI-style JSON error;
 *   a missing, empty, doubled or malformed one is answered before routing, local-http.ts);
 * - CORS: off unless one origin is allowed (`--cors ORIGIN`); then that origin, and only it, gets
 *   `Access-Control-Allow-Origin` and its preflights are answered;
 * - `GET /health`: 200 `{ status: 'ok' }` when a model is loaded, 503 `{ status: 'loading' }`
 *   while it loads (or `'error'` with the reason);
 * - `/v1/*` (openai.ts);
 * - `POST /tokenize`, `/detokenize`, `/apply-template` in llama.cpp's and vLLM's shapes (tokenize.ts).
 */
import type http from 'node:http';
import type { CompletionBackend } from '../services/index.ts';
import { handleOpenAi, sendError } from './openai.ts';
import { ApiError } from './openai-request.ts';
import { routeTokenize, TOKENIZE_PATHS } from './tokenize.ts';

export interface ApiRouteOptions {
  /** The server's port (known once it listens). */
  port: () => number;
  completions: CompletionBackend;
  /** The one origin allowed to call the API from a browser (e.g. `http://localhost:3000`); none: CORS off. */
  cors?: string | null;
}

/** Whether `host` (a Host header) names this server: 127.0.0.1, localhost or [::1] with its port. */
export function isOwnHost(host: string | undefined, port: number): boolean {
  if (!host) return false;
  const h = host.toLowerCase();
  return h === `127.0.0.1:${port}` || h === `localhost:${port}` || h === `[::1]:${port}`;
}

/** The 403 for a request naming another server (its Host, or the authority of an absolute-form target), saying what to use. */
export function forbiddenHost(host: string | undefined, port: number): ApiError {
  return new ApiError(403, 'forbidden_host', `wrong Host ${JSON.stringify(String(host ?? '').slice(0, 100))}; use http://127.0.0.1:${port}/v1 or http://localhost:${port}/v1`);
}

/**
 * Answers `/health`, the tokenizer paths and `/v1/*` requests; returns false for any other path (the caller serves it).
 * Never throws.
 */
export function routeApi(req: http.IncomingMessage, res: http.ServerResponse, opts: ApiRouteOptions): boolean {
  const pathname = (req.url ?? '').split('?')[0];
  if (pathname !== '/health' && !TOKENIZE_PATHS.includes(pathname) && !pathname.startsWith('/v1/')) return false;
  const port = opts.port();
  res.setHeader('X-Ropewalk-Instance', opts.completions.instanceId);
  if (!isOwnHost(req.headers.host, port)) {
    sendError(res, forbiddenHost(req.headers.host, port));
    return true;
  }
  const origin = req.headers.origin;
  if (opts.cors && origin === opts.cors) {
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Vary', 'Origin');
    if (req.method === 'OPTIONS') {
      res.writeHead(204, {
        'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
        'Access-Control-Allow-Headers': String(req.headers['access-control-request-headers'] ?? 'Content-Type, Authorization').slice(0, 2000),
        'Access-Control-Max-Age': '600',
      });
      res.end();
      return true;
    }
  }
  if (req.method === 'OPTIONS' && origin) {
    // A browser's preflight from an origin that is not allowed: say why, and how to allow one.
    const how = opts.cors ? `only ${opts.cors} is allowed` : 'CORS is off; start serve with --cors ORIGIN (or set the Local server\'s allowed origin in the app)';
    sendError(res, new ApiError(403, 'cors_forbidden', `the origin ${JSON.stringify(origin.slice(0, 200))} may not call this API from a browser: ${how}`));
    return true;
  }
  if (pathname === '/health') {
    const h = opts.completions.health();
    const body = JSON.stringify(h);
    res.writeHead(h.status === 'ok' ? 200 : 503, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)), ...(h.status === 'ok' ? {} : { 'Retry-After': '1' }) });
    res.end(body);
    return true;
  }
  if (routeTokenize(pathname, req, res, opts.completions)) return true;
  void handleOpenAi(req, res, opts.completions);
  return true;
}
