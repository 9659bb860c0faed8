/**
 * Tool calls on `/v1/chat/completions` (OpenAI's `tools`, `tool_choice`, `parallel_tool_calls`), in
 * the format the model's chat template writes (tool-formats.ts: Qwen/Hermes `<tool_call>`, Llama
 * 3.1+ JSON, Mistral `[TOOL_CALLS]` v3 and `name[ARGS]`, gpt-oss's harmony commentary messages). Pure: no I/O.
 *   - `toolFields(body, format)`: the tools go to the chat template (`tools`); `tool_choice:
 *     "none"` leaves them out; `"required"` or a named function opens the reply as the format
 *     opens a call and constrains the rest to one call of those tools whose arguments match their
 *     parameters' schema (json-schema.ts), so a call comes out whatever the weights prefer. A
 *     parameters schema the constraint does not cover is refused with 400 naming
 *     `tools[i].function.parameters`.
 *   - `parseToolCalls(text, mode)`: the reply → `{ content, calls }`, calls with fresh ids (9
 *     letters or digits for Mistral's templates); only calls to a declared tool with an object of
 *     arguments count (others stay content); without `parallel_tool_calls` only the first.
 */
import { UnsupportedSchemaError } from '../engine/errors.ts';
import type { GenerationRequest, ToolCall } from '../engine/generate/types.ts';
import { compileSchema } from '../engine/sampling/json-schema.ts';
import { ApiError } from './api-error.ts';
import { formatRules, type ToolFormat, type WrittenCall } from './tool-formats.ts';

/** The tool fields of a chat body, as openai-request.ts's schema checked them. */
interface ToolBody {
  tools?: { type: 'function'; function: { name: string; parameters?: Record<string, unknown> } }[] | null;
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
}

/** How a reply is read for calls: the format, the declared names, whether the call was forced, how many count. */
export interface ToolMode {
  format: ToolFormat;
  names: string[];
  forced: boolean;
  parallel: boolean;
  /** A remote engine's server reads the calls (the done event's `toolCalls`): nothing is parsed here. */
  relayed?: boolean;
}

/** The text that opens a forced call in the Qwen/Hermes format. */
export const TOOL_CALL_OPEN = formatRules('hermes').open;

/**
 * The request fields for `body`'s tools, and how to read the reply (null: no tools in play).
 * `format`: how the model's template writes calls (default hermes); `relayed`: a remote engine
 * answers, so the tools and the choice go to its server as they are (no prefix, no constraint here).
 * @throws ApiError 400: a named tool_choice that names no tool, a required one without tools, a
 *   parameters schema not covered, or response_format beside a forced call.
 */
export function toolFields(body: ToolBody & { response_format?: { type: string } | null | undefined }, format: ToolFormat = 'hermes', relayed = false): { fields: Pick<GenerationRequest, 'tools' | 'replyPrefix' | 'responseFormat' | 'toolChoice' | 'parallelToolCalls'>; mode: ToolMode | null } {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? 'auto';
  if (tools.length === 0) {
    if (choice !== 'none' && choice !== 'auto') throw new ApiError(400, 'invalid_request', 'tool_choice: there are no tools to call', 'tool_choice');
    return { fields: {}, mode: null };
  }
  if (choice === 'none') return { fields: {}, mode: null };
  const names = tools.map((t) => t.function.name);
  const mode: ToolMode = { format, names, forced: choice !== 'auto', parallel: body.parallel_tool_calls !== false, ...(relayed ? { relayed } : {}) };
  if (relayed) {
    if (typeof choice !== 'string' && !names.includes(choice.function.name)) throw new ApiError(400, 'invalid_request', `tool_choice.function.name: no tool is named ${JSON.stringify(choice.function.name).slice(0, 80)}`, 'tool_choice.function.name');
    const toolChoice = typeof choice === 'string' ? choice : { name: choice.function.name };
    return { fields: { tools, toolChoice, ...(typeof body.parallel_tool_calls === 'boolean' ? { parallelToolCalls: body.parallel_tool_calls } : {}) }, mode };
  }
  if (choice === 'auto') return { fields: { tools }, mode };
  const chosen = typeof choice === 'string' ? tools : tools.filter((t) => t.function.name === choice.function.name);
  if (chosen.length === 0) throw new ApiError(400, 'invalid_request', `tool_choice.function.name: no tool is named ${JSON.stringify(typeof choice === 'string' ? '' : choice.function.name).slice(0, 80)}`, 'tool_choice.function.name');
  if (body.response_format && body.response_format.type !== 'text') throw new ApiError(400, 'invalid_request', 'response_format: not with a required or named tool_choice (the call decides the format)', 'response_format');
  const checked = chosen.map((t) => {
    const i = tools.indexOf(t);
    const parameters = t.function.parameters ?? { type: 'object' };
    try {
      compileSchema(parameters);
    } catch (e) {
      if (e instanceof UnsupportedSchemaError) throw new ApiError(400, 'unsupported_parameter', `tools[${i}].function.parameters: ${e.message.replace(/^invalid response_format: /, '')}`, `tools[${i}].function.parameters`);
      throw e;
    }
    return { name: t.function.name, parameters };
  });
  const rules = formatRules(format);
  return { fields: { tools, ...(rules.open ? { replyPrefix: rules.open } : {}), responseFormat: rules.constrain(checked) }, mode };
}

/**
 * The reply's text and calls. A forced reply is read with the opening its prompt had; otherwise
 * calls are read where the format puts them, and the text outside them is the content (null when
 * only calls remain; the reply as it is when there are none).
 */
export function parseToolCalls(text: string, mode: ToolMode): { content: string | null; calls: ToolCall[] } {
  const rules = formatRules(mode.format);
  const accept = (c: WrittenCall): boolean => typeof c.name === 'string' && mode.names.includes(c.name) && typeof c.arguments === 'object' && c.arguments !== null && !Array.isArray(c.arguments);
  const read = rules.read(mode.forced ? rules.open + text + rules.close : text, accept);
  if (read.calls.length === 0) return { content: text, calls: [] };
  const calls = (mode.parallel ? read.calls : read.calls.slice(0, 1)).map((c) => ({ id: rules.newId(), name: c.name as string, arguments: JSON.stringify(c.arguments) }));
  const content = read.content.trim();
  return { content: content || null, calls };
}

/** A call as OpenAI's `message.tool_calls[i]`. */
export function toolCallJson(c: ToolCall): Record<string, unknown> {
  return { id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } };
}
