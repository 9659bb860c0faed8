/**
 * Chat store slice: the composer's draft of the open conversation, and why the last Send was
 * refused. Typing schedules a budget request (the meter counts the draft).
 */
import type { ChatSlice } from './context.ts';

export interface DraftSlice {
  draft: string;
  /** Why the last Send was refused (cleared when the draft changes). */
  refusal: string | null;
  setDraft(text: string): void;
}

export const createDraftSlice: ChatSlice<DraftSlice> = (ctx) => (set) => ({
  draft: '',
  refusal: null,
  setDraft(text) {
    set({ draft: text, refusal: null });
    ctx.budget().schedule();
  },
});
