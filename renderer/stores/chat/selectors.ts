/** Derived facts about the chat store's state, shared by the slices and the components. */
import type { Message } from '../../../main/contract/types.ts';
import type { PendingAction } from './types.ts';

/** Generating: an answer streams in the open conversation, or a call that starts one is in flight. */
export function isGenerating(s: { pending: PendingAction; messages: readonly Message[] }): boolean {
  return s.pending !== null || s.messages.some((m) => m.status === 'streaming');
}

/** The last assistant message, when it is the conversation's last message. */
export function lastAnswer(messages: readonly Message[]): Message | null {
  const last = messages.at(-1);
  return last && last.role === 'assistant' ? last : null;
}
