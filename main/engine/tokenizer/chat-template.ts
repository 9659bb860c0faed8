/**
 * Chat messages → prompt text.
 *
 * Contract: `renderChatTemplate` renders a model's Jinja chat template (Hugging Face
 * `tokenizer_config.json` `chat_template`) with `@huggingface/jinja`, exactly as transformers'
 * `apply_chat_template(..., tokenize=False)` does: variables `messages`, `add_generation_prompt`,
 * `bos_token`, `eos_token`, plus any `extra` (e.g. `enable_thinking` for Qwen3). An assistant
 * message's reasoning goes in as `reasoning_content`, and `enableThinking` as `enable_thinking`,
 * only to a template that reads them (Qwen3's: it drops earlier turns' reasoning itself); any
 * other template sees the content alone, as vLLM and llama.cpp's server pass them. A template that
 * does not parse, or that fails or calls `raise_exception` while rendering, throws
 * `TokenizerError`. `promptFromMessages` is the fallback for completion models without a
 * template (llama2.c stories260K). Text in, text out: tokenization happens in `tokenizer.ts`.
 */

import { Template } from '@huggingface/jinja';
import { TokenizerError } from '../errors.ts';

export type ChatRole = 'system' | 'user' | 'assistant';

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** An assistant message's reasoning, apart from its content (reasoning.ts). */
  reasoning?: string;
}

export interface ChatTemplateOptions {
  /** Append the header that opens the assistant's turn (true when asking for a reply). */
  addGenerationPrompt: boolean;
  bosToken?: string;
  eosToken?: string;
  /** `enable_thinking`, for a template that reads it (absent: the template's default). */
  enableThinking?: boolean;
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
      messages: messages.map((m) => templateMessage(m, template)),
      add_generation_prompt: opts.addGenerationPrompt,
      bos_token: opts.bosToken ?? '',
      eos_token: opts.eosToken ?? '',
      ...(opts.enableThinking !== undefined && template.includes('enable_thinking') ? { enable_thinking: opts.enableThinking } : {}),
      ...opts.extra,
    });
  } catch (cause) {
    throw new TokenizerError(`the chat template failed to render: ${messageOf(cause)}`, { cause });
  }
}

/** A message as the template reads it: reasoning as `reasoning_content` only where the template uses that name. */
function templateMessage(m: ChatMessage, template: string): Record<string, string> {
  const out: Record<string, string> = { role: m.role, content: m.content };
  if (m.reasoning && m.role === 'assistant' && template.includes('reasoning_content')) out.reasoning_content = m.reasoning;
  return out;
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
