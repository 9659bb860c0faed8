/**
 * The OpenAI-compatible request bodies (`/v1/chat/completions`, `/v1/completions`) → the engine's
 * `GenerationRequest`. Pure: no I/O. Unset sampling fields take the app's settings.
 *
 * Accepted: model, messages (roles system, developer (= system), user, assistant (with
 * tool_calls), tool (with tool_call_id); content a string, null for an assistant, or text parts) / prompt (a string, or an array of one),
 * max_tokens, max_completion_tokens, temperature, top_p in [0, 1] (0 = only the most likely
 * token), top_k, min_p, repeat_penalty (llama.cpp's names), presence_penalty and
 * frequency_penalty in [−2, 2], seed (any safe integer; −1 = random), stop (≤ 16 strings),
 * ignore_eos (llama.cpp's), an assistant message's reasoning_content (its reasoning, which the
 * chat template gets where it reads it; vLLM's and llama.cpp's name), chat_template_kwargs
 * { enable_thinking, reasoning_effort } (vLLM's and llama.cpp's; other keys are refused),
 * reasoning_effort low / medium / high (OpenAI's; the chat template gets it where it reads it: gpt-oss's),
 * stream, stream_options.include_usage, n = 1, response_format { type: 'text' | 'json_object' } or
 * { type: 'json_schema', json_schema: { schema, strict?, name?, description? } } (constrained
 * decoding; the schema keywords covered are in main/engine/sampling/json-schema.ts, others are
 * refused naming the keyword, `param: "response_format"`), logprobs (chat: true/false with
 * top_logprobs 0–20; completions: 0–20 alternatives) from the raw logits,
 * and fields that change nothing here (user, metadata, store, service_tier, name).
 * tools / tool_choice / parallel_tool_calls on chat (tool-calls.ts).
 * Refused with 400 and `param` naming the field, never silently ignored: n > 1, functions,
 * function_call, logit_bias, audio, modalities other than text, prediction, echo,
 * suffix, best_of > 1, non-text content parts, token-id prompts.
 */
import { z } from 'zod';
import type { Settings } from '../contract/types.ts';
import { UnsupportedSchemaError } from '../engine/errors.ts';
import type { ChatMessage, GenerationRequest, ResponseFormat } from '../engine/generate/types.ts';
import { compileSchema } from '../engine/sampling/json-schema.ts';
import { MAX_TOP_LOGPROBS } from '../engine/sampling/logprobs.ts';
import { ApiError } from './api-error.ts';
import { toolFields, type ToolMode } from './tool-calls.ts';
import type { ToolFormat } from './tool-formats.ts';

export { ApiError } from './api-error.ts';


/**
 * A field's path as clients write it: `['messages', 0, 'content']` → `messages[0].content`; the
 * body itself (`[]`) → null. The one spelling of `param` for /v1 and /tokenize.
 */
export function fieldName(path: readonly PropertyKey[]): string | null {
  return path.reduce<string>((acc, k) => (typeof k === 'number' ? `${acc}[${k}]` : acc ? `${acc}.${String(k)}` : String(k)), '') || null;
}

/** A 400 `invalid_request` for the field at `path`: `param` names it and the message starts with it (`tokens[0]: …`). */
export function invalidField(path: readonly PropertyKey[], reason: string): ApiError {
  const param = fieldName(path);
  return new ApiError(400, 'invalid_request', `${param ?? 'body'}: ${reason}`, param);
}

/**
 * A 400 for a body that fails its schema: the first issue, with its field written as clients
 * write it (`messages[0].content`) and its most specific reason (of a union, the branch that
 * matched the value's type: "stop: Too big: expected array to have <=16 items", not "Invalid
 * input"). One rule for /v1 and /tokenize.
 */
function invalidBody(error: z.ZodError): ApiError {
  const { path, message } = specific(error.issues[0]);
  return invalidField(path, message);
}

/** An issue's path and message; a union's from its branch that is not a type mismatch, else the types it takes. */
function specific(issue: z.core.$ZodIssue): { path: PropertyKey[]; message: string } {
  if (issue.code === 'invalid_union') {
    const branches = issue.errors.flat();
    const closer = branches.find((b) => b.code !== 'invalid_type');
    if (closer) {
      const inner = specific(closer);
      return { path: [...issue.path, ...inner.path], message: inner.message };
    }
    const expected = [...new Set(branches.map((b) => (b.code === 'invalid_type' ? b.expected : null)).filter((x) => x !== null))];
    if (expected.length > 0) return { path: issue.path, message: `expected ${expected.join(' or ')}` };
  }
  return { path: issue.path, message: issue.message };
}

const textPart = z.object({ type: z.string(), text: z.string().optional() }).passthrough();
const message = z
  .object({
    role: z.string(),
    content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
    reasoning_content: z.string().nullish(),
  })
  .passthrough();

const sampling = {
  model: z.string().optional(),
  max_tokens: z.number().int().min(1).max(1 << 20).nullish(),
  temperature: z.number().min(0).max(100).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.number().int().min(0).max(1 << 20).nullish(),
  min_p: z.number().min(0).lt(1).nullish(),
  repeat_penalty: z.number().gt(0).max(10).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  seed: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(16)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).passthrough().nullish(),
  n: z.number().int().min(1).nullish(),
  ignore_eos: z.boolean().nullish(),
  // By `type`, so the error names what is wrong: an unknown type lists all three; `json_schema` without
  // its object says so (a plain union said "expected text or json_object" for both: a newcomer pass).
  response_format: z
    .discriminatedUnion('type', [
      z.object({ type: z.literal('text') }).passthrough(),
      z.object({ type: z.literal('json_object') }).passthrough(),
      z.object({ type: z.literal('json_schema'), json_schema: z.object({ schema: z.unknown().optional(), name: z.string().optional(), strict: z.boolean().nullish() }).passthrough() }).passthrough(),
    ])
    .nullish(),
};

/** One chat message as the API takes it (roles and content parts are checked by `chatMessages`). */
export const messageSchema = message;

const topLogprobs = z.number().int().min(0).max(MAX_TOP_LOGPROBS);
const toolFieldsSchema = {
  tools: z
    .array(z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1).max(64), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }).passthrough() }).passthrough())
    .nullish(),
  tool_choice: z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
};
const reasoningEffort = z.enum(['low', 'medium', 'high']);
const chatSchema = z
  .object({
    ...sampling,
    messages: z.array(message).min(1),
    max_completion_tokens: z.number().int().min(1).max(1 << 20).nullish(),
    chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional(), reasoning_effort: reasoningEffort.optional() }).strict().nullish(),
    reasoning_effort: reasoningEffort.nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: topLogprobs.nullish(),
    ...toolFieldsSchema,
  })
  .passthrough();
const completionSchema = z.object({ ...sampling, prompt: z.union([z.string(), z.array(z.unknown())]), logprobs: topLogprobs.nullish() }).passthrough();

export type ChatBody = z.infer<typeof chatSchema>;
export type CompletionBody = z.infer<typeof completionSchema>;

/** What a handler needs from a parsed body besides the generation request. */
export interface ParsedRequest {
  request: GenerationRequest;
  /** How to read the reply for tool calls (chat with tools in play), else null. */
  tools: ToolMode | null;
  model: string | undefined;
  stream: boolean;
  includeUsage: boolean;
}

/** Fields no client may rely on being ignored: present (and not their neutral value) → 400. */
const UNSUPPORTED: { field: string; neutral: (v: unknown) => boolean; why: string }[] = [
  { field: 'n', neutral: (v) => v === 1, why: 'only one choice per request is generated (n = 1)' },
  { field: 'best_of', neutral: (v) => v === 1, why: 'only one choice per request is generated (best_of = 1)' },
  { field: 'functions', neutral: (v) => Array.isArray(v) && v.length === 0, why: 'function calling is not supported' },
  { field: 'function_call', neutral: (v) => v === 'none', why: 'function calling is not supported' },
  { field: 'logit_bias', neutral: (v) => typeof v === 'object' && v !== null && Object.keys(v).length === 0, why: 'logit_bias is not supported' },
  { field: 'audio', neutral: () => false, why: 'audio output is not supported' },
  { field: 'modalities', neutral: (v) => Array.isArray(v) && v.every((m) => m === 'text'), why: 'only text output is supported' },
  { field: 'prediction', neutral: () => false, why: 'predicted outputs are not supported' },
  { field: 'echo', neutral: (v) => v === false, why: 'echo is not supported' },
  { field: 'suffix', neutral: (v) => v === '', why: 'suffix (fill-in-the-middle) is not supported' },
];

/** @throws ApiError 400 for the first unsupported field that is set (null counts as unset). */
function refuseUnsupported(body: Record<string, unknown>): void {
  for (const u of UNSUPPORTED) {
    const v = body[u.field];
    if (v === undefined || v === null || u.neutral(v)) continue;
    throw new ApiError(400, 'unsupported_parameter', `${u.field}: ${u.why}`, u.field);
  }
}

function parse<T extends z.ZodTypeAny>(schema: T, body: unknown): z.infer<T> {
  if (isJsonObject(body)) refuseUnsupported(body);
  return parseBody(schema, body);
}

/**
 * A JSON body by `schema`, one rule for /v1 and the tokenizer paths.
 * @throws ApiError 400 `invalid_request`: "the body must be a JSON object", or the first schema issue (invalidBody).
 */
export function parseBody<T extends z.ZodTypeAny>(schema: T, body: unknown): z.infer<T> {
  if (!isJsonObject(body)) throw new ApiError(400, 'invalid_request', 'the body must be a JSON object');
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalidBody(parsed.error);
  return parsed.data;
}

function isJsonObject(body: unknown): body is Record<string, unknown> {
  return typeof body === 'object' && body !== null && !Array.isArray(body);
}

/**
 * The chat messages as the engine takes them.
 * @throws ApiError 400 naming the message at fault (and for tool history, the field: a call's
 *   `arguments` that are not a JSON object, a tool message whose `tool_call_id` matches no call
 *   of an earlier assistant message).
 */
export function chatMessages(messages: ChatBody['messages']): ChatMessage[] {
  const out = messageList(messages);
  checkToolHistory(out);
  return out;
}

/**
 * Tool history a template can render: each call's arguments a JSON object (Llama's and Mistral's
 * templates print them with `tojson`; found in the tools pass: text that is not JSON reached the
 * model quoted, or failed in the template), each tool message answering a call made before it.
 * @throws ApiError 400 with `param` naming the field.
 */
function checkToolHistory(messages: ChatMessage[]): void {
  const ids = new Set<string>();
  messages.forEach((m, i) => {
    m.toolCalls?.forEach((c, j) => {
      let v: unknown;
      try {
        v = JSON.parse(c.arguments);
      } catch {
        v = undefined;
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ApiError(400, 'invalid_request', `messages[${i}].tool_calls[${j}].function.arguments: ${JSON.stringify(c.arguments.slice(0, 60))} is not a JSON object`, `messages[${i}].tool_calls[${j}].function.arguments`);
      ids.add(c.id);
    });
    if (m.role === 'tool' && !ids.has(m.toolCallId!)) throw new ApiError(400, 'invalid_request', `messages[${i}].tool_call_id: ${JSON.stringify(m.toolCallId!.slice(0, 60))} matches no tool call of an earlier assistant message`, `messages[${i}].tool_call_id`);
  });
}

function messageList(messages: ChatBody['messages']): ChatMessage[] {
  return messages.map((m, i) => {
    const role = m.role === 'developer' ? 'system' : m.role;
    if (role !== 'system' && role !== 'user' && role !== 'assistant' && role !== 'tool') {
      throw new ApiError(400, 'invalid_request', `messages[${i}].role: ${JSON.stringify(m.role).slice(0, 40)} is not supported (system, developer, user, assistant, tool)`, `messages[${i}].role`);
    }
    const extra = toolParts(m, i, role);
    if (m.content === null || m.content === undefined) {
      if (role !== 'assistant') throw new ApiError(400, 'invalid_request', `messages[${i}].content: only an assistant message may have no content`, `messages[${i}].content`);
      return { role, content: '', ...reasoningOf(m), ...extra };
    }
    if (typeof m.content === 'string') return { role, content: m.content, ...reasoningOf(m), ...extra };
    const text = m.content.map((part, j) => {
      if (part.type !== 'text' || typeof part.text !== 'string') {
        throw new ApiError(400, 'invalid_request', `messages[${i}].content[${j}]: only text content parts are supported, not ${JSON.stringify(part.type).slice(0, 40)}`, `messages[${i}].content[${j}].type`);
      }
      return part.text;
    });
    return { role, content: text.join(''), ...reasoningOf(m), ...extra };
  });
}

/** An assistant message's `reasoning_content` as the engine's `reasoning` (absent: none). */
function reasoningOf(m: ChatBody['messages'][number]): { reasoning?: string } {
  return m.role === 'assistant' && m.reasoning_content ? { reasoning: m.reasoning_content } : {};
}

const toolCallSchema = z.array(z.object({ id: z.string(), type: z.literal('function').optional(), function: z.object({ name: z.string(), arguments: z.string() }) }).passthrough());

/** An assistant message's `tool_calls` / a tool message's `tool_call_id`, as the engine takes them. @throws ApiError 400 naming the field. */
function toolParts(m: z.infer<typeof message>, i: number, role: string): Pick<ChatMessage, 'toolCalls' | 'toolCallId'> {
  const raw = m as Record<string, unknown>;
  if (role === 'tool') {
    if (typeof raw.tool_call_id !== 'string') throw new ApiError(400, 'invalid_request', `messages[${i}].tool_call_id: a tool message needs the id of the call it answers`, `messages[${i}].tool_call_id`);
    return { toolCallId: raw.tool_call_id };
  }
  if (role !== 'assistant' || raw.tool_calls === undefined || raw.tool_calls === null) return {};
  const calls = toolCallSchema.safeParse(raw.tool_calls);
  if (!calls.success) throw invalidBody(new z.ZodError(calls.error.issues.map((x) => ({ ...x, path: ['messages', i, 'tool_calls', ...x.path] }))));
  return { toolCalls: calls.data.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) };
}

/** Sampling and length fields over the app's settings. */
function generationFields(body: z.infer<z.ZodObject<typeof sampling>>, maxTokens: number | null | undefined, s: Settings): Omit<GenerationRequest, 'prompt' | 'messages'> {
  const seed = body.seed ?? s.seed;
  const presence = body.presence_penalty ?? 0;
  const frequency = body.frequency_penalty ?? 0;
  return {
    maxTokens: maxTokens ?? s.maxTokens,
    sampler: {
      temperature: body.temperature ?? s.temperature,
      topK: body.top_k ?? s.topK,
      topP: body.top_p ?? s.topP, // 0: the sampler keeps only the most likely token
      minP: body.min_p ?? s.minP,
      repetitionPenalty: body.repeat_penalty ?? s.repetitionPenalty,
      ...(presence ? { presencePenalty: presence } : {}),
      ...(frequency ? { frequencyPenalty: frequency } : {}),
      ...(seed !== null && seed !== -1 ? { seed } : {}),
    },
    ...(body.stop ? { stop: typeof body.stop === 'string' ? [body.stop] : body.stop } : {}),
    ...(body.ignore_eos ? { ignoreEos: true } : {}),
    ...responseFormat(body.response_format, body.stop),
  };
}

/**
 * `response_format` as the engine takes it; the schema is compiled here too, so what constrained
 * decoding does not cover is refused before the request queues.
 * `stop` strings are refused beside a JSON format: one would cut the JSON short and the reply would
 * still end with `stop` (found by a newcomer pass: `stop: ['"']` gave `{ ` as a finished answer).
 * @throws ApiError 400 `unsupported_parameter`, `param: "response_format"`, naming the keyword;
 *   400 `invalid_request`, `param: "stop"`, for stop strings with a JSON format.
 */
function responseFormat(f: z.infer<typeof sampling.response_format>, stop: unknown): { responseFormat?: ResponseFormat } {
  if (!f || f.type === 'text') return {};
  if (stop !== undefined && stop !== null && !(Array.isArray(stop) && stop.length === 0)) {
    throw new ApiError(400, 'invalid_request', 'stop: stop strings cannot be combined with a JSON response_format (a stop string would cut the JSON short); leave stop out', 'stop');
  }
  if (f.type === 'json_object') return { responseFormat: { type: 'json_object' } };
  const schema = (f as { json_schema: { schema?: unknown } }).json_schema.schema ?? {};
  try {
    compileSchema(schema);
  } catch (e) {
    if (e instanceof UnsupportedSchemaError) throw new ApiError(400, 'unsupported_parameter', e.message.replace(/^invalid response_format: /, 'response_format: '), 'response_format');
    throw e;
  }
  return { responseFormat: { type: 'json_schema', schema } };
}

const EMPTY_PROMPT = 'the prompt is empty; give some text';

/**
 * A `/v1/chat/completions` body; `model`: the loaded model's tool format (default hermes), and
 * whether it is remote (then tools and tool_choice are relayed to its server as they are).
 * @throws ApiError 400 with `param` (every message empty: the last one's content). */
export function parseChatRequest(body: unknown, s: Settings, model?: { toolFormat?: ToolFormat; remote?: unknown } | null): ParsedRequest {
  const b = parse(chatSchema, body);
  const messages = chatMessages(b.messages);
  if (b.top_logprobs != null && b.logprobs !== true) throw invalidField(['top_logprobs'], 'needs logprobs: true');
  const tools = toolFields(b, model?.toolFormat, model?.remote !== undefined);
  // The engine refuses it too, but without the field: named here, the last message's content.
  if (messages.every((m) => m.content === '')) throw invalidField(['messages', messages.length - 1, 'content'], EMPTY_PROMPT);
  return {
    request: {
      messages,
      ...generationFields(b, b.max_completion_tokens ?? b.max_tokens, s),
      ...(typeof b.chat_template_kwargs?.enable_thinking === 'boolean' ? { enableThinking: b.chat_template_kwargs.enable_thinking } : {}),
      ...((b.reasoning_effort ?? b.chat_template_kwargs?.reasoning_effort) ? { reasoningEffort: (b.reasoning_effort ?? b.chat_template_kwargs?.reasoning_effort)! } : {}),
      ...(b.logprobs ? { logprobs: b.top_logprobs ?? 0 } : {}),
      ...tools.fields,
    },
    tools: tools.mode,
    model: b.model,
    stream: b.stream === true,
    includeUsage: b.stream_options?.include_usage === true,
  };
}

/** A `/v1/completions` body (a raw prompt, for base models). @throws ApiError 400 with `param` (an empty prompt: `prompt`). */
export function parseCompletionRequest(body: unknown, s: Settings): ParsedRequest {
  const b = parse(completionSchema, body);
  let prompt = b.prompt;
  if (Array.isArray(prompt)) {
    if (prompt.length !== 1 || typeof prompt[0] !== 'string') throw new ApiError(400, 'invalid_request', 'prompt: give one string (several prompts and token-id prompts are not supported)', 'prompt');
    prompt = prompt[0];
  }
  if (prompt === '') throw invalidField(['prompt'], EMPTY_PROMPT);
  return {
    request: { prompt: prompt as string, ...generationFields(b, b.max_tokens, s), ...(b.logprobs != null ? { logprobs: b.logprobs } : {}) },
    tools: null,
    model: b.model,
    stream: b.stream === true,
    includeUsage: b.stream_options?.include_usage === true,
  };
}
