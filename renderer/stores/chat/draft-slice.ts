/**
 * Chat store slice: the composer's draft of the open conversation, and why the last Send was
 * refused. Typing schedules a budget request (the meter counts the draft). Every conversation's
 * unsent draft is kept in a `DraftMemory`, which also survives a reload (storage).
 */
import { readKey, writeKey, type KeyValueStorage } from '../../lib/storage.ts';
import type { ChatSlice } from './context.ts';

export interface DraftSlice {
  draft: string;
  /** Why the last Send was refused (cleared when the draft changes). */
  refusal: string | null;
  setDraft(text: string): void;
  /**
   * Forgets the drafts of conversations that no longer exist: `existingIds` is the whole list of
   * conversation ids (not a search result). The draft of "no conversation yet" ('') is kept.
   */
  keepDraftsOf(existingIds: readonly string[]): void;
  /** Forgets one conversation's draft (it was deleted). */
  forgetDraft(conversationId: string): void;
}

const DRAFTS_KEY = 'ropewalk.drafts';

/** Unsent drafts by conversation id ('' = no conversation yet), written through to storage. */
export class DraftMemory {
  private readonly drafts = new Map<string, string>();

  constructor(private readonly storage?: KeyValueStorage) {
    try {
      const saved: unknown = JSON.parse(readKey(storage, DRAFTS_KEY) ?? '{}');
      if (saved && typeof saved === 'object') {
        for (const [id, text] of Object.entries(saved)) if (typeof text === 'string' && text) this.drafts.set(id, text);
      }
    } catch {
      // Unreadable: start without drafts.
    }
  }

  get(conversationId: string): string {
    return this.drafts.get(conversationId) ?? '';
  }

  set(conversationId: string, text: string): void {
    if (this.get(conversationId) === text) return;
    if (text) this.drafts.set(conversationId, text);
    else this.drafts.delete(conversationId);
    writeKey(this.storage, DRAFTS_KEY, JSON.stringify(Object.fromEntries(this.drafts)));
  }

  delete(conversationId: string): void {
    this.set(conversationId, '');
  }

  /** Drops every draft whose conversation is not in `existingIds` ('' always stays). */
  retain(existingIds: readonly string[]): void {
    const keep = new Set(existingIds);
    for (const id of [...this.drafts.keys()]) if (id !== '' && !keep.has(id)) this.delete(id);
  }
}

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
