/**
 * Chat messages → prompt text.
 *
 * Contract: `renderChatTemplate` renders a model's Jinja chat template (Hugging Face
 * `tokenizer_config.json` `chat_template`) with `@huggingface/jinja`, exactly as transformers'
 * `apply_chat_template(..., tokenize=False)` does: variables `messages`, `add_generation_prompt`,
 * `bos_token`, `eos_token`, plus any `extra` (e.g. `enable_thinking` for Qwen3). A template that
 * does not parse, or that fails or calls `raise_exception` while rendering, throws
 * `TokenizerError`. `promptFromMessages` is the fallback for completion models without a
 * template (llama2.c stories260K). Text in, text out: tokenization happens in `tokenizer.ts`.
 */

import { Template } from '@huggingface/jinja';
import { TokenizerError } from '../errors.ts';

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: ChatRole;
  content: string;
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
  /** Further template variables, e.g. `{ enable_thinking: false }`; they override the above. */
  extra?: Record<string, unknown>;
}

// Parsing a template is far costlier than rendering it, and a conversation renders the same
// template every turn: keep the last one compiled.
let cached: { source: string; template: Template } | null = null;

/** Parses `source`, or throws `TokenizerError` quoting the parser's message. */
function compile(source: string): Template {
  if (cached?.source === source) return cached.template;
  let template: Template;
  try {
    template = new Template(source);
  } catch (cause) {
    throw new TokenizerError(`the chat template has a syntax error: ${messageOf(cause)}`, { cause });
  }
  cached = { source, template };
  return template;
}

/**
 * Renders `template` for `messages` and returns the prompt text, special tokens spelled as text
 * (e.g. `<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n` for Qwen).
 * Throws `TokenizerError` when the template does not parse or fails while rendering.
 */
export function renderChatTemplate(
  template: string,
  messages: ChatMessage[],
  opts: ChatTemplateOptions,
): string {
  const compiled = compile(template);
  try {
    return compiled.render({
      // Fresh objects: a template may not mutate the caller's messages.
      // Tool calls in transformers' shape (`function.arguments` as text: templates print a string as is).
      messages: messages.map((m) => ({
        role: m.role,
        content: m.content,
        ...(m.toolCalls?.length ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
        ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
      })),
      add_generation_prompt: opts.addGenerationPrompt,
      bos_token: opts.bosToken ?? '',
      eos_token: opts.eosToken ?? '',
      ...opts.extra,
    });
  } catch (cause) {
    throw new TokenizerError(`the chat template failed to render: ${messageOf(cause)}`, { cause });
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

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
