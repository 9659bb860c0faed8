/**
 * The conversation store: conversations, their messages and branches, documents and the
 * settings, in one SQLite file (`<dataDir>/ropewalk.db`, better-sqlite3, WAL, foreign keys on).
 * One object the services hold, made of small parts under `store/`: the open file and its
 * migrations (`database.ts`, `migrations.ts`), conversations (`conversations.ts`), messages and
 * branches (`messages.ts`: the tree, the path, selecting a branch), documents (`documents.ts`)
 * and settings (`settings.ts`); rows and their mapping to the contract's types in `rows.ts`.
 * Synchronous by design: every call is one short statement or transaction on the main thread, so
 * a caller never sees a half written state.
 *
 * Errors: a missing conversation, message or document throws `ServiceError('NOT_FOUND', …)`;
 * anything SQLite reports (disk full, corrupt file) propagates as the driver's error.
 */
import type { AttachedDocument, ChatSettings, ContextFullPolicy, Conversation, ConversationSummary, ExportedAttachment, Message } from '../contract/types.ts';
import type { ExtractedDocument } from '../documents/extract.ts';
import { ConversationTable } from './store/conversations.ts';
import { StoreDatabase, type StoreClock } from './store/database.ts';
import { DocumentTable } from './store/documents.ts';
import { MessageTable, type NewMessage } from './store/messages.ts';
import { schemaVersion } from './store/migrations.ts';
import type { Attachment, MessagePatch, StoredDocument } from './store/rows.ts';
import { SettingsTable } from './store/settings.ts';
import { UnsavedMarks, type UnsavedMark } from './store/unsaved-marks.ts';
import type { NotSavedReason } from '../contract/types.ts';

export { DB_FILE, type StoreClock } from './store/database.ts';
export { DEFAULT_TITLE } from './store/conversations.ts';
export { AUTO_TITLE_CHARS, autoTitle, escapeLike, snippet } from './store/text.ts';
export type { Attachment, MessagePatch, StoredDocument } from './store/rows.ts';
export type { NewMessage } from './store/messages.ts';
export type { UnsavedMark } from './store/unsaved-marks.ts';

/** Conversations, messages, documents and settings in SQLite; each method is its part's (see there). */
export class ConversationStore {
  readonly file: string;
  private readonly s: StoreDatabase;
  private readonly conversations: ConversationTable;
  private readonly messageTable: MessageTable;
  private readonly documents: DocumentTable;
  private readonly settings: SettingsTable;
  private readonly unsaved: UnsavedMarks;

  /**
   * Opens (creating if needed) `<dataDir>/ropewalk.db` and migrates it to the current schema.
   * `now` stamps conversations and messages (ms since the epoch; tests inject one).
   * @throws ServiceError DATA_DIR when the folder cannot be created, SCHEMA_TOO_NEW when the file
   *   was written by a newer version; SQLite's own error for an unreadable or corrupt file.
   */
  constructor(dataDir: string, now?: StoreClock) {
    this.s = new StoreDatabase(dataDir, now);
    this.file = this.s.file;
    this.conversations = new ConversationTable(this.s);
    this.messageTable = new MessageTable(this.s);
    this.documents = new DocumentTable(this.s);
    this.settings = new SettingsTable(this.s.db);
    this.unsaved = new UnsavedMarks(this.file);
  }

  /** Schema version of the open file (number of migrations applied). */
  get schemaVersion(): number {
    return schemaVersion(this.s.db);
  }

  /** SQLite's journal mode of the open file ('wal'). */
  get journalMode(): string {
    return this.s.db.pragma('journal_mode', { simple: true }) as string;
  }

  // ---- conversations (store/conversations.ts) ----
  listConversations(search?: string): ConversationSummary[] { return this.conversations.listConversations(search); }
  createConversation(title?: string): Conversation { return this.conversations.createConversation(title); }
  getSummary(id: string): ConversationSummary { return this.conversations.getSummary(id); }
  conversationPolicy(id: string): ContextFullPolicy | null { return this.conversations.conversationPolicy(id); }
  conversationThinking(id: string): boolean | null { return this.conversations.conversationThinking(id); }
  setConversationThinking(id: string, thinking: boolean | null): ConversationSummary { return this.conversations.setConversationThinking(id, thinking); }
  conversationSettings(id: string): ChatSettings | null { return this.conversations.conversationSettings(id); }
  setConversationSettings(id: string, settings: ChatSettings): ConversationSummary { return this.conversations.setConversationSettings(id, settings); }
  hasConversation(id: string): boolean { return this.conversations.hasConversation(id); }
  renameConversation(id: string, title: string): ConversationSummary { return this.conversations.renameConversation(id, title); }
  setConversationPolicy(id: string, policy: ContextFullPolicy | null): ConversationSummary { return this.conversations.setConversationPolicy(id, policy); }
  deleteConversation(id: string): void { this.conversations.deleteConversation(id); }
  setAutoTitle(id: string, text: string, replaceAuto = false): boolean { return this.conversations.setAutoTitle(id, text, replaceAuto); }

  /** A conversation with its messages in order. @throws ServiceError NOT_FOUND. */
  getConversation(id: string): Conversation {
    return { ...this.conversations.getSummary(id), messages: this.messageTable.messages(id) };
  }

  /** Creates a conversation holding `messages` in order (an import), in one transaction; its title counts as the user's. */
  importConversation(title: string, messages: ReadonlyArray<NewMessage & { attachments?: readonly ExportedAttachment[] }>): Conversation {
    return this.s.db.transaction((): Conversation => {
      const c = this.conversations.createConversation(title);
      this.s.db.prepare(`UPDATE conversations SET title_source = 'user' WHERE id = ?`).run(c.id);
      for (const { attachments, ...m } of messages) {
        const written = this.messageTable.appendMessage(c.id, m);
        const docs = m.role === 'user' ? (attachments ?? []).flatMap((a) => (a.text === null ? [] : [{ id: this.documents.importDocument({ ...a, text: a.text }).id, fit: 'whole' as const, name: a.name }])) : [];
        if (docs.length > 0) this.documents.attachDocuments(written.id, docs);
      }
      return this.getConversation(c.id);
    })();
  }

  // ---- messages and branches (store/messages.ts) ----
  messages(conversationId: string): Message[] { return this.messageTable.messages(conversationId); }
  leavePath(conversationId: string, messageId: string): void { this.messageTable.leavePath(conversationId, messageId); }
  getMessage(id: string): Message { return this.messageTable.getMessage(id); }
  appendMessage(conversationId: string, m: NewMessage): Message { return this.messageTable.appendMessage(conversationId, m); }
  updateMessage(id: string, patch: MessagePatch): boolean { return this.messageTable.updateMessage(id, patch); }
  deleteMessagesAfter(conversationId: string, messageId: string): number { return this.messageTable.deleteMessagesAfter(conversationId, messageId); }
  deleteMessageWithAnswer(conversationId: string, messageId: string): string[] { return this.messageTable.deleteMessageWithAnswer(conversationId, messageId); }
  deleteMessage(id: string): boolean { return this.messageTable.deleteMessage(id); }

  /**
   * Answers left 'streaming' by a process that died: 'error' with `reason`, or with
   * `unsavedReason(note)` for those whose last save failed and left a note in the sidecar
   * (store/unsaved-marks.ts); the notes are blanked after. Call once at start. @returns how many.
   */
  recoverInterrupted(reason: string, unsavedReason?: (note: UnsavedMark) => string): number {
    const own = new Map([...this.unsaved.left].map(([id, note]) => [id, unsavedReason ? unsavedReason(note) : reason]));
    const fixed = this.messageTable.recoverInterrupted(reason, own);
    this.unsaved.clearLeft();
    return fixed;
  }

  /** Notes beside the database that saving message `id` failed for `reason` (store/unsaved-marks.ts). @returns whether the note was written. */
  markUnsaved(id: string, reason: NotSavedReason): boolean { return this.unsaved.mark(id, reason, this.s.stamp()); }
  /** Drops the note of message `id` (it is saved). */
  clearUnsaved(id: string): void { this.unsaved.clear(id); }

  /** Puts another version of a message on the path (see MessageTable.selectBranch) and returns the conversation. */
  selectBranch(conversationId: string, messageId: string): Conversation {
    this.messageTable.selectBranch(conversationId, messageId);
    return this.getConversation(conversationId);
  }

  // ---- documents (store/documents.ts) ----
  putDocument(d: Omit<ExtractedDocument, 'ocrPages' | 'pagesWithoutText'> & Partial<Pick<ExtractedDocument, 'ocrPages' | 'pagesWithoutText'>>): StoredDocument { return this.documents.putDocument(d); }
  getDocument(id: string): StoredDocument { return this.documents.getDocument(id); }
  documentTokens(id: string, model: string): number | null { return this.documents.documentTokens(id, model); }
  setDocumentTokens(id: string, tokens: number, model: string): void { this.documents.setDocumentTokens(id, tokens, model); }
  attachDocuments(messageId: string, documents: readonly AttachedDocument[]): void { this.documents.attachDocuments(messageId, documents); }
  attachmentsOf(messageId: string): Attachment[] { return this.documents.attachmentsOf(messageId); }
  countDocuments(): number { return this.documents.countDocuments(); }
  releaseDraftDocuments(): number { return this.documents.releaseDraftDocuments(); }

  // ---- settings (store/settings.ts) ----
  getSettings(): Record<string, unknown> { return this.settings.getSettings(); }
  setSettings(values: Record<string, unknown>): void { this.settings.setSettings(values); }

  /** Closes the database (idempotent); later updates of messages are ignored. */
  close(): void {
    this.s.close();
  }
}
