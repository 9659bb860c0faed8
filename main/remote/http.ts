/**
 * The remote engine's HTTP: one `RemoteServer` per base URL and key, making JSON requests and
 * opening streams with Node's fetch, turning every failure into a `RemoteEngineError` (errors.ts).
 * The key goes only into the `Authorization` header, never into a message. Non-streaming calls
 * time out after `timeoutMs`; a stream runs until it ends or the caller aborts. Also the reading
 * of a stream's Server-Sent Events (`serverSentData`) and of a body that ignored `stream` (`wholeBody`).
 */
import { RemoteEngineError, httpFailure, networkFailure } from './errors.ts';

/** Time allowed to a non-streaming request (models, tokenize), ms. */
export const REQUEST_TIMEOUT_MS = 15_000;

/**
 * A base URL as the remote engine uses it: http(s), no query or fragment, no trailing slash
 * (e.g. `http://127.0.0.1:8000/v1`). @throws RemoteEngineError 'config' quoting the value.
 */
export function normalizeBaseUrl(value: string): string {
  let url: URL | null = null;
  try {
    url = new URL(value.trim());
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || url.username || url.password) {
    // A URL with credentials is not quoted back: the message reaches the window and may be logged.
    const got = url && (url.username || url.password) ? 'a URL with a user name or password in it' : JSON.stringify(value);
    throw new RemoteEngineError('config', `the base URL must be an http(s) address such as http://127.0.0.1:8000/v1 (no query, no credentials: the key has its own field), got ${got}`);
  }
  return url.href.replace(/\/+$/, '');
}

/** One OpenAI-compatible server: its `/v1` base URL and the optional API key. */
export class RemoteServer {
  /** Where vLLM's and llama.cpp's `/tokenize` live: the base URL without its `/v1`. */
  readonly root: string;
  /** The `X-Ropewalk-Instance` header of the last response: which Ropewalk answered (null: not one). */
  instance: string | null = null;

  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string | null,
    private readonly timeoutMs = REQUEST_TIMEOUT_MS,
  ) {
    this.root = baseUrl.replace(/\/v1$/, '');
  }

  /**
   * GETs or POSTs JSON and parses the JSON answer. `url` is relative to the base URL unless it
   * starts with '/' (then to `root`).
   * @throws RemoteEngineError (HTTP status, unreachable, bad JSON).
   */
  async json(url: string, what: string, body?: unknown, ctx: { model?: string | null; signal?: AbortSignal } = {}): Promise<unknown> {
    const signal = ctx.signal ? AbortSignal.any([ctx.signal, AbortSignal.timeout(this.timeoutMs)]) : AbortSignal.timeout(this.timeoutMs);
    const res = await this.fetch(url, what, body, signal, ctx.model ?? null);
    const text = await res.text().catch((e: unknown) => {
      throw new RemoteEngineError('stream-cut', `the remote engine at ${this.baseUrl} closed the connection while ${what}`, null, { cause: e });
    });
    try {
      return JSON.parse(text);
    } catch {
      throw new RemoteEngineError('bad-response', `the remote engine at ${this.baseUrl} did not answer ${what} with JSON (${JSON.stringify(text.slice(0, 80))}); is this an OpenAI-compatible server?`);
    }
  }

  /** POSTs and returns the open response (a stream); `signal` aborts it. @throws RemoteEngineError before the body. */
  stream(url: string, what: string, body: unknown, signal: AbortSignal, model: string): Promise<Response> {
    return this.fetch(url, what, body, signal, model);
  }

  private async fetch(url: string, what: string, body: unknown, signal: AbortSignal, model: string | null): Promise<Response> {
    const target = url.startsWith('/') ? this.root + url : `${this.baseUrl}/${url}`;
    const headers: Record<string, string> = { accept: 'application/json, text/event-stream' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    let res: Response;
    try {
      res = await fetch(target, { method: body === undefined ? 'GET' : 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    } catch (e) {
      if (signal.aborted && (signal.reason as { name?: string })?.name !== 'TimeoutError') throw e; // the caller's abort
      throw networkFailure(signal.aborted ? signal.reason : e, this.baseUrl, what);
    }
    this.instance = res.headers.get('x-ropewalk-instance');
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      throw httpFailure(res.status, text, { baseUrl: this.baseUrl, model, what, retryAfter: res.headers.get('retry-after') });
    }
    return res;
  }
}

/** A whole (non-streamed) JSON answer as the one event it amounts to, then `[DONE]`. */
export async function* wholeBody(res: Response): AsyncGenerator<string> {
  yield await res.text();
  yield '[DONE]';
}

/** The `data:` payloads of a Server-Sent Events body, in order (multi-line data joined by '\n'). */
export async function* serverSentData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const bytes of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    let cut: RegExpExecArray | null;
    while ((cut = /\r?\n\r?\n/.exec(buffer))) {
      const event = buffer.slice(0, cut.index);
      buffer = buffer.slice(cut.index + cut[0].length);
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''));
      if (data.length) yield data.join('\n');
    }
  }
}
