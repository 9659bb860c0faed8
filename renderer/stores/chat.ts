/**
 * Active chat concern: the open conversation's messages, the composer's draft (one per
 * conversation), the answer actions (send, stop, regenerate, edit and resend) and the answers as
 * they stream. One zustand store built from slices (zustand's slices pattern), one file each in
 * ./chat/: conversation (open / show), draft, documents (attached to the draft, opened),
 * answer (the actions), stream (events, per-frame commits). What the slices share beyond the state (services, stream buffer, early events,
 * parked drafts) is a `ChatContext` made here, outside the state.
 */
import { createStore } from 'zustand/vanilla';
import { EarlyArrivals } from '../lib/early-arrivals.ts';
import { StreamBuffer } from '../lib/stream-buffer.ts';
import { createAnswerSlice } from './chat/answer-slice.ts';
import type { ChatContext } from './chat/context.ts';
import { createConversationSlice } from './chat/conversation-slice.ts';
import { createDocumentsSlice } from './chat/documents-slice.ts';
import { DraftMemory } from './chat/draft-memory.ts';
import { createDraftSlice } from './chat/draft-slice.ts';
import { commitFrame, createStreamSlice } from './chat/stream-slice.ts';
import type { ChatDeps, ChatState, ChatStore } from './chat/types.ts';

export { isGenerating, lastAnswer } from './chat/selectors.ts';
export type { ChatDeps, ChatState, ChatStore, LiveAnswer, PendingAction } from './chat/types.ts';

/** The chat store: its slices over one shared context (see ./chat/types.ts for the state). */
export function createChatStore(deps: ChatDeps): ChatStore {
  // The buffer commits into the store, which exists by the time a frame runs.
  let store: ChatStore | null = null;
  const ctx: ChatContext = {
    deps,
    report: (e) => deps.notices.getState().report(e),
    budget: () => deps.budget().getState(),
    buffer: new StreamBuffer(deps.frames, (chunks) => commitFrame(store!, ctx, chunks)),
    arrivals: new EarlyArrivals(),
    drafts: new DraftMemory(deps.storage),
    creating: null,
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
