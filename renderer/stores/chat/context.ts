/**
 * What the chat store's slices share besides the state: the services, the budget and notices,
 * and the live, non-reactive parts (the per-frame stream buffer, events kept for messages not
 * known yet, the drafts of the conversations not open). These stay out of the zustand state on
 * purpose (live handles and per-token buffers do not belong in it; see STYLE.md).
 */
import type { StateCreator } from 'zustand/vanilla';
import type { Conversation, Message } from '../../../main/contract/types.ts';
import type { EarlyArrivals } from '../../lib/early-arrivals.ts';
import type { StreamBuffer } from '../../lib/stream-buffer.ts';
import type { BudgetState } from '../budget.ts';
import type { DraftMemory } from './draft-memory.ts';
import type { ChatDeps, ChatState, LiveAnswer } from './types.ts';

export interface ChatContext {
  deps: ChatDeps;
  /** Shows an error as a notice. */
  report(error: unknown): void;
  budget(): BudgetState;
  buffer: StreamBuffer;
  arrivals: EarlyArrivals;
  /** Every conversation's unsent draft ('' = no conversation), kept across reloads. */
  drafts: DraftMemory;
  /** New chat's conversation while it is being created (the window shows it empty meanwhile), else null. */
  creating: Promise<Conversation> | null;
}

/** A slice of the chat store: zustand's slices pattern, with the shared context first. */
export type ChatSlice<T> = (ctx: ChatContext) => StateCreator<ChatState, [], [], T>;

/** The messages the window shows (system messages are settings, not chat). */
export const visible = (messages: readonly Message[]): Message[] => messages.filter((m) => m.role !== 'system');

/** Live progress entries for the messages that stream (nothing known about them yet). */
export function liveFor(messages: readonly Message[]): Record<string, LiveAnswer> {
  const live: Record<string, LiveAnswer> = {};
  for (const m of messages) if (m.status === 'streaming') live[m.id] = { generatedTokens: 0, prefill: null };
  return live;
}

/** `live` with one entry set (answer) or removed (null). */
export function withLive(live: Record<string, LiveAnswer>, id: string, answer: LiveAnswer | null): Record<string, LiveAnswer> {
  const next = { ...live };
  if (answer) next[id] = answer;
  else delete next[id];
  return next;
}
