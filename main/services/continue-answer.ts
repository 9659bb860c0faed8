/**
 * Continue: an answer that ended at max new tokens ('length') goes on in the same message. The
 * prompt is the conversation up to that answer with the answer's text as the reply's opening
 * (`replyPrefix`, fed after the template's generation prompt; a reasoning model's thinking first,
 * inside its markers: `replyReasoning`), so its tokens are those the KV
 * cache already holds: the engine's prefix reuse prefills almost nothing (the last generated
 * token, which was sampled but never fed back, and whatever re-tokenizing the text changes).
 * Pure functions: which answers can go on (`continuable`), the request's prompt
 * (`continuationPrompt`), and the joined result (`joinContinuation`: text and reasoning
 * appended, generated tokens summed, the rest from the continuation's own run).
 */
import type { Message } from '../contract/types.ts';
import type { ChatMessage } from '../engine/generate/types.ts';
import type { DoneEvent } from './answer-stream.ts';
import { ServiceError } from './errors.ts';

/**
 * The answer to continue and the history before it (the conversation's path).
 * @throws ServiceError NOT_FOUND (no such message on the path), INVALID_REQUEST (not the last
 *   message, not an answer, or not ended at 'length').
 */
export function continuable(messages: readonly Message[], messageId: string): { answer: Message; history: Message[] } {
  const i = messages.findIndex((m) => m.id === messageId);
  if (i < 0) throw new ServiceError('NOT_FOUND', `no message with id ${messageId} in this conversation`);
  const answer = messages[i];
  if (answer.role !== 'assistant') throw new ServiceError('INVALID_REQUEST', 'only an answer can be continued');
  if (i !== messages.length - 1) throw new ServiceError('INVALID_REQUEST', 'only the last answer can be continued');
  const reason = answer.stats?.finishReason ?? answer.status;
  if (reason !== 'length') {
    throw new ServiceError('INVALID_REQUEST', `only an answer that reached max new tokens can be continued; this one ended with "${reason}"`);
  }
  return { answer, history: messages.slice(0, i + 1) };
}

/**
 * The assembled prompt (ending with the answer's own turn) as a continuation: the turns before
 * it, and its text as the reply's opening — its thinking first, inside the model's markers (the
 * engine writes them: `replyReasoning`), so an answer cut inside its thinking goes on thinking.
 * @throws ServiceError INVALID_REQUEST when the prompt does not end with that answer.
 */
export function continuationPrompt(messages: readonly ChatMessage[], answer: Message): { messages: ChatMessage[]; replyPrefix: string; replyReasoning?: string } {
  const last = messages[messages.length - 1];
  // An answer cut inside its thinking has no text: the history leaves such a turn out.
  if (!answer.content && answer.reasoning) return { messages: [...messages], replyPrefix: '', replyReasoning: answer.reasoning };
  if (!last || last.role !== 'assistant' || !last.content.endsWith(answer.content)) {
    throw new ServiceError('INVALID_REQUEST', 'the answer to continue is not the last turn of the prompt');
  }
  return { messages: messages.slice(0, -1), replyPrefix: last.content, ...(answer.reasoning ? { replyReasoning: answer.reasoning } : {}) };
}

/** The continuation's done event as the whole answer's: text and reasoning after `base`'s, generated and reasoning tokens (and time) summed. */
export function joinContinuation(base: Message, done: DoneEvent): DoneEvent {
  const before = base.stats?.generatedTokens ?? 0;
  return {
    ...done,
    text: base.content + done.text,
    reasoning: (base.reasoning ?? '') + done.reasoning,
    stats: {
      ...done.stats,
      generatedTokens: before + done.stats.generatedTokens,
      reasoningTokens: (base.stats?.reasoningTokens ?? 0) + done.stats.reasoningTokens,
      reasoningMs: (base.stats?.reasoningMs ?? 0) + done.stats.reasoningMs,
    },
  };
}
