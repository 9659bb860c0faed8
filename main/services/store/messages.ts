/**
 * Messages and branches in the store. Messages form a tree (`parent_id`: the message before it
 * when it was written). Regenerate and edit do not delete: the replaced message and what followed
 * it leave the conversation's path (`on_path = 0`) and the new one is written beside it, under
 * the same parent. A conversation's messages are its path, in order; a message with other
 * versions at its place carries `branches` (their ids, oldest first). `selectBranch` puts another
 * version, and the newest line of messages after it, on the path.
 * Errors: ServiceError NOT_FOUND for an unknown conversation or message.
 */
import type Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import type { AnswerStats, DocumentFit, DocumentInfo, Message, MessageStatus, Role } from '../../contract/types.ts';
import type { StoreDatabase } from './database.ts';
import { notFound, toDocumentInfo, toMessage, withBranches, type DocumentRow, type MessagePatch, type MessageRow } from './rows.ts';

/** A message as appended: what the caller gives, before ids, order and time are set. */
export interface NewMessage {
  role: Role;
  content: string;
  reasoning?: string;
  status: MessageStatus;
  stats?: AnswerStats | null;
  error?: string | null;
}

/** The messages table, as a tree with one path per conversation. */
export class MessageTable {
  private readonly db: Database.Database;

  constructor(private readonly s: StoreDatabase) {
    this.db = s.db;
  }

  /**
   * The messages on a conversation's path, in order (empty for an unknown id); one with other
   * versions at its place carries `branches`.
   */
  messages(conversationId: string): Message[] {
    const rows = this.db.prepare(`SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq`).all(conversationId) as MessageRow[];
    const docs = this.db
      .prepare(
        `SELECT a.message_id, a.fit, d.id, d.hash, COALESCE(a.name, d.name) AS name, d.kind, d.size, d.tokens, d.tokens_model, d.ocr_pages, d.pages_without_text FROM attachments a
         JOIN messages m ON m.id = a.message_id JOIN documents d ON d.id = a.document_id
         WHERE m.conversation_id = ? ORDER BY a.message_id, a.position`,
      )
      .all(conversationId) as (Omit<DocumentRow, 'text' | 'parts' | 'created_at'> & { message_id: string; fit: DocumentFit })[];
    const byMessage = new Map<string, DocumentInfo[]>();
    for (const d of docs) {
      const list = byMessage.get(d.message_id) ?? [];
      list.push({ ...toDocumentInfo(d), fit: d.fit });
      byMessage.set(d.message_id, list);
    }
    const versions = new Map<string | null, string[]>();
    for (const r of rows) {
      const at = versions.get(r.parent_id);
      if (at) at.push(r.id);
      else versions.set(r.parent_id, [r.id]);
    }
    return rows.filter((r) => r.on_path === 1).map((r) => withBranches(toMessage(r, byMessage.get(r.id)), versions.get(r.parent_id)));
  }

  /**
   * Takes a message and every message after it off the conversation's path (they stay stored,
   * as a branch). The next appended message then continues from the one before it.
   * @throws ServiceError NOT_FOUND.
   */
  leavePath(conversationId: string, messageId: string): void {
    const row = this.s.messageRow(messageId);
    if (row.conversation_id !== conversationId) throw notFound('message', messageId);
    this.db.prepare(`UPDATE messages SET on_path = 0 WHERE conversation_id = ? AND on_path = 1 AND seq >= ?`).run(conversationId, row.seq);
  }

  /**
   * Puts `messageId` on its conversation's path in place of the version there now, followed by
   * its newest line of replies (at each step the most recent child). Not an update of the
   * conversation (its place in the list stays). @throws ServiceError NOT_FOUND.
   */
  selectBranch(conversationId: string, messageId: string): void {
    this.db.transaction(() => {
      const row = this.s.messageRow(messageId);
      if (row.conversation_id !== conversationId) throw notFound('message', messageId);
      if (row.on_path === 1) return;
      const current = this.db
        .prepare(`SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS ? AND on_path = 1`)
        .get(conversationId, row.parent_id) as MessageRow | undefined;
      if (current) this.leavePath(conversationId, current.id);
      const put = this.db.prepare(`UPDATE messages SET on_path = 1 WHERE id = ?`);
      const newestChild = this.db.prepare(`SELECT id FROM messages WHERE conversation_id = ? AND parent_id = ? ORDER BY seq DESC LIMIT 1`).pluck();
      for (let id: string | undefined = messageId; id !== undefined; id = newestChild.get(conversationId, id) as string | undefined) put.run(id);
    })();
  }

  /** One message. @throws ServiceError NOT_FOUND. */
  getMessage(id: string): Message {
    const row = this.s.messageRow(id);
    return this.messages(row.conversation_id).find((m) => m.id === id) ?? toMessage(row);
  }

  /**
   * Appends a message at the end of a conversation's path and marks the conversation updated.
   * @throws ServiceError NOT_FOUND for an unknown conversation.
   */
  appendMessage(conversationId: string, m: NewMessage): Message {
    return this.db.transaction((): Message => {
      this.s.conversationRow(conversationId);
      const { next } = this.db.prepare(`SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM messages WHERE conversation_id = ?`).get(conversationId) as { next: number };
      const parent = this.db.prepare(`SELECT id FROM messages WHERE conversation_id = ? AND on_path = 1 ORDER BY seq DESC LIMIT 1`).pluck().get(conversationId) as string | undefined;
      const now = this.s.stamp();
      const row: MessageRow = {
        id: randomUUID(),
        conversation_id: conversationId,
        seq: next,
        role: m.role,
        content: m.content,
        status: m.status,
        stats: m.stats ? JSON.stringify(m.stats) : null,
        error: m.error ?? null,
        created_at: now,
        parent_id: parent ?? null,
        on_path: 1,
        reasoning: m.reasoning || null,
      };
      this.db
        .prepare(
          `INSERT INTO messages (id, conversation_id, seq, role, content, status, stats, error, created_at, parent_id, on_path, reasoning)
           VALUES (@id, @conversation_id, @seq, @role, @content, @status, @stats, @error, @created_at, @parent_id, @on_path, @reasoning)`,
        )
        .run(row);
      this.s.touch(conversationId, now);
      return toMessage(row);
    })();
  }

  /**
   * Changes a message's content, reasoning, status, stats or error. A message deleted meanwhile (its
   * conversation removed while an answer streamed) is ignored. @returns whether a row changed.
   */
  updateMessage(id: string, patch: MessagePatch): boolean {
    if (this.s.closed) return false;
    const sets: string[] = [];
    const values: Record<string, unknown> = { id };
    if (patch.content !== undefined) (sets.push('content = @content'), (values.content = patch.content));
    if (patch.reasoning !== undefined) (sets.push('reasoning = @reasoning'), (values.reasoning = patch.reasoning || null));
    if (patch.status !== undefined) (sets.push('status = @status'), (values.status = patch.status));
    if (patch.stats !== undefined) (sets.push('stats = @stats'), (values.stats = patch.stats ? JSON.stringify(patch.stats) : null));
    if (patch.error !== undefined) (sets.push('error = @error'), (values.error = patch.error));
    if (sets.length === 0) return false;
    return this.db.prepare(`UPDATE messages SET ${sets.join(', ')} WHERE id = @id`).run(values).changes > 0;
  }

  /** Deletes the messages that come after `messageId` in its conversation. @returns how many. */
  deleteMessagesAfter(conversationId: string, messageId: string): number {
    const m = this.getMessage(messageId);
    if (m.conversationId !== conversationId) throw notFound('message', messageId);
    const seq = (this.db.prepare(`SELECT seq FROM messages WHERE id = ?`).get(messageId) as { seq: number }).seq;
    const r = this.db.prepare(`DELETE FROM messages WHERE conversation_id = ? AND seq > ?`).run(conversationId, seq);
    this.s.touch(conversationId, this.s.stamp());
    return r.changes;
  }

  /**
   * Deletes a message of a conversation with its answer: a user message takes the assistant
   * messages after it (up to the next user message) along; an assistant message goes alone.
   * Documents it carried go with it unless another message carries them too.
   * @returns the deleted ids, in order. @throws ServiceError NOT_FOUND.
   */
  deleteMessageWithAnswer(conversationId: string, messageId: string): string[] {
    return this.db.transaction((): string[] => {
      const all = this.messages(conversationId);
      const i = all.findIndex((m) => m.id === messageId);
      if (i < 0) throw notFound('message', messageId);
      let end = i + 1;
      if (all[i].role === 'user') while (end < all.length && all[end].role !== 'user') end++;
      const ids = all.slice(i, end).map((m) => m.id);
      const del = this.db.prepare(`DELETE FROM messages WHERE id = ?`);
      for (const id of ids) del.run(id);
      this.s.touch(conversationId, this.s.stamp());
      return ids;
    })();
  }

  /** Deletes one message. @returns whether it existed. */
  deleteMessage(id: string): boolean {
    return this.db.prepare(`DELETE FROM messages WHERE id = ?`).run(id).changes > 0;
  }

  /**
   * Answers left 'streaming' by a process that died: marks them 'error' with `reason`, or with
   * `reasons.get(id)` for those that have one of their own, keeping their text. Call once at
   * start, before any answer runs. @returns how many were fixed.
   */
  recoverInterrupted(reason: string, reasons: ReadonlyMap<string, string> = new Map()): number {
    return this.db.transaction((): number => {
      const own = this.db.prepare(`UPDATE messages SET status = 'error', error = ? WHERE id = ? AND status = 'streaming'`);
      let fixed = 0;
      for (const [id, text] of reasons) fixed += own.run(text, id).changes;
      return fixed + this.db.prepare(`UPDATE messages SET status = 'error', error = ? WHERE status = 'streaming'`).run(reason).changes;
    })();
  }
}
