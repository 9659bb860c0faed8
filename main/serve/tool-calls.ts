/**
 * Tool calls on `/v1/chat/completions` (OpenAI's `tools`, `tool_choice`, `parallel_tool_calls`),
 * for chat templates that write calls as Qwen2.5 / Qwen3 / Hermes do:
 * `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`. Pure: no I/O.
 *   - `toolFields(body)`: the tools go to the chat template (`tools`); `tool_choice: "none"`
 *     leaves them out; `"required"` or a named function opens the reply with `<tool_call>\n` and
 *     constrains the rest to `{"name": <a tool's name>, "arguments": <its parameters' schema>}`
 *     (json-schema.ts), so a call comes out whatever the weights prefer. A parameters schema the
 *     constraint does not cover is refused with 400 naming `tools[i].function.parameters`.
 *   - `parseToolCalls(text, mode)`: the reply → `{ content, calls }`, calls with fresh ids; only
 *     calls to a declared tool with an object of arguments count; without
 *     `parallel_tool_calls` only the first.
 */
import { randomUUID } from 'node:crypto';
import { UnsupportedSchemaError } from '../engine/errors.ts';
import type { GenerationRequest, ToolCall } from '../engine/generate/types.ts';
import { compileSchema } from '../engine/sampling/json-schema.ts';
import { ApiError } from './api-error.ts';

/** The tool fields of a chat body, as openai-request.ts's schema checked them. */
interface ToolBody {
  tools?: { type: 'function'; function: { name: string; parameters?: Record<string, unknown> } }[] | null;
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
}

/** How a reply is read for calls: the declared names, whether the call was forced, how many count. */
export interface ToolMode {
  names: string[];
  forced: boolean;
  parallel: boolean;
}

/** The text that opens a forced call (what the template's instructions ask the model to write). */
export const TOOL_CALL_OPEN = '<tool_call>\n';

/**
 * The request fields for `body`'s tools, and how to read the reply (null: no tools in play).
 * @throws ApiError 400: a named tool_choice that names no tool, a required one without tools, a
 *   parameters schema not covered, or response_format beside a forced call.
 */
export function toolFields(body: ToolBody & { response_format?: { type: string } | null | undefined }): { fields: Pick<GenerationRequest, 'tools' | 'replyPrefix' | 'responseFormat'>; mode: ToolMode | null } {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? 'auto';
  if (tools.length === 0) {
    if (choice !== 'none' && choice !== 'auto') throw new ApiError(400, 'invalid_request', 'tool_choice: there are no tools to call', 'tool_choice');
    return { fields: {}, mode: null };
  }
  if (choice === 'none') return { fields: {}, mode: null };
  const names = tools.map((t) => t.function.name);
  const mode: ToolMode = { names, forced: choice !== 'auto', parallel: body.parallel_tool_calls !== false };
  if (choice === 'auto') return { fields: { tools }, mode };
  const chosen = typeof choice === 'string' ? tools : tools.filter((t) => t.function.name === choice.function.name);
  if (chosen.length === 0) throw new ApiError(400, 'invalid_request', `tool_choice.function.name: no tool is named ${JSON.stringify(typeof choice === 'string' ? '' : choice.function.name).slice(0, 80)}`, 'tool_choice.function.name');
  if (body.response_format && body.response_format.type !== 'text') throw new ApiError(400, 'invalid_request', 'response_format: not with a required or named tool_choice (the call decides the format)', 'response_format');
  const branches = chosen.map((t) => {
    const i = tools.indexOf(t);
    const parameters = t.function.parameters ?? { type: 'object' };
    try {
      compileSchema(parameters);
    } catch (e) {
      if (e instanceof UnsupportedSchemaError) throw new ApiError(400, 'unsupported_parameter', `tools[${i}].function.parameters: ${e.message.replace(/^invalid response_format: /, '')}`, `tools[${i}].function.parameters`);
      throw e;
    }
    return { type: 'object', properties: { name: { const: t.function.name }, arguments: parameters }, required: ['name', 'arguments'], additionalProperties: false };
  });
  const schema = branches.length === 1 ? branches[0] : { anyOf: branches };
  return { fields: { tools, replyPrefix: TOOL_CALL_OPEN, responseFormat: { type: 'json_schema', schema } }, mode };
}

const CALL = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g;

/**
 * The reply's text and calls. A forced reply is the call's JSON itself (its opening was the
 * prompt's); otherwise calls are read from `<tool_call>` blocks, and the text outside them is the
 * content (null when only calls remain).
 */
export function parseToolCalls(text: string, mode: ToolMode): { content: string | null; calls: ToolCall[] } {
  const calls: ToolCall[] = [];
  const take = (json: string): boolean => {
    let v: unknown;
    try {
      v = JSON.parse(json);
    } catch {
      return false;
    }
    const { name, arguments: args } = (v ?? {}) as { name?: unknown; arguments?: unknown };
    if (typeof name !== 'string' || !mode.names.includes(name) || typeof args !== 'object' || args === null || Array.isArray(args)) return false;
    if (mode.parallel || calls.length === 0) calls.push({ id: `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`, name, arguments: JSON.stringify(args) });
    return true;
  };
  if (mode.forced) return take(text) ? { content: null, calls } : { content: text, calls };
  const content = text.replace(CALL, (block, json: string) => (take(json) ? '' : block)).trim();
  return { content: calls.length && !content ? null : calls.length ? content : text, calls };
}

/** A call as OpenAI's `message.tool_calls[i]`. */
export function toolCallJson(c: ToolCall): Record<string, unknown> {
  return { id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } };
}
