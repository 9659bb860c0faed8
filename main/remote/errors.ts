/**
 * Failures of a remote engine (an OpenAI-compatible server: vLLM, llama.cpp's server, Ollama, TGI,
 * another Ropewalk), as one error class with a `kind` and a sentence that says what to do. They
 * are EngineErrors with code 'REMOTE', so they cross the router like any engine error. The API
 * key never appears in a message.
 */
import { EngineError } from '../engine/errors.ts';

export type RemoteFailure =
  /** 401/403: the key is missing or wrong. */
  | 'auth'
  /** 404 naming the model, or a model id the server does not list. */
  | 'model'
  /** 404 for an endpoint: the base URL is wrong. */
  | 'endpoint'
  | 'rate-limit'
  /** 5xx, or an error object inside the stream. */
  | 'server'
  /** 400/422: the server refused the request (e.g. over its context length). */
  | 'refused'
  /** Connection refused, host not found, timeout. */
  | 'unreachable'
  /** The stream ended before the answer did. */
  | 'stream-cut'
  /** Not JSON, or JSON of the wrong shape. */
  | 'bad-response'
  /** A base URL or tokenizer file that cannot be used. */
  | 'config';

/** A remote engine's failure: `kind` for programs, `status` (HTTP, when there was one), one sentence for people. */
export class RemoteEngineError extends EngineError {
  constructor(
    readonly kind: RemoteFailure,
    message: string,
    readonly status: number | null = null,
    options?: { cause?: unknown },
  ) {
    super('REMOTE', message, options);
  }
}

/**
 * The error for an HTTP error response. `what` names the request ("listing its models"); `body`
 * is the response text (its `error.message` or `detail` is quoted, cut to 200 characters).
 */
export function httpFailure(status: number, body: string, ctx: { baseUrl: string; model: string | null; what: string; retryAfter: string | null }): RemoteEngineError {
  const said = serverMessage(body);
  const quote = said ? `: ${said}` : '';
  if (status === 401 || status === 403) {
    return new RemoteEngineError('auth', `the remote engine at ${ctx.baseUrl} refused the API key while ${ctx.what} (HTTP ${status}${quote}); enter the right key in the model panel`, status);
  }
  if (status === 404) {
    if (ctx.model !== null && /model/i.test(said)) {
      return new RemoteEngineError('model', `the remote engine at ${ctx.baseUrl} has no model ${JSON.stringify(ctx.model)} (HTTP 404${quote}); pick one of its models in the model panel`, status);
    }
    return new RemoteEngineError('endpoint', `the remote engine at ${ctx.baseUrl} has no endpoint for ${ctx.what} (HTTP 404); check the base URL (it usually ends in /v1)`, status);
  }
  if (status === 429) {
    const wait = ctx.retryAfter && /^\d+$/.test(ctx.retryAfter) ? `wait ${ctx.retryAfter} s` : 'wait a little';
    return new RemoteEngineError('rate-limit', `the remote engine at ${ctx.baseUrl} is limiting requests (HTTP 429${quote}); ${wait} and send again`, status);
  }
  if (status >= 500) {
    return new RemoteEngineError('server', `the remote engine at ${ctx.baseUrl} failed while ${ctx.what} (HTTP ${status}${quote}); try again, or look at the server's log`, status);
  }
  return new RemoteEngineError('refused', `the remote engine at ${ctx.baseUrl} refused ${ctx.what} (HTTP ${status}${quote})`, status);
}

/** The error for a request that got no response at all. */
export function networkFailure(e: unknown, baseUrl: string, what: string): RemoteEngineError {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? (e as { name?: string }).name ?? '';
  const why =
    code === 'ECONNREFUSED' ? 'connection refused: is the server running, on that port?'
    : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? 'host not found: check the base URL'
    : code === 'TimeoutError' || code === 'UND_ERR_CONNECT_TIMEOUT' ? 'no answer in time: is the server up and reachable?'
    : `${cause?.message ?? (e instanceof Error ? e.message : String(e))}`;
  return new RemoteEngineError('unreachable', `cannot reach the remote engine at ${baseUrl} while ${what} (${why})`, null, { cause: e });
}

/** An error response's own message (OpenAI `error.message`, vLLM/FastAPI `detail`, llama.cpp `error.message`), one line, ≤ 200 chars. */
function serverMessage(body: string): string {
  let text = body;
  try {
    const j = JSON.parse(body) as { error?: { message?: unknown } | string; detail?: unknown; message?: unknown };
    const m = typeof j.error === 'object' ? j.error?.message : (j.error ?? j.detail ?? j.message);
    if (typeof m === 'string') text = m;
    else if (m !== undefined) text = JSON.stringify(m);
  } catch {
    // not JSON: the text itself
  }
  return text.split('\n')[0].trim().slice(0, 200);
}
