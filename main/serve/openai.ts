/**
 * OpenAI-compatible endpoints of `serve` mode, so other tools can use the loaded model:
 *   GET  /v1/models             → { object: 'list', data: [{ id, object: 'model', created, owned_by }] }
 *   POST /v1/chat/completions   → a `chat.completion`, or with `stream: true` Server-Sent Events of
 *                                 `chat.completion.chunk`s ending with `data: [DONE]`.
 * Unset sampling fields take the app's settings. Generation shares the app's one-answer-at-a-time
 * claim (busy → 429). Errors are `{ error: { message, type, code } }`. A POST must be
 * `application/json` (a page elsewhere cannot send that without a CORS preflight, which is never
 * granted). A client that disconnects cancels its generation.
 */
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { z } from 'zod';
import type { FinishReason, GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';
import { toRouterError } from '../router.ts';
import type { CompletionBackend } from '../services/index.ts';

export type { CompletionBackend };

const MAX_BODY_BYTES = 8 << 20;

const content = z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }).passthrough())]);
const chatRequestSchema = z
  .object({
    model: z.string().optional(),
    messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant']), content }).passthrough()).min(1),
    max_tokens: z.number().int().min(1).max(1 << 20).nullish(),
    max_completion_tokens: z.number().int().min(1).max(1 << 20).nullish(),
    temperature: z.number().min(0).max(100).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    seed: z.number().int().min(0).max(2 ** 32 - 1).nullish(),
    stop: z.union([z.string(), z.array(z.string()).max(16)]).nullish(),
    stream: z.boolean().nullish(),
  })
  .passthrough();

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Handles a request under /v1/. Never throws: every failure becomes a JSON error response. */
export async function handleOpenAi(req: http.IncomingMessage, res: http.ServerResponse, backend: CompletionBackend): Promise<void> {
  try {
    const pathname = (req.url ?? '').split('?')[0];
    if (pathname === '/v1/models') {
      if (req.method !== 'GET') throw new ApiError(405, 'method_not_allowed', 'use GET');
      const m = backend.model();
      return json(res, 200, { object: 'list', data: m ? [{ id: m.name, object: 'model', created: 0, owned_by: 'ropewalk' }] : [] });
    }
    if (pathname === '/v1/chat/completions') {
      if (req.method !== 'POST') throw new ApiError(405, 'method_not_allowed', 'use POST');
      return await chatCompletions(req, res, backend);
    }
    throw new ApiError(404, 'not_found', `no endpoint ${pathname.slice(0, 100)}`);
  } catch (e) {
    if (res.headersSent) return void res.end();
    const err = e instanceof ApiError ? e : fromServiceError(e);
    json(res, err.status, { error: { message: err.message, type: err.status >= 500 ? 'server_error' : 'invalid_request_error', code: err.code } });
  }
}

async function chatCompletions(req: http.IncomingMessage, res: http.ServerResponse, backend: CompletionBackend): Promise<void> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw new ApiError(415, 'unsupported_media_type', 'the body must be application/json');
  const parsed = chatRequestSchema.safeParse(await readJson(req));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ApiError(400, 'invalid_request', `${issue.path.join('.') || 'body'}: ${issue.message}`);
  }
  const body = parsed.data;
  const info = backend.model();
  if (!info) throw new ApiError(503, 'model_not_ready', 'no model is loaded yet');
  if (body.model && body.model !== info.name) throw new ApiError(404, 'model_not_found', `the loaded model is ${info.name}, not ${body.model}`);
  const s = backend.settings();
  const seed = body.seed ?? s.seed;
  const request: GenerationRequest = {
    messages: body.messages.map((m) => ({ role: m.role, content: typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('') })),
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? s.maxTokens,
    sampler: {
      temperature: body.temperature ?? s.temperature,
      topK: s.topK,
      topP: body.top_p ?? s.topP,
      minP: s.minP,
      repetitionPenalty: s.repetitionPenalty,
      ...(seed !== null ? { seed } : {}),
    },
    ...(body.stop ? { stop: typeof body.stop === 'string' ? [body.stop] : body.stop } : {}),
  };

  const ac = new AbortController();
  res.on('close', () => ac.abort()); // the client went away (or the response ended: harmless)
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const events = backend.complete(request, ac.signal);
  // The first event (or the error refusing the request) decides between a JSON error and a 200.
  let first = await events.next();

  if (!body.stream) {
    let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
    for (; !first.done; first = await events.next()) if (first.value.type === 'done') done = first.value;
    if (!done) throw new ApiError(500, 'no_result', 'the generation ended without a result');
    if (done.reason === 'error') throw new ApiError(500, done.error?.code ?? 'generation_error', done.error?.message ?? 'the generation failed');
    return json(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model: info.name,
      choices: [{ index: 0, message: { role: 'assistant', content: done.text }, finish_reason: finishReason(done.reason) }],
      usage: { prompt_tokens: done.stats.promptTokens, completion_tokens: done.stats.generatedTokens, total_tokens: done.stats.promptTokens + done.stats.generatedTokens },
    });
  }

  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
  const chunk = (delta: Record<string, string>, finish: string | null) =>
    res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: info.name, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  chunk({ role: 'assistant', content: '' }, null);
  try {
    for (; !first.done; first = await events.next()) {
      const ev = first.value;
      if (ev.type === 'token' && ev.text) chunk({ content: ev.text }, null);
      else if (ev.type === 'done') {
        if (ev.reason === 'error') res.write(`data: ${JSON.stringify({ error: { message: ev.error?.message ?? 'the generation failed', type: 'server_error', code: ev.error?.code ?? 'generation_error' } })}\n\n`);
        else chunk({}, finishReason(ev.reason));
      }
    }
  } catch (e) {
    const err = fromServiceError(e);
    res.write(`data: ${JSON.stringify({ error: { message: err.message, type: 'server_error', code: err.code } })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

function finishReason(r: FinishReason): string {
  return r === 'length' || r === 'context-full' ? 'length' : 'stop';
}

function fromServiceError(e: unknown): ApiError {
  const r = toRouterError(e);
  const status: Record<string, number> = { BUSY: 429, MODEL_NOT_READY: 503, SHUT_DOWN: 503, INVALID_OPTION: 400, CONTEXT_OVERFLOW: 400, TOKENIZER: 400, INVALID_REQUEST: 400 };
  const code = r.code === 'CONTEXT_OVERFLOW' ? 'context_length_exceeded' : r.code.toLowerCase();
  return new ApiError(status[r.code] ?? 500, code, r.message);
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
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

function json(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)), 'X-Content-Type-Options': 'nosniff' });
  res.end(body);
}
