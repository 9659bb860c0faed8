/**
 * Every conversation's unsent draft, by conversation id ('' = no conversation yet), written
 * through to storage so it survives a reload. Not zustand state: the chat store's context holds it.
 */
import { readKey, writeKey, type KeyValueStorage } from '../../lib/storage.ts';

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
