/**
 * Chat messages → prompt text.
 *
 * Contract: `renderChatTemplate` renders a model's Jinja chat template (Hugging Face
 * `tokenizer_config.json` `chat_template`, GGUF `tokenizer.chat_template`) as transformers'
 * `apply_chat_template(..., tokenize=False)` does with Python's jinja2: variables `messages`,
 * `add_generation_prompt`, `bos_token`, `eos_token`, plus any `extra` (e.g. `enable_thinking` for
 * Qwen3). An assistant message's reasoning goes in as `reasoning_content` or `thinking` (gpt-oss's
 * harmony template), and `enableThinking` as `enable_thinking`, only to a template that reads them
 * (Qwen3's and gpt-oss's drop earlier turns' reasoning themselves); any other template sees the content alone, as vLLM and llama.cpp's server pass them.
 * It renders in a sandbox worker with time, step and size limits (template-sandbox.ts);
 * a template past a limit throws `TemplateLimitError`; one that does not parse, or that fails or
 * calls `raise_exception` while rendering, throws `TokenizerError`. `PROBE_CONVERSATION` is what
 * a model's template must render when the model loads. `promptFromMessages` is the fallback for completion models without a
 * template (llama2.c stories260K). Text in, text out: tokenization happens in `tokenizer.ts`.
 */

import { TemplateError, TemplateLimitError } from '../errors.ts';
import { DEFAULT_RENDER_LIMITS, type RenderLimits } from './jinja-compat.ts';
import { renderInSandbox } from './template-sandbox.ts';
import { MISTRAL_CALLS, mistralCallId } from './tool-format.ts';

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** An assistant message's reasoning, apart from its content (reasoning.ts). */
  reasoning?: string;
  /** An assistant turn's tool calls; arguments as JSON text. */
  toolCalls?: { id: string; name: string; arguments: string }[];
  /** A tool turn: the id of the call it answers. */
  toolCallId?: string;
}

export interface ChatTemplateOptions {
  /** Append the header that opens the assistant's turn (true when asking for a reply). */
  addGenerationPrompt: boolean;
  bosToken?: string;
  eosToken?: string;
  /** `enable_thinking`, for a template that reads it (absent: the template's default). */
  enableThinking?: boolean;
  /** `reasoning_effort`, for a template that reads it (gpt-oss's; absent: the template's default). */
  reasoningEffort?: string;
  /** Further template variables, e.g. `{ enable_thinking: false }`; they override the above. */
  extra?: Record<string, unknown>;
}

/**
 * Limits for rendering `messages`: the defaults (1 s; 2 M steps; 1 M characters), raised with the
 * conversation so a long one never trips them: 1,000 more steps per message and twice the
 * messages' own characters more output.
 */
export function limitsFor(messages: ChatMessage[]): RenderLimits {
  const chars = messages.reduce((n, m) => n + m.content.length + (m.reasoning?.length ?? 0), 0);
  const d = DEFAULT_RENDER_LIMITS;
  return { timeMs: d.timeMs, maxSteps: d.maxSteps + 1000 * messages.length, maxOutputChars: d.maxOutputChars + 2 * chars };
}

/**
 * Renders `template` for `messages` and returns the prompt text, special tokens spelled as text
 * (e.g. `<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n` for Qwen). Rendering runs in
 * the template sandbox (template-sandbox.ts) within `limitsFor(messages)`, with Jinja2's
 * behaviour where the library differs (jinja-compat.ts).
 * @throws TemplateLimitError past a limit; TokenizerError when the template does not parse or
 *   fails while rendering.
 */
export function renderChatTemplate(
  template: string,
  messages: ChatMessage[],
  opts: ChatTemplateOptions,
): string {
  const variables = {
    // Fresh objects: a template may not mutate the caller's messages.
    messages: messages.map((m) => templateMessage(m, template)),
    add_generation_prompt: opts.addGenerationPrompt,
    bos_token: opts.bosToken ?? '',
    eos_token: opts.eosToken ?? '',
    ...(opts.enableThinking !== undefined && template.includes('enable_thinking') ? { enable_thinking: opts.enableThinking } : {}),
    ...(opts.reasoningEffort !== undefined && template.includes('reasoning_effort') ? { reasoning_effort: opts.reasoningEffort } : {}),
    ...opts.extra,
  };
  return renderInSandbox(template, variables, limitsFor(messages));
}

/**
 * A message as the template reads it: reasoning under each of REASONING_FIELDS the template
 * reads; tool calls in transformers' shape with `function.arguments` as the parsed
 * object, as vLLM passes them (Llama's and Mistral's templates print `arguments | tojson`, which
 * would quote a string; Qwen's prints either), text only when it is not JSON; a tool turn's
 * `tool_call_id`. For a Mistral template, ids become 9 letters or digits (`mistralCallId`).
 */
function templateMessage(m: ChatMessage, template: string): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  const id = template.includes(MISTRAL_CALLS) ? mistralCallId : (x: string) => x;
  if (m.reasoning && m.role === 'assistant') for (const field of REASONING_FIELDS) if (readsField(template, field)) out[field] = m.reasoning;
  if (m.toolCalls?.length) out.tool_calls = m.toolCalls.map((c) => ({ id: id(c.id), type: 'function', function: { name: c.name, arguments: argumentsValue(c.arguments) } }));
  if (m.toolCallId !== undefined) out.tool_call_id = id(m.toolCallId);
  return out;
}

/**
 * The names templates read an assistant message's reasoning by: `reasoning_content` (Qwen3, the
 * DeepSeek-R1 distills; vLLM's name) and `thinking` (gpt-oss's harmony template, which renders it
 * as the analysis channel of a turn that calls a tool and drops it elsewhere).
 */
const REASONING_FIELDS = ['reasoning_content', 'thinking'] as const;

/** Whether `template` reads the message field `field` (`.field`, `['field']`, `"field" in …`). */
function readsField(template: string, field: string): boolean {
  return new RegExp(`\\.${field}\\b|['"]${field}['"]`).test(template);
}

/** A call's arguments text as a value (an object, as clients send it), or the text when it is not JSON. */
function argumentsValue(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** The conversation a model's template must render at load: a short exchange, then a question. */
export const PROBE_CONVERSATION: ChatMessage[] = [
  { role: 'user', content: 'Hello!' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'Tell me a short story.' },
];

/** Where a model's template came from, for messages: the file and the field within it. */
export function templateOrigin(source: { kind: string; path: string }): string {
  if (source.kind === 'gguf') return `${source.path} (GGUF metadata tokenizer.chat_template)`;
  if (source.kind === 'hf') return `${source.path} (tokenizer_config.json chat_template or chat_template.jinja)`;
  return source.path;
}

/**
 * The load-time check of a model's template: renders `PROBE_CONVERSATION` with `render` (the
 * tokenizer's `renderChat`), so a hostile or broken template is refused when the model loads, in
 * at most its time limit, instead of on the first message. A template's own `raise_exception`
 * is accepted: it may refuse the probe's conversation, not every conversation.
 * @throws TemplateLimitError / TemplateError naming `origin` (see `templateOrigin`).
 */
export function probeChatTemplate(render: (messages: ChatMessage[]) => string, origin: string): void {
  try {
    render(PROBE_CONVERSATION);
  } catch (e) {
    if (!(e instanceof TemplateError)) throw e;
    if (e.kind === 'raised') return;
    if (e.kind === 'limit') throw new TemplateLimitError(`${e.detail} on a test conversation at load`, origin);
    throw new TemplateError(e.kind, e.detail, origin, { cause: e });
  }
}

/**
 * Prompt text for a completion model that has no chat template (llama2.c stories260K): the
 * conversation as one continuous text, as the model will see it. The system prompt and each user
 * message start on a new line; an assistant message continues the text directly, because it was
 * generated as the continuation of what precedes it. So a conversation is a growing prefix: a
 * follow-up reuses the KV cache, and the context meter counts exactly what is fed.
 * Returns "" for no messages.
 */
export function promptFromMessages(messages: ChatMessage[]): string {
  let text = '';
  for (const m of messages) {
    if (m.role === 'assistant') text += m.content;
    else text += (text.length > 0 ? '\n' : '') + m.content;
  }
  return text;
}

