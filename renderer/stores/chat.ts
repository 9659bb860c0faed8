/**
 * Active chat concern: the open conversation's messages, the composer's draft (one per
 * conversation), the answer actions (send, stop, regenerate, edit and resend) and the answers as
 * they stream. One zustand store built from slices (zustand's slices pattern), one file each in
 * ./chat/: conversation (open / show), draft, documents (attached to the draft, opened),
 * answer (the actions), stream (events, per-frame commits). What the slices share beyond the state (services, stream buffer, early events,
 * parked drafts) is a `ChatContext` made here, outside the state.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { Conversation } from '../../main/contract/types.ts';
import { EarlyArrivals } from '../lib/early-arrivals.ts';
import { StreamBuffer, type FrameScheduler } from '../lib/stream-buffer.ts';
import type { BudgetStore } from './budget.ts';
import { createAnswerSlice, type AnswerSlice } from './chat/answer-slice.ts';
import type { ChatContext } from './chat/context.ts';
import { createConversationSlice, type ConversationSlice } from './chat/conversation-slice.ts';
import { createDocumentsSlice, type DocumentsSlice } from './chat/documents-slice.ts';
import { createDraftSlice, type DraftSlice } from './chat/draft-slice.ts';
import { commitFrame, createStreamSlice, type StreamSlice } from './chat/stream-slice.ts';
import type { NoticesStore } from './notices.ts';

export { isGenerating, lastAnswer } from './chat/selectors.ts';
export type { PendingAction } from './chat/answer-slice.ts';

/** Progress of an answer being generated. */
export interface LiveAnswer {
  generatedTokens: number;
  prefill: { processed: number; total: number } | null;
  /** Requests ahead of it while it waits for the engine (an API request is being answered). */
  waiting?: number;
}

export type ChatState = ConversationSlice & DraftSlice & DocumentsSlice & AnswerSlice & StreamSlice;

export type ChatStore = StoreApi<ChatState>;

export interface ChatDeps {
  api: RopewalkApi;
  notices: NoticesStore;
  budget: () => BudgetStore;
  frames: FrameScheduler;
  /** A conversation was created here (so the list can show it at once). */
  onCreated(conversation: Conversation): void;
}

export function createChatStore(deps: ChatDeps): ChatStore {
  // The buffer commits into the store, which exists by the time a frame runs.
  let store: ChatStore | null = null;
  const ctx: ChatContext = {
    deps,
    report: (e) => deps.notices.getState().report(e),
    budget: () => deps.budget().getState(),
    buffer: new StreamBuffer(deps.frames, (chunks) => commitFrame(store!, ctx, chunks)),
    arrivals: new EarlyArrivals(),
    drafts: new Map(),
  };
  store = createStore<ChatState>()((...a) => ({
    ...createConversationSlice(ctx)(...a),
    ...createDraftSlice(ctx)(...a),
    ...createDocumentsSlice(ctx)(...a),
    ...createAnswerSlice(ctx)(...a),
    ...createStreamSlice(ctx)(...a),
  }));
  return store;
}
