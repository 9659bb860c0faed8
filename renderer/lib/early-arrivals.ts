/**
 * Answer events that arrive before the window knows their message.
 *
 * Why this exists: `sendMessage`, `regenerate` and `editMessage` answer with the new assistant
 * message, but the services start generating before that answer crosses the socket, and events
 * share the socket with answers. So `answerDelta` (text) and `answerDone` (the final message) for
 * an assistant message can reach the window before the call that created the message has
 * answered: the store has no message with that id yet. Dropping those events would lose the
 * start of the answer (or, for a short answer, its end: the window would show it streaming
 * forever). This module keeps them aside, per message id, until the message is known:
 *
 *   keepText(id, chunk)   a committed frame of deltas for an unknown id: appended
 *   keepDone(message)     the final message for an unknown id: it wins over any kept text
 *   claim(message)        the call answered: its message with everything kept applied
 *   overSnapshot(list)    a conversation snapshot (open): kept dones replace, kept text is
 *                         dropped (the snapshot already holds every delta sent before it)
 *
 * No store, no DOM, no timers: plain maps, so the rules are unit-tested on their own.
 * Kept entries belong to the open conversation; the store calls `clear()` when it switches.
 */
import type { Message } from '../../main/contract/types.ts';
import { mergeChunk, withChunk, type StreamChunk } from './stream-buffer.ts';

/** A message once the early events are applied, and its streamed token count if it streams on. */
export interface ClaimedAnswer {
  message: Message;
  /** null when the message is no longer streaming (done arrived early, or it ended already). */
  generatedTokens: number | null;
}

/**
 * Applies what was kept for one message (a pure function; `claim` is this plus forgetting).
 * A kept done is the final state and wins; otherwise kept text is appended to the message's
 * text (the call's answer carries the text known when it answered, normally ''; deltas after it
 * are the kept ones, in order, since one ordered socket carries both).
 */
export function applyEarly(message: Message, text: StreamChunk | undefined, done: Message | undefined): ClaimedAnswer {
  if (done) return { message: done, generatedTokens: null };
  const merged = text ? withChunk(message, text) : message;
  if (merged.status !== 'streaming') return { message: merged, generatedTokens: null };
  return { message: merged, generatedTokens: text?.generatedTokens ?? 0 };
}

export class EarlyArrivals {
  private readonly text = new Map<string, StreamChunk>();
  private readonly done = new Map<string, Message>();

  /** Keeps a frame's text for a message not known yet (appends to what was kept before). */
  keepText(messageId: string, chunk: StreamChunk): void {
    const kept = this.text.get(messageId);
    if (kept) mergeChunk(kept, chunk);
    else this.text.set(messageId, { ...chunk });
  }

  /** Keeps the final message of an answer not known yet; its kept text is no longer needed. */
  keepDone(message: Message): void {
    this.text.delete(message.id);
    this.done.set(message.id, message);
  }

  /** Forgets the kept text of a message whose final state arrived (a done for a known message). */
  forgetText(messageId: string): void {
    this.text.delete(messageId);
  }

  /** The message the call answered with, with what was kept applied; forgets those entries. */
  claim(message: Message): ClaimedAnswer {
    const claimed = applyEarly(message, this.text.get(message.id), this.done.get(message.id));
    this.text.delete(message.id);
    this.done.delete(message.id);
    return claimed;
  }

  /**
   * A conversation snapshot with what was kept applied, for `open`: a kept done replaces its
   * message; kept text is dropped, because every delta sent before the snapshot is already in
   * its text (adding it would double it). Forgets everything.
   */
  overSnapshot(messages: readonly Message[]): Message[] {
    const result = messages.map((m) => this.done.get(m.id) ?? m);
    this.clear();
    return result;
  }

  clear(): void {
    this.text.clear();
    this.done.clear();
  }

  /** Messages with something kept (for tests and diagnostics). */
  get size(): number {
    return new Set([...this.text.keys(), ...this.done.keys()]).size;
  }
}
