/**
 * A conversation's stored messages as the chat template gets them: system messages left out (the
 * system prompt is a setting), empty assistant turns dropped, consecutive turns of one role joined,
 * an assistant's reasoning kept beside its content for templates that read it. Pure; shared by the
 * budget (what the meter counts) and the documents' prompt assembly (what is sent).
 */
import type { Message } from '../contract/types.ts';
import type { ChatMessage } from '../engine/generate/types.ts';

/**
 * The conversation as the model sees it: user messages and non-empty assistant answers (whatever
 * their status; an error answer with no text is skipped). Consecutive messages of one role (a
 * user message whose answer failed, then another) are joined with a newline, so chat templates
 * that require alternating roles accept the history; a transcript renders the same text.
 * An answer's reasoning goes along apart (`reasoning`): the chat template decides what of it the
 * model sees (chat-template.ts: Qwen3's drops earlier turns' reasoning; others never see it).
 * `userText` gives a user message's turn text (the documents it carries, then its content).
 */
export function historyMessages(messages: readonly Message[], userText: (m: Message) => string = (m) => m.content): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const m of messages) {
    if (m.role === 'system') continue;
    if (m.role === 'assistant' && m.content.length === 0) continue;
    const content = m.role === 'user' ? userText(m) : m.content;
    const last = out[out.length - 1];
    if (last && last.role === m.role) last.content += (m.role === 'user' ? '\n' : '') + content;
    else out.push({ role: m.role, content, ...(m.role === 'assistant' && m.reasoning ? { reasoning: m.reasoning } : {}) });
  }
  return out;
}

/** The system message list for a system prompt ([] when empty). */
export function systemMessages(systemPrompt: string): ChatMessage[] {
  return systemPrompt.length > 0 ? [{ role: 'system', content: systemPrompt }] : [];
}
