/**
 * OpenAI-compatible endpoints, so other tools can use the loaded model (base URL
 * `http://127.0.0.1:PORT/v1`, or `localhost`):
 *   GET  /v1/models, /v1/models/{id}  → the loaded model
 *   POST /v1/chat/completions        → a `chat.completion`, or with `stream: true` Server-Sent
 *                                      Events of `chat.completion.chunk`s, then `data: [DONE]`
 *   POST /v1/completions             → a `text_completion` for a raw prompt (streamed the same way)
 * With `stream_options.include_usage`, a last chunk with `choices: []` and `usage` comes before
 * `[DONE]`. A reasoning model's thinking is apart from the answer, as vLLM and llama.cpp's server
 * return it: `message.reasoning_content` / `delta.reasoning_content` (absent without any),
 * `content` the answer only, `usage.completion_tokens_details.reasoning_tokens`. Requests wait their turn in the engine's queue, shared with the window (past its
 * bound: 503 with Retry-After); a client that disconnects, queued or answered, is dropped.
 * Errors are `{ error: { message, type, param, code } }`; what the fields mean and which are
 * refused is in openai-request.ts. A POST must be `application/json` (a page elsewhere cannot send
 * that without a CORS preflight, granted only to `--cors ORIGIN`).
 */
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { ModelInfo } from '../contract/types.ts';
import { EngineError } from '../engine/errors.ts';
import type { ReplyPart } from '../engine/generate/reasoning.ts';
import type { FinishReason, GenerationEvent } from '../engine/generate/types.ts';
import type { TokenLogprob, TokenLogprobEntry } from '../engine/sampling/logprobs.ts';
import { firstLine, ServiceError } from '../services/errors.ts';
import type { CompletionBackend } from '../services/index.ts';
import { ApiError, parseChatRequest, parseCompletionRequest, type ParsedRequest } from './openai-request.ts';
import { parseToolCalls, toolCallJson, type ToolMode } from './tool-calls.ts';
import { ToolCallStream, type ToolStreamDelta } from './tool-stream.ts';

export type { CompletionBackend };

const MAX_BODY_BYTES = 8 << 20;

type DoneEvent = Extract<GenerationEvent, { type: 'done' }>;

/** How the two generation endpoints differ: body parsing, object names, and where the text goes. */
interface Endpoint {
  /** The request field a context overflow is blamed on. */
  promptParam: 'messages' | 'prompt';
  idPrefix: string;
  object: string;
  chunkObject: string;
  parse: typeof parseChatRequest;
  /** The `choices[0]` of a whole answer (`reasoning` '' when none). */
  choice(text: string, finish: string, reasoning: string, logprobs?: unknown): Record<string, unknown>;
  /** The `choices[0]` of a chunk; `text` null for the opening chunk; `part` where the text goes. */
  chunkChoice(text: string | null, finish: string | null, part?: ReplyPart, logprobs?: unknown): Record<string, unknown>;
  /** Tokens' log-probabilities in this endpoint's shape; `offset`: characters of the answer before the first. */
  logprobs(entries: TokenLogprob[], offset: number): unknown;
}

const CHAT: Endpoint = {
  promptParam: 'messages',
  idPrefix: 'chatcmpl-',
  object: 'chat.completion',
  chunkObject: 'chat.completion.chunk',
  parse: parseChatRequest,
  choice: (text, finish, reasoning, logprobs = null) => ({ index: 0, message: { role: 'assistant', content: text, ...(reasoning ? { reasoning_content: reasoning } : {}) }, logprobs, finish_reason: finish }),
  chunkChoice: (text, finish, part = 'content', logprobs = null) => ({ index: 0, delta: text === null ? { role: 'assistant', content: '' } : finish ? {} : part === 'reasoning' ? { reasoning_content: text } : { content: text }, logprobs, finish_reason: finish }),
  // OpenAI's chat shape: { content: [{ token, logprob, bytes, top_logprobs: [{ token, logprob, bytes }] }] }.
  logprobs: (entries) => ({ content: entries.map((e) => ({ ...entryJson(e), top_logprobs: e.top.map(entryJson) })), refusal: null }),
};

const COMPLETION: Endpoint = {
  promptParam: 'prompt',
  idPrefix: 'cmpl-',
  object: 'text_completion',
  chunkObject: 'text_completion',
  parse: parseCompletionRequest,
  // A raw prompt's reply is all content (the engine splits chat replies only).
  choice: (text, finish, _reasoning, logprobs = null) => ({ index: 0, text, logprobs, finish_reason: finish }),
  chunkChoice: (text, finish, _part, logprobs = null) => ({ index: 0, text: text ?? '', logprobs, finish_reason: finish }),
  // The legacy shape: parallel lists, alternatives as { token: logprob }, character offsets.
  logprobs: (entries, offset) => {
    const text_offset: number[] = [];
    for (const e of entries) {
      text_offset.push(offset);
      offset += e.token.length;
    }
    return {
      tokens: entries.map((e) => e.token),
      token_logprobs: entries.map((e) => e.logprob),
      top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [t.token, t.logprob]))),
      text_offset,
    };
  },
};

function entryJson(e: TokenLogprobEntry): { token: string; logprob: number; bytes: number[] } {
  return { token: e.token, logprob: e.logprob, bytes: e.bytes };
}

/** Handles a request under /v1/. Never throws: every failure becomes a JSON error response. */
export async function handleOpenAi(req: http.IncomingMessage, res: http.ServerResponse, backend: CompletionBackend): Promise<void> {
  try {
    const pathname = (req.url ?? '').split('?')[0];
    if (pathname === '/v1/models' || pathname.startsWith('/v1/models/')) {
      if (req.method !== 'GET') throw new ApiError(405, 'method_not_allowed', 'use GET');
      const m = backend.model();
      if (pathname === '/v1/models') return json(res, 200, { object: 'list', data: m ? [modelObject(m)] : [] });
      const id = decodeURIComponent(pathname.slice('/v1/models/'.length));
      if (!m || m.name !== id) throw new ApiError(404, 'model_not_found', `no model ${JSON.stringify(id.slice(0, 100))}${m ? `; the loaded model is ${m.name}` : ''}`, 'model');
      return json(res, 200, modelObject(m));
    }
    const endpoint = pathname === '/v1/chat/completions' ? CHAT : pathname === '/v1/completions' ? COMPLETION : null;
    if (!endpoint) throw new ApiError(404, 'not_found', `no endpoint ${pathname.slice(0, 100)}`);
    if (req.method !== 'POST') throw new ApiError(405, 'method_not_allowed', 'use POST');
    return await generate(req, res, backend, endpoint);
  } catch (e) {
    answerError(res, e, 'messages');
  }
}

/**
 * Answers a handler's failure as the API's JSON error (`toApiError`; an overflow blamed on
 * `promptParam`), or ends the response when one has already begun.
 */
export function answerError(res: http.ServerResponse, e: unknown, promptParam: string): void {
  if (res.headersSent || res.destroyed) return void res.end();
  sendError(res, toApiError(e, promptParam));
}

/** A JSON error response in OpenAI's shape. */
export function sendError(res: http.ServerResponse, err: ApiError): void {
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  json(res, err.status, errorJson(err));
}

/** The body of every API error: `{ error: { message, type, param, code } }` (OpenAI's shape). */
export function errorJson(err: ApiError): { error: { message: string; type: string; param: string | null; code: string } } {
  return { error: { message: err.message, type: err.status >= 500 ? 'server_error' : 'invalid_request_error', param: err.param, code: err.code } };
}

/**
 * The loaded model, which a request's `model` (when given, non-empty) must name: one rule for /v1
 * and the tokenizer paths.
 * @throws ApiError 503 `model_not_ready` (none loaded), 404 `model_not_found` (another `model`, quoted up to 100 characters).
 */
export function loadedModel(backend: CompletionBackend, model: string | undefined): ModelInfo {
  const info = backend.model();
  if (!info) throw new ApiError(503, 'model_not_ready', 'no model is loaded yet', null, { 'Retry-After': '1' });
  if (model && model !== info.name) throw new ApiError(404, 'model_not_found', `the loaded model is ${info.name}, not ${model.slice(0, 100)}`, 'model');
  return info;
}

/** A model as `/v1/models` lists it; `max_model_len` as vLLM says it (the max context), so another Ropewalk knows the bound. */
function modelObject(m: ModelInfo): Record<string, unknown> {
  return { id: m.name, object: 'model', created: 0, owned_by: 'ropewalk', max_model_len: m.maxContext };
}

async function generate(req: http.IncomingMessage, res: http.ServerResponse, backend: CompletionBackend, endpoint: Endpoint): Promise<void> {
  const parsed = endpoint.parse(await readJson(req), backend.settings(), backend.model());
  const info = loadedModel(backend, parsed.model);
  if (parsed.request.tools?.length && !info.hasChatTemplate) throw new ApiError(400, 'unsupported_parameter', `tools: ${info.name} has no chat template to give tools to`, 'tools');

  const ac = new AbortController();
  res.on('close', () => ac.abort()); // the client went away (or the response ended: harmless)
  const events = backend.complete(parsed.request, ac.signal);
  const meta = { id: `${endpoint.idPrefix}${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: info.name };
  // The first event (or the error refusing the request) decides between a JSON error and a 200.
  let first: IteratorResult<GenerationEvent>;
  try {
    first = await events.next();
  } catch (e) {
    throw toApiError(e, endpoint.promptParam);
  }
  if (ac.signal.aborted) return; // the client left while it waited
  if (!parsed.stream) return answerWhole(res, events, first, endpoint, meta, parsed.tools);
  return answerStreamed(res, events, first, endpoint, meta, parsed);
}

async function answerWhole(res: http.ServerResponse, events: AsyncGenerator<GenerationEvent>, first: IteratorResult<GenerationEvent>, endpoint: Endpoint, meta: Record<string, unknown>, tools: ToolMode | null): Promise<void> {
  let done: DoneEvent | null = null;
  for (let it = first; !it.done; it = await events.next()) if (it.value.type === 'done') done = it.value;
  if (!done) throw new ApiError(500, 'no_result', 'the generation ended without a result');
  if (done.reason === 'error') throw new ApiError(500, done.error?.code.toLowerCase() ?? 'generation_error', done.error?.message ?? 'the generation failed');
  const logprobs = done.logprobs ? endpoint.logprobs(done.logprobs, 0) : null;
  const choice = endpoint.choice(done.text, finishReason(done.reason), done.reasoning, logprobs);
  if (tools) {
    const { content, calls } = tools.relayed ? { content: done.text || null, calls: done.toolCalls ?? [] } : parseToolCalls(done.text, tools);
    if (calls.length > 0) Object.assign(choice, { message: { role: 'assistant', content, ...(done.reasoning ? { reasoning_content: done.reasoning } : {}), tool_calls: calls.map(toolCallJson) }, finish_reason: 'tool_calls' });
  }
  json(res, 200, { ...meta, object: endpoint.object, choices: [choice], usage: usage(done) });
}

async function answerStreamed(
  res: http.ServerResponse,
  events: AsyncGenerator<GenerationEvent>,
  first: IteratorResult<GenerationEvent>,
  endpoint: Endpoint,
  meta: Record<string, unknown>,
  parsed: ParsedRequest,
): Promise<void> {
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
  const send = (value: unknown) => res.write(`data: ${JSON.stringify(value)}\n\n`);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => send({ ...meta, object: endpoint.chunkObject, choices, ...(parsed.includeUsage ? { usage: null } : {}), ...extra });
  if (endpoint === CHAT) chunk([endpoint.chunkChoice(null, null)]);
  // Log-probabilities of tokens whose text is still held (a split character, a possible stop string) go with the next text.
  let pending: TokenLogprob[] = [];
  let sentChars = 0;
  const takeLogprobs = (): unknown => {
    if (pending.length === 0) return null;
    const out = endpoint.logprobs(pending, sentChars);
    sentChars += pending.reduce((n, e) => n + e.token.length, 0);
    pending = [];
    return out;
  };
  // With tools in play, content goes through the call reader: calls go out as tool_calls deltas.
  const calls = parsed.tools && !parsed.tools.relayed ? new ToolCallStream(parsed.tools) : null;
  let relayedDeltas = false;
  const sendCalls = (deltas: ToolStreamDelta[]) => {
    for (const d of deltas) {
      if (d.type === 'content') chunk([endpoint.chunkChoice(d.text, null, 'content', takeLogprobs())]);
      else chunk([{ index: 0, delta: { tool_calls: [toolCallDelta(d)] }, logprobs: takeLogprobs(), finish_reason: null }]);
    }
  };
  try {
    for (let it = first; !it.done; it = await events.next()) {
      const ev = it.value;
      if (ev.type === 'token' && ev.logprob) pending.push(ev.logprob);
      if (ev.type === 'token' && ev.toolCall) {
        // A remote engine's server streamed it: relayed as it came (the id and name once, then fragments).
        const { index, id, name, arguments: args } = ev.toolCall;
        relayedDeltas = true;
        chunk([{ index: 0, delta: { tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args ?? '' } }] }, logprobs: null, finish_reason: null }]);
      } else if (ev.type === 'token' && ev.text && calls && ev.part === 'content') sendCalls(calls.push(ev.text));
      else if (ev.type === 'token' && ev.text) chunk([endpoint.chunkChoice(ev.text, null, ev.part, takeLogprobs())]);
      else if (ev.type === 'done' && ev.reason === 'error') send(errorJson(new ApiError(500, ev.error?.code.toLowerCase() ?? 'generation_error', ev.error?.message ?? 'the generation failed')));
      else if (ev.type === 'done') {
        if (calls) sendCalls(calls.finish().deltas);
        // A remote engine's calls not streamed as deltas (none came) are sent whole from its done event.
        const relayed = ev.toolCalls ?? [];
        if (!relayedDeltas) relayed.forEach((c, index) => sendCalls([{ type: 'call', index, id: c.id, name: c.name }, { type: 'arguments', index, text: c.arguments }]));
        chunk([endpoint.chunkChoice('', calls?.callCount || relayed.length ? 'tool_calls' : finishReason(ev.reason), 'content', takeLogprobs())]);
        if (parsed.includeUsage) chunk([], { usage: usage(ev) });
      }
    }
  } catch (e) {
    send(errorJson(toApiError(e, endpoint.promptParam)));
  }
  res.end('data: [DONE]\n\n');
}

/** A call's delta as OpenAI streams it: its opening (index, id, type, name, empty arguments), or an arguments fragment. */
function toolCallDelta(d: Exclude<ToolStreamDelta, { type: 'content' }>): Record<string, unknown> {
  if (d.type === 'call') return { index: d.index, id: d.id, type: 'function', function: { name: d.name, arguments: '' } };
  return { index: d.index, function: { arguments: d.text } };
}

/** Token counts of what the model was fed and generated (prompt + completion ≤ the max context; completion includes the reasoning). */
function usage(done: DoneEvent): Record<string, unknown> {
  const { promptTokens, generatedTokens, reasoningTokens } = done.stats;
  return { prompt_tokens: promptTokens, completion_tokens: generatedTokens, total_tokens: promptTokens + generatedTokens, completion_tokens_details: { reasoning_tokens: reasoningTokens } };
}

function finishReason(r: FinishReason): string {
  return r === 'length' || r === 'context-full' ? 'length' : 'stop';
}

/** A service's or the engine's error as the API answers it. */
function toApiError(e: unknown, promptParam: string): ApiError {
  if (e instanceof ApiError) return e;
  // Engine errors cross the worker boundary as EngineError with their code (not their subclass).
  if (e instanceof EngineError && e.code === 'CONTEXT_OVERFLOW') return new ApiError(400, 'context_length_exceeded', e.message, promptParam);
  if (e instanceof ServiceError) {
    if (e.code === 'QUEUE_FULL') return new ApiError(503, 'queue_full', e.message, null, { 'Retry-After': '1' });
    if (e.code === 'MODEL_NOT_READY' || e.code === 'SHUT_DOWN') return new ApiError(503, e.code.toLowerCase(), e.message, null, { 'Retry-After': '1' });
    if (e.code === 'BUSY') return new ApiError(503, 'busy', e.message, null, { 'Retry-After': '1' });
    return new ApiError(400, e.code.toLowerCase(), e.message);
  }
  if (e instanceof EngineError && e.code === 'REMOTE') return new ApiError(502, 'remote_engine', e.message);
  if (e instanceof EngineError) {
    const status = e.code === 'INVALID_OPTION' || e.code === 'TOKENIZER' || e.code === 'CANCELLED' ? 400 : 500;
    return new ApiError(status, e.code.toLowerCase(), e.message);
  }
  return new ApiError(500, 'internal', firstLine(e));
}

/**
 * A POST's JSON body (at most MAX_BODY_BYTES), for /v1 and the tokenizer paths.
 * @throws ApiError 415 when it is not `application/json` (a page elsewhere cannot send that
 *   without a CORS preflight), 413 when too large, 400 `invalid_json`.
 */
export async function readJson(req: http.IncomingMessage): Promise<unknown> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw new ApiError(415, 'unsupported_media_type', 'the body must be application/json');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, 'body_too_large', `the body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new ApiError(400, 'invalid_json', 'the body is not valid JSON');
  }
}

export function json(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)), 'X-Content-Type-Options': 'nosniff' });
  res.end(body);
}
