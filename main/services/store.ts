/**
 * The conversation store: conversations, their messages and the settings, in one SQLite file
 * (`<dataDir>/ropewalk.db`, better-sqlite3, WAL, foreign keys on). Synchronous by design: every
 * call is one short statement or transaction on the main thread, so a caller never sees a half
 * written state. The schema evolves through `MIGRATIONS`, applied in order and recorded in
 * `PRAGMA user_version`; a database from a newer app version is refused rather than damaged.
 *
 * Branches: messages form a tree (`parent_id`: the message before it when it was written).
 * Regenerate and edit do not delete: the replaced message and what followed it leave the
 * conversation's path (`on_path = 0`) and the new one is written beside it, under the same
 * parent. A conversation's messages are its path, in order; a message with other versions at
 * its place carries `branches` (their ids, oldest first). `selectBranch` puts another version,
 * and the newest line of messages after it, on the path.
 *
 * Errors: a missing conversation or message throws `ServiceError('NOT_FOUND', …)`; anything
 * SQLite reports (disk full, corrupt file) propagates as the driver's error.
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { AnswerStats, ContextFullPolicy, Conversation, ConversationSummary, DocumentFit, DocumentInfo, Message, MessageStatus, Role } from '../contract/types.ts';
import type { DocumentPart, ExtractedDocument } from '../documents/extract.ts';
import { ServiceError } from './errors.ts';

export const DB_FILE = 'ropewalk.db';
export const DEFAULT_TITLE = 'New chat';
/** Longest automatic title, in characters (before the ellipsis). */
export const AUTO_TITLE_CHARS = 40;

/** Each entry moves the schema from version i to i + 1. Never edit one that has shipped. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE conversations (
     id           TEXT PRIMARY KEY,
     title        TEXT NOT NULL,
     -- 'default' (still "New chat"), 'auto' (from the first message) or 'user' (named by the user)
     title_source TEXT NOT NULL DEFAULT 'default' CHECK (title_source IN ('default', 'auto', 'user')),
     created_at   INTEGER NOT NULL,
     updated_at   INTEGER NOT NULL
   );
   CREATE TABLE messages (
     id              TEXT PRIMARY KEY,
     conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
     seq             INTEGER NOT NULL,
     role            TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
     content         TEXT NOT NULL,
     status          TEXT NOT NULL CHECK (status IN ('complete', 'streaming', 'cancelled', 'error')),
     stats           TEXT,
     error           TEXT,
     created_at      INTEGER NOT NULL,
     UNIQUE (conversation_id, seq)
   );
   CREATE TABLE settings (
     key   TEXT PRIMARY KEY,
     value TEXT NOT NULL
   );
   CREATE INDEX conversations_by_update ON conversations(updated_at DESC);`,
  // Documents, stored once per content (hash), linked to the user messages that carry them. A
  // document goes when its last attachment goes (a deleted message or conversation).
  `CREATE TABLE documents (
     id           TEXT PRIMARY KEY,
     hash         TEXT NOT NULL UNIQUE,  -- SHA-256 of the file's bytes
     name         TEXT NOT NULL,
     kind         TEXT NOT NULL,
     size         INTEGER NOT NULL,      -- bytes
     text         TEXT NOT NULL,         -- extracted text
     parts        TEXT NOT NULL,         -- JSON [{ label, start }]: pages or sections
     tokens       INTEGER,               -- token count of text alone, for tokens_model
     tokens_model TEXT,                  -- the model bundle that counted it
     created_at   INTEGER NOT NULL
   );
   CREATE TABLE attachments (
     message_id  TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
     document_id TEXT NOT NULL REFERENCES documents(id),
     position    INTEGER NOT NULL,
     -- 'whole' (the text as it is) or 'relevant' (the chunks that rank best for the question)
     fit         TEXT NOT NULL DEFAULT 'whole' CHECK (fit IN ('whole', 'relevant')),
     PRIMARY KEY (message_id, position)
   );
   CREATE INDEX attachments_by_document ON attachments(document_id);
   CREATE TRIGGER attachments_release AFTER DELETE ON attachments
   WHEN NOT EXISTS (SELECT 1 FROM attachments WHERE document_id = OLD.document_id)
   BEGIN DELETE FROM documents WHERE id = OLD.document_id; END;`,
  // Branches. Existing conversations are one line: each message's parent is the one before it.
  `ALTER TABLE messages ADD COLUMN parent_id TEXT;
   ALTER TABLE messages ADD COLUMN on_path INTEGER NOT NULL DEFAULT 1 CHECK (on_path IN (0, 1));
   UPDATE messages SET parent_id = (
     SELECT p.id FROM messages p WHERE p.conversation_id = messages.conversation_id AND p.seq < messages.seq ORDER BY p.seq DESC LIMIT 1
   );
   CREATE INDEX messages_by_parent ON messages(conversation_id, parent_id);`,
  // A conversation's own context-full policy; NULL: the setting's.
  `ALTER TABLE conversations ADD COLUMN context_full_policy TEXT
     CHECK (context_full_policy IS NULL OR context_full_policy IN ('stop', 'truncate-middle', 'rolling-window'));`,
  // An assistant message's reasoning (a reasoning model's <think> block), apart from its content
  // (NULL: none), and a conversation's Think toggle (NULL: the chat template's default).
  `ALTER TABLE messages ADD COLUMN reasoning TEXT;
   ALTER TABLE conversations ADD COLUMN thinking INTEGER CHECK (thinking IS NULL OR thinking IN (0, 1));`,
  // Pages of a document read by OCR, and pages without any text: JSON arrays of page numbers; NULL: none.
  `ALTER TABLE documents ADD COLUMN ocr_pages TEXT;
   ALTER TABLE documents ADD COLUMN pages_without_text TEXT;`,
];

interface ConversationRow {
  id: string;
  title: string;
  title_source: 'default' | 'auto' | 'user';
  created_at: number;
  updated_at: number;
  context_full_policy: ContextFullPolicy | null;
  thinking: 0 | 1 | null;
}

interface MessageRow {
  id: string;
  conversation_id: string;
  seq: number;
  role: Role;
  content: string;
  status: MessageStatus;
  stats: string | null;
  error: string | null;
  created_at: number;
  parent_id: string | null;
  on_path: 0 | 1;
  reasoning: string | null;
}

interface DocumentRow {
  id: string;
  hash: string;
  name: string;
  kind: DocumentInfo['kind'];
  size: number;
  text: string;
  parts: string;
  tokens: number | null;
  tokens_model: string | null;
  created_at: number;
  ocr_pages: string | null;
  pages_without_text: string | null;
}

/** A stored document with its text and parts. */
export interface StoredDocument extends DocumentInfo {
  text: string;
  parts: DocumentPart[];
}

/** A document attached to a message, as the prompt uses it. */
export interface Attachment {
  document: StoredDocument;
  fit: DocumentFit;
}

/** What may change on a message after it was appended. */
export interface MessagePatch {
  content?: string;
  /** The reasoning ('' or null: none). */
  reasoning?: string | null;
  status?: MessageStatus;
  stats?: AnswerStats | null;
  error?: string | null;
}

/** Conversations, messages and settings in SQLite (`<dataDir>/ropewalk.db`, WAL, migrations). */
export class ConversationStore {
  readonly file: string;
  private readonly db: Database.Database;
  private closed = false;
  /** Last timestamp handed out: stamps are strictly increasing, so "most recent first" is exact. */
  private lastStamp = 0;

  /**
   * Opens (creating if needed) `<dataDir>/ropewalk.db` and migrates it to the current schema.
   * @throws ServiceError DATA_DIR when the folder cannot be created, SCHEMA_TOO_NEW when the file
   *   was written by a newer version; SQLite's own error for an unreadable or corrupt file.
   */
  constructor(dataDir: string) {
    try {
      mkdirSync(dataDir, { recursive: true });
    } catch (e) {
      throw new ServiceError('DATA_DIR', `cannot create the data folder ${dataDir}: ${(e as Error).message}`);
    }
    this.file = path.join(dataDir, DB_FILE);
    this.db = new Database(this.file);
    this.db.pragma('journal_mode = WAL');
    // WAL + NORMAL: a committed write survives the process being killed; only a power loss can
    // drop the last transactions. Every streamed-answer update would otherwise cost an fsync.
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
    this.db.pragma('busy_timeout = 2000');
    this.migrate();
  }

  /** Schema version of the open file (number of migrations applied). */
  get schemaVersion(): number {
    return this.db.pragma('user_version', { simple: true }) as number;
  }

  /** SQLite's journal mode of the open file ('wal'). */
  get journalMode(): string {
    return this.db.pragma('journal_mode', { simple: true }) as string;
  }

  private migrate(): void {
    const current = this.schemaVersion;
    if (current > MIGRATIONS.length) {
      this.db.close();
      throw new ServiceError('SCHEMA_TOO_NEW', `${this.file} was written by a newer version of Ropewalk (schema ${current}, this one knows ${MIGRATIONS.length})`);
    }
    for (let v = current; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v]);
        this.db.pragma(`user_version = ${v + 1}`);
      })();
    }
  }

  // ---- conversations ----

  /**
   * Conversations, most recently updated first. `search` matches titles and message text as a
   * literal substring, case-insensitively for ASCII (`%` and `_` are not wildcards); a
   * conversation found by its messages carries `match`, the text around the first hit.
   */
  listConversations(search?: string): ConversationSummary[] {
    const q = search?.trim();
    if (!q) return (this.db.prepare(`SELECT * FROM conversations ORDER BY updated_at DESC, rowid DESC`).all() as ConversationRow[]).map(toSummary);
    const rows = this.db
      .prepare(
        `SELECT c.*, (SELECT m.content FROM messages m WHERE m.conversation_id = c.id AND m.on_path = 1 AND m.role <> 'system' AND m.content LIKE @q ESCAPE '\\' ORDER BY m.seq LIMIT 1) AS hit
         FROM conversations c
         WHERE c.title LIKE @q ESCAPE '\\' OR hit IS NOT NULL
         ORDER BY c.updated_at DESC, c.rowid DESC`,
      )
      .all({ q: `%${escapeLike(q)}%` }) as Array<ConversationRow & { hit: string | null }>;
    return rows.map((r) => (r.hit === null ? toSummary(r) : { ...toSummary(r), match: snippet(r.hit, q) }));
  }

  /** Creates an empty conversation; without a title it is "New chat" until its first message. */
  createConversation(title?: string): Conversation {
    const now = this.stamp();
    const t = title?.trim();
    const row: ConversationRow = { id: randomUUID(), title: t || DEFAULT_TITLE, title_source: t ? 'user' : 'default', created_at: now, updated_at: now, context_full_policy: null, thinking: null };
    this.db
      .prepare(`INSERT INTO conversations (id, title, title_source, created_at, updated_at) VALUES (@id, @title, @title_source, @created_at, @updated_at)`)
      .run(row);
    return { ...toSummary(row), messages: [] };
  }

  /** Creates a conversation holding `messages` in order (an import), in one transaction. */
  importConversation(title: string, messages: ReadonlyArray<{ role: Role; content: string; reasoning?: string; status: MessageStatus; stats: AnswerStats | null; error: string | null }>): Conversation {
    return this.db.transaction((): Conversation => {
      const c = this.createConversation(title);
      this.db.prepare(`UPDATE conversations SET title_source = 'user' WHERE id = ?`).run(c.id);
      for (const m of messages) this.appendMessage(c.id, m);
      return this.getConversation(c.id);
    })();
  }

  /** A conversation summary. @throws ServiceError NOT_FOUND. */
  getSummary(id: string): ConversationSummary {
    return toSummary(this.conversationRow(id));
  }

  /** A conversation with its messages in order. @throws ServiceError NOT_FOUND. */
  getConversation(id: string): Conversation {
    const row = this.conversationRow(id);
    return { ...toSummary(row), messages: this.messages(id) };
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

  // ---- messages ----

  /**
   * The messages on a conversation's path, in order (empty for an unknown id); one with other
   * versions at its place carries `branches`.
   */
  messages(conversationId: string): Message[] {
    const rows = this.db.prepare(`SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq`).all(conversationId) as MessageRow[];
    const docs = this.db
      .prepare(
        `SELECT a.message_id, a.fit, d.id, d.hash, d.name, d.kind, d.size, d.tokens, d.tokens_model, d.ocr_pages, d.pages_without_text FROM attachments a
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
    const row = this.messageRow(messageId);
    if (row.conversation_id !== conversationId) throw notFound('message', messageId);
    this.db.prepare(`UPDATE messages SET on_path = 0 WHERE conversation_id = ? AND on_path = 1 AND seq >= ?`).run(conversationId, row.seq);
  }

  /**
   * Puts `messageId` on its conversation's path in place of the version there now, followed by
   * its newest line of replies (at each step the most recent child). Not an update of the
   * conversation (its place in the list stays). @throws ServiceError NOT_FOUND.
   */
  selectBranch(conversationId: string, messageId: string): Conversation {
    this.db.transaction(() => {
      const row = this.messageRow(messageId);
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
    return this.getConversation(conversationId);
  }

  /** One message. @throws ServiceError NOT_FOUND. */
  getMessage(id: string): Message {
    const row = this.messageRow(id);
    return this.messages(row.conversation_id).find((m) => m.id === id) ?? toMessage(row);
  }

  /**
   * Appends a message at the end of a conversation's path and marks the conversation updated.
   * @throws ServiceError NOT_FOUND for an unknown conversation.
   */
  appendMessage(conversationId: string, m: { role: Role; content: string; reasoning?: string; status: MessageStatus; stats?: AnswerStats | null; error?: string | null }): Message {
    return this.db.transaction((): Message => {
      this.conversationRow(conversationId);
      const { next } = this.db.prepare(`SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM messages WHERE conversation_id = ?`).get(conversationId) as { next: number };
      const parent = this.db.prepare(`SELECT id FROM messages WHERE conversation_id = ? AND on_path = 1 ORDER BY seq DESC LIMIT 1`).pluck().get(conversationId) as string | undefined;
      const now = this.stamp();
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
      this.touch(conversationId, now);
      return toMessage(row);
    })();
  }

  // ---- documents ----

  /**
   * Stores an extracted document, or returns the one with the same content (hash) already stored.
   * Until a message carries it, it is a draft: `releaseDraftDocuments` removes drafts.
   */
  putDocument(d: Omit<ExtractedDocument, 'ocrPages' | 'pagesWithoutText'> & Partial<Pick<ExtractedDocument, 'ocrPages' | 'pagesWithoutText'>>): StoredDocument {
    const existing = this.db.prepare(`SELECT * FROM documents WHERE hash = ?`).get(d.hash) as DocumentRow | undefined;
    if (existing) return toStoredDocument(existing);
    const row: DocumentRow = {
      id: randomUUID(),
      hash: d.hash,
      name: d.name,
      kind: d.kind,
      size: d.size,
      text: d.text,
      parts: JSON.stringify(d.parts),
      tokens: null,
      tokens_model: null,
      created_at: this.stamp(),
      ocr_pages: pageList(d.ocrPages),
      pages_without_text: pageList(d.pagesWithoutText),
    };
    this.db
      .prepare(
        `INSERT INTO documents (id, hash, name, kind, size, text, parts, tokens, tokens_model, created_at, ocr_pages, pages_without_text)
         VALUES (@id, @hash, @name, @kind, @size, @text, @parts, @tokens, @tokens_model, @created_at, @ocr_pages, @pages_without_text)`,
      )
      .run(row);
    return toStoredDocument(row);
  }

  /** A stored document with its text. @throws ServiceError NOT_FOUND. */
  getDocument(id: string): StoredDocument {
    const row = this.db.prepare(`SELECT * FROM documents WHERE id = ?`).get(id) as DocumentRow | undefined;
    if (!row) throw notFound('document', id);
    return toStoredDocument(row);
  }

  /** A document's token count as counted by `model`, or null when that model has not counted it. */
  documentTokens(id: string, model: string): number | null {
    const row = this.db.prepare(`SELECT tokens FROM documents WHERE id = ? AND tokens_model = ?`).get(id, model) as { tokens: number | null } | undefined;
    return row?.tokens ?? null;
  }

  /** Records a document's token count as counted by `model` (a bundle folder). */
  setDocumentTokens(id: string, tokens: number, model: string): void {
    this.db.prepare(`UPDATE documents SET tokens = ?, tokens_model = ? WHERE id = ?`).run(tokens, model, id);
  }

  /**
   * Links documents to a user message, in order, with how each is fitted into the prompt.
   * @throws ServiceError NOT_FOUND for an unknown document.
   */
  attachDocuments(messageId: string, documents: readonly { id: string; fit: DocumentFit }[]): void {
    const put = this.db.prepare(`INSERT INTO attachments (message_id, document_id, position, fit) VALUES (?, ?, ?, ?)`);
    this.db.transaction(() => {
      documents.forEach((d, i) => {
        this.getDocument(d.id);
        put.run(messageId, d.id, i, d.fit);
      });
    })();
  }

  /** The documents a message carries, with their text, in order. */
  attachmentsOf(messageId: string): Attachment[] {
    const rows = this.db
      .prepare(`SELECT d.*, a.fit AS fit FROM attachments a JOIN documents d ON d.id = a.document_id WHERE a.message_id = ? ORDER BY a.position`)
      .all(messageId) as (DocumentRow & { fit: DocumentFit })[];
    return rows.map((r) => ({ document: toStoredDocument(r), fit: r.fit }));
  }

  /** Number of stored documents (drafts included). */
  countDocuments(): number {
    return (this.db.prepare(`SELECT COUNT(*) AS n FROM documents`).get() as { n: number }).n;
  }

  /** Removes documents no message carries (drafts of a composer that was never sent). @returns how many. */
  releaseDraftDocuments(): number {
    return this.db.prepare(`DELETE FROM documents WHERE id NOT IN (SELECT document_id FROM attachments)`).run().changes;
  }

  /**
   * Changes a message's content, reasoning, status, stats or error. A message deleted meanwhile (its
   * conversation removed while an answer streamed) is ignored. @returns whether a row changed.
   */
  updateMessage(id: string, patch: MessagePatch): boolean {
    if (this.closed) return false;
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
    this.touch(conversationId, this.stamp());
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
      this.touch(conversationId, this.stamp());
      return ids;
    })();
  }

  /** Deletes one message. @returns whether it existed. */
  deleteMessage(id: string): boolean {
    return this.db.prepare(`DELETE FROM messages WHERE id = ?`).run(id).changes > 0;
  }

  /**
   * Answers left 'streaming' by a process that died: marks them 'error' with `reason`, keeping
   * their text. Call once at start, before any answer runs. @returns how many were fixed.
   */
  recoverInterrupted(reason: string): number {
    return this.db.prepare(`UPDATE messages SET status = 'error', error = ? WHERE status = 'streaming'`).run(reason).changes;
  }

  // ---- settings ----

  /** All stored settings, key → parsed JSON value (unparseable rows are skipped). */
  getSettings(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const { key, value } of this.db.prepare(`SELECT key, value FROM settings`).all() as { key: string; value: string }[]) {
      try {
        out[key] = JSON.parse(value);
      } catch {
        // A hand-edited row; the default applies.
      }
    }
    return out;
  }

  /** Stores settings (JSON); `undefined` values delete their key. One transaction. */
  setSettings(values: Record<string, unknown>): void {
    const put = this.db.prepare(`INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`);
    const del = this.db.prepare(`DELETE FROM settings WHERE key = ?`);
    this.db.transaction(() => {
      for (const [k, v] of Object.entries(values)) {
        if (v === undefined) del.run(k);
        else put.run(k, JSON.stringify(v));
      }
    })();
  }

  /** Closes the database (idempotent); later updates of messages are ignored. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }

  private conversationRow(id: string): ConversationRow {
    const row = this.db.prepare(`SELECT * FROM conversations WHERE id = ?`).get(id) as ConversationRow | undefined;
    if (!row) throw notFound('conversation', id);
    return row;
  }

  private messageRow(id: string): MessageRow {
    const row = this.db.prepare(`SELECT * FROM messages WHERE id = ?`).get(id) as MessageRow | undefined;
    if (!row) throw notFound('message', id);
    return row;
  }

  private touch(conversationId: string, now: number): void {
    this.db.prepare(`UPDATE conversations SET updated_at = ? WHERE id = ?`).run(now, conversationId);
  }

  /** Now in ms since the epoch, but always later than the previous stamp of this store. */
  private stamp(): number {
    this.lastStamp = Math.max(Date.now(), this.lastStamp + 1);
    return this.lastStamp;
  }
}

/** `text` with LIKE's wildcards and the escape character itself escaped (ESCAPE '\'). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** A title from a message: whitespace collapsed, at most ~40 characters, cut at a word if one is near. */
export function autoTitle(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= AUTO_TITLE_CHARS) return flat;
  const cut = flat.slice(0, AUTO_TITLE_CHARS);
  const space = cut.lastIndexOf(' ');
  return `${(space >= AUTO_TITLE_CHARS * 0.6 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** Characters of a search match's context shown before and after the hit. */
const SNIPPET_BEFORE = 30;
const SNIPPET_AFTER = 60;

/**
 * The text around the first case-insensitive occurrence of `query` in `text`, whitespace
 * collapsed, with "…" where it was cut: what the list shows under a conversation found by its
 * messages.
 */
export function snippet(text: string, query: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const at = flat.toLowerCase().indexOf(query.replace(/\s+/g, ' ').toLowerCase());
  if (at < 0) return flat.slice(0, SNIPPET_BEFORE + SNIPPET_AFTER);
  let start = Math.max(0, at - SNIPPET_BEFORE);
  let end = Math.min(flat.length, at + query.length + SNIPPET_AFTER);
  // Cut at word boundaries when one is near, so the snippet starts and ends with whole words.
  const after = start > 0 ? flat.indexOf(' ', start) : -1;
  if (after >= 0 && after < at) start = after + 1;
  const before = end < flat.length ? flat.lastIndexOf(' ', end) : -1;
  if (before > at + query.length) end = before;
  return `${start > 0 ? '…' : ''}${flat.slice(start, end)}${end < flat.length ? '…' : ''}`;
}

function notFound(what: string, id: string): ServiceError {
  return new ServiceError('NOT_FOUND', `no ${what} with id ${id.slice(0, 64)}`);
}

function toSummary(r: ConversationRow): ConversationSummary {
  const summary: ConversationSummary = { id: r.id, title: r.title, createdAt: r.created_at, updatedAt: r.updated_at };
  if (r.context_full_policy) summary.contextFullPolicy = r.context_full_policy;
  if (r.thinking !== null && r.thinking !== undefined) summary.thinking = r.thinking === 1;
  return summary;
}

function toDocumentInfo(r: Pick<DocumentRow, 'id' | 'hash' | 'name' | 'kind' | 'size' | 'tokens' | 'tokens_model' | 'ocr_pages' | 'pages_without_text'>): DocumentInfo {
  const info: DocumentInfo = { id: r.id, name: r.name, kind: r.kind, size: r.size, hash: r.hash, tokens: r.tokens, fit: 'whole' };
  if (r.ocr_pages) info.ocrPages = JSON.parse(r.ocr_pages) as number[];
  if (r.pages_without_text) info.pagesWithoutText = JSON.parse(r.pages_without_text) as number[];
  return info;
}

/** Page numbers as stored: a JSON array, or NULL for none. */
function pageList(pages: readonly number[] | undefined): string | null {
  return pages && pages.length > 0 ? JSON.stringify(pages) : null;
}

function toStoredDocument(r: DocumentRow): StoredDocument {
  return { ...toDocumentInfo(r), text: r.text, parts: JSON.parse(r.parts) as DocumentPart[] };
}

/** The message with `branches` set when there are other versions at its place. */
function withBranches(m: Message, versions: readonly string[] | undefined): Message {
  return versions && versions.length > 1 ? { ...m, branches: [...versions] } : m;
}

function toMessage(r: MessageRow, documents: DocumentInfo[] = []): Message {
  return {
    documents,
    id: r.id,
    conversationId: r.conversation_id,
    role: r.role,
    content: r.content,
    ...(r.reasoning ? { reasoning: r.reasoning } : {}),
    status: r.status,
    stats: r.stats ? (JSON.parse(r.stats) as AnswerStats) : null,
    error: r.error,
    createdAt: r.created_at,
  };
}
