/**
 * Conversations in the store: create, list and search, rename, the per-conversation settings
 * (context-full policy, Think toggle, its own system prompt and sampler), the automatic title, delete (cascading to messages).
 * Errors: ServiceError NOT_FOUND for an unknown id.
 */
import type Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import type { ChatSettings, ContextFullPolicy, Conversation, ConversationSummary } from '../../contract/types.ts';
import type { StoreDatabase } from './database.ts';
import { chatSettingsOf, notFound, toSummary, type ConversationRow } from './rows.ts';
import { autoTitle, escapeLike, snippet } from './text.ts';

export const DEFAULT_TITLE = 'New chat';

/** The conversations table. */
export class ConversationTable {
  private readonly db: Database.Database;

  constructor(private readonly s: StoreDatabase) {
    this.db = s.db;
  }

  /**
   * Conversations, most recently updated first. `search` matches titles, message text and the
   * text of the documents the messages carry, as a literal substring, case-insensitively for
   * ASCII (`%` and `_` are not wildcards); a conversation found by its messages carries `match`,
   * the text around the first hit, or by a document only, "name: " and the text around its hit.
   */
  listConversations(search?: string): ConversationSummary[] {
    const q = search?.trim();
    if (!q) return (this.db.prepare(`SELECT * FROM conversations ORDER BY updated_at DESC, rowid DESC`).all() as ConversationRow[]).map(toSummary);
    const rows = this.db
      .prepare(
        `SELECT c.*, (SELECT m.content FROM messages m WHERE m.conversation_id = c.id AND m.on_path = 1 AND m.role <> 'system' AND m.content LIKE @q ESCAPE '\\' ORDER BY m.seq LIMIT 1) AS hit,
           (SELECT COALESCE(a.name, d.name) || char(31) || d.text FROM messages m JOIN attachments a ON a.message_id = m.id JOIN documents d ON d.id = a.document_id
            WHERE m.conversation_id = c.id AND m.on_path = 1 AND d.text LIKE @q ESCAPE '\\' ORDER BY m.seq, a.position LIMIT 1) AS doc_hit
         FROM conversations c
         WHERE c.title LIKE @q ESCAPE '\\' OR hit IS NOT NULL OR doc_hit IS NOT NULL
         ORDER BY c.updated_at DESC, c.rowid DESC`,
      )
      .all({ q: `%${escapeLike(q)}%` }) as Array<ConversationRow & { hit: string | null; doc_hit: string | null }>;
    return rows.map((r) => {
      if (r.hit !== null) return { ...toSummary(r), match: snippet(r.hit, q) };
      if (r.doc_hit === null) return toSummary(r);
      const cut = r.doc_hit.indexOf('\u001f'); // char(31) between the name and the text
      return { ...toSummary(r), match: `${r.doc_hit.slice(0, cut)}: ${snippet(r.doc_hit.slice(cut + 1), q)}` };
    });
  }

  /** Creates an empty conversation; without a title it is "New chat" until its first message. */
  createConversation(title?: string): Conversation {
    const now = this.s.stamp();
    const t = title?.trim();
    const row: ConversationRow = { id: randomUUID(), title: t || DEFAULT_TITLE, title_source: t ? 'user' : 'default', created_at: now, updated_at: now, context_full_policy: null, thinking: null, chat_settings: null };
    this.db
      .prepare(`INSERT INTO conversations (id, title, title_source, created_at, updated_at) VALUES (@id, @title, @title_source, @created_at, @updated_at)`)
      .run(row);
    return { ...toSummary(row), messages: [] };
  }

  /** A conversation summary. @throws ServiceError NOT_FOUND. */
  getSummary(id: string): ConversationSummary {
    return toSummary(this.s.conversationRow(id));
  }

  /** A conversation's own context-full policy; null: none of its own (the setting's), or no such conversation. */
  conversationPolicy(id: string): ContextFullPolicy | null {
    return (this.db.prepare(`SELECT context_full_policy FROM conversations WHERE id = ?`).pluck().get(id) as ContextFullPolicy | null | undefined) ?? null;
  }

  /** A conversation's Think toggle; null: not set (the template's default), or no such conversation. */
  conversationThinking(id: string): boolean | null {
    const v = this.db.prepare(`SELECT thinking FROM conversations WHERE id = ?`).pluck().get(id) as 0 | 1 | null | undefined;
    return v === 1 ? true : v === 0 ? false : null;
  }

  /**
   * Sets a conversation's Think toggle (null: the template's default); its place in the list
   * stays. @throws ServiceError NOT_FOUND.
   */
  setConversationThinking(id: string, thinking: boolean | null): ConversationSummary {
    const r = this.db.prepare(`UPDATE conversations SET thinking = ? WHERE id = ?`).run(thinking === null ? null : thinking ? 1 : 0, id);
    if (r.changes === 0) throw notFound('conversation', id);
    return this.getSummary(id);
  }

  /** A conversation's own system prompt and sampler; null: none of its own, or no such conversation. */
  conversationSettings(id: string): ChatSettings | null {
    return chatSettingsOf(this.db.prepare(`SELECT chat_settings FROM conversations WHERE id = ?`).pluck().get(id) as string | null | undefined);
  }

  /**
   * Replaces a conversation's own system prompt and sampler (`{}`: none of its own; validation is
   * the caller's); its place in the list stays. @throws ServiceError NOT_FOUND.
   */
  setConversationSettings(id: string, settings: ChatSettings): ConversationSummary {
    const json = Object.keys(settings).length > 0 ? JSON.stringify(settings) : null;
    const r = this.db.prepare(`UPDATE conversations SET chat_settings = ? WHERE id = ?`).run(json, id);
    if (r.changes === 0) throw notFound('conversation', id);
    return this.getSummary(id);
  }

  /** Whether a conversation exists. */
  hasConversation(id: string): boolean {
    return this.db.prepare(`SELECT 1 FROM conversations WHERE id = ?`).get(id) !== undefined;
  }

  /**
   * Renames a conversation (its title is then never replaced automatically). Not an update of
   * the conversation: its place in the list (by last message) stays. @throws ServiceError NOT_FOUND.
   */
  renameConversation(id: string, title: string): ConversationSummary {
    const r = this.db.prepare(`UPDATE conversations SET title = ?, title_source = 'user' WHERE id = ?`).run(title.trim(), id);
    if (r.changes === 0) throw notFound('conversation', id);
    return this.getSummary(id);
  }

  /**
   * Sets a conversation's own context-full policy (null: follow the setting). Like a rename, its
   * place in the list stays. @throws ServiceError NOT_FOUND.
   */
  setConversationPolicy(id: string, policy: ContextFullPolicy | null): ConversationSummary {
    const r = this.db.prepare(`UPDATE conversations SET context_full_policy = ? WHERE id = ?`).run(policy, id);
    if (r.changes === 0) throw notFound('conversation', id);
    return this.getSummary(id);
  }

  /** Deletes a conversation and (cascade) its messages. @throws ServiceError NOT_FOUND. */
  deleteConversation(id: string): void {
    const r = this.db.prepare(`DELETE FROM conversations WHERE id = ?`).run(id);
    if (r.changes === 0) throw notFound('conversation', id);
  }

  /**
   * Sets the automatic title from `text` (its first ~40 characters, whitespace collapsed) when
   * the conversation's title is still the default, or was automatic and `replaceAuto` is set.
   * @returns whether the title changed.
   */
  setAutoTitle(id: string, text: string, replaceAuto = false): boolean {
    const title = autoTitle(text);
    if (!title) return false;
    const allowed = replaceAuto ? `('default', 'auto')` : `('default')`;
    const r = this.db.prepare(`UPDATE conversations SET title = ?, title_source = 'auto' WHERE id = ? AND title_source IN ${allowed} AND title <> ?`).run(title, id, title);
    return r.changes > 0;
  }
}
