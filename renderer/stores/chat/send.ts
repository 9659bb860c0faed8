/**
 * The send action of the chat store, in named steps: check the budget, make sure a conversation
 * exists, show the user's message at once (optimistic), call the services, then apply the answer
 * or put the draft back. `SendGate` holds the one race a send has: a Stop (or Escape) between the
 * keypress and the call. Plain functions over the store's `get`/`set` and the shared context; the
 * answer slice (answer-slice.ts) wires them into `send`.
 */
import type { StoreApi } from 'zustand/vanilla';
import type { DocumentInfo, Message } from '../../../main/contract/types.ts';
import { refusalReason } from '../../lib/meter.ts';
import type { ChatState, LiveAnswer } from './types.ts';
import { type ChatContext, withLive } from './context.ts';

type Get = () => ChatState;
type Set = StoreApi<ChatState>['setState'];

/**
 * A send from its keypress until its `sendMessage` call is out, and a stop that comes in that
 * time. Why one object: the budget check before the call takes a round trip, so the window shows
 * "generating" from the keypress on; an Escape or Stop then has no answer to stop yet and must
 * not be lost. `stop()` notes it here (`noteStop`), and the send stops the answer right after
 * its call goes out (`stopRequested`): both travel the same ordered transport, so the services
 * see the send first and store the answer stopped, with no tokens.
 */
export class SendGate {
  private open = false;
  private stopped = false;

  /** A send passed its guard: from now until `close`, a stop is noted, not sent. */
  begin(): void {
    this.open = true;
    this.stopped = false;
  }

  /** The call is out, or the send gave up: a later stop goes to the services. */
  close(): void {
    this.open = false;
  }

  /** Whether a send is between its guard and its call. */
  get beforeCall(): boolean {
    return this.open;
  }

  /** Notes a stop if a send is before its call; @returns whether it was noted (nothing else to do). */
  noteStop(): boolean {
    if (this.open) this.stopped = true;
    return this.open;
  }

  /** Whether a stop came in while this send was before its call. */
  get stopRequested(): boolean {
    return this.stopped;
  }
}

/** The assistant message a call answered with, as it stands now, and its live progress. */
export function claimAnswer(ctx: ChatContext, message: Message): { message: Message; live: LiveAnswer | null } {
  const claimed = ctx.arrivals.claim(message);
  const live = claimed.generatedTokens === null ? null : { generatedTokens: claimed.generatedTokens, prefill: null };
  return { message: claimed.message, live };
}

/**
 * Step 1: the budget, fresh. @returns 'go', or 'edited' (the draft changed meanwhile: the user
 * sends again) or 'refused' (it does not fit; the refusal is shown), both with `pending` cleared.
 */
export async function checkBudget(ctx: ChatContext, get: Get, set: Set, content: string): Promise<'go' | 'edited' | 'refused'> {
  const b = await ctx.budget().ensureFresh();
  if (get().draft !== content) {
    set({ pending: null });
    return 'edited';
  }
  if (b && !b.fits) {
    set({ refusal: refusalReason(b), pending: null });
    return 'refused';
  }
  return 'go';
}

/** Step 2: the open conversation's id, creating and showing a new one when none is open. */
export async function ensureConversation(ctx: ChatContext, get: Get): Promise<string> {
  const open = get().conversationId;
  if (open !== null) return open;
  if (ctx.creating) {
    // New chat's conversation is on its way: this message goes into it (startNew opens it first).
    const coming = await ctx.creating;
    if (get().conversationId === coming.id) return coming.id;
  }
  const created = await ctx.deps.api.createConversation({});
  ctx.deps.onCreated(created);
  get().show(created);
  ctx.drafts.delete('');
  return created.id;
}

/** Step 3: the user's message shown at once, the composer emptied. @returns the stand-in message. */
export function showOptimistic(ctx: ChatContext, get: Get, set: Set, conversationId: string, content: string, attachments: DocumentInfo[], id: string): Message {
  const optimistic: Message = {
    id,
    conversationId,
    role: 'user',
    content,
    status: 'complete',
    stats: null,
    error: null,
    createdAt: Date.now(),
    documents: attachments,
  };
  ctx.drafts.delete(conversationId);
  set({ messages: [...get().messages, optimistic], draft: '', attachments: [], pending: 'send', refusal: null, editingId: null });
  return optimistic;
}

/**
 * Step 4: the call, then a stop noted by the gate; on success the stand-in is replaced by the
 * stored user message and the answer appended. @returns true (also when the user went to
 * another conversation meanwhile). @throws the call's error.
 */
export async function callSend(ctx: ChatContext, get: Get, set: Set, gate: SendGate, optimistic: Message, attachments: DocumentInfo[]): Promise<true> {
  const { api } = ctx.deps;
  const { conversationId, content } = optimistic;
  const documents = attachments.map((a) => ({ id: a.id, fit: a.fit, name: a.name }));
  const call = api.sendMessage({ conversationId, content, ...(documents.length ? { documents } : {}) });
  // Sent after the call on the same ordered transport: the services see the send first.
  if (gate.stopRequested) void api.stopGeneration({ conversationId }).catch((e: unknown) => ctx.report(e));
  const { userMessage, assistantMessage } = await call;
  if (get().conversationId !== conversationId) return true;
  const { message, live } = claimAnswer(ctx, assistantMessage);
  const messages = get().messages.map((m) => (m.id === optimistic.id ? userMessage : m));
  set({ messages: [...messages, message], live: withLive(get().live, message.id, live), pending: null });
  void ctx.budget().refresh();
  return true;
}

/** Step 4 failed: the stand-in goes, the draft and its attachments come back (unless new ones were written). */
export function restoreDraft(ctx: ChatContext, get: Get, set: Set, optimistic: Message, attachments: DocumentInfo[]): void {
  const { conversationId, content } = optimistic;
  if (get().conversationId !== conversationId) return;
  const restore = get().draft === '' ? content : get().draft;
  const restoreAttachments = get().attachments.length ? get().attachments : attachments;
  set({ messages: get().messages.filter((m) => m.id !== optimistic.id), pending: null, draft: restore, attachments: restoreAttachments });
  ctx.drafts.set(conversationId, restore);
  void ctx.budget().refresh();
}
