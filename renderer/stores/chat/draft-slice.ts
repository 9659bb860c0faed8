/**
 * Chat store slice: the composer's draft of the open conversation, and why the last Send was
 * refused. Typing schedules a budget request (the meter counts the draft). Every conversation's
 * unsent draft is kept in a `DraftMemory`, which also survives a reload (storage).
 */
import type { ChatSlice } from './context.ts';
import type { DraftSlice } from './types.ts';

export const createDraftSlice: ChatSlice<DraftSlice> = (ctx) => (set, get) => ({
  draft: ctx.drafts.get(''),
  refusal: null,
  setDraft(text) {
    set({ draft: text, refusal: null });
    ctx.drafts.set(get().conversationId ?? '', text);
    ctx.budget().schedule();
  },
  keepDraftsOf(existingIds) {
    ctx.drafts.retain(existingIds);
  },
  forgetDraft(conversationId) {
    ctx.drafts.delete(conversationId);
  },
});
