/**
 * The conversation store's schema: `MIGRATIONS`, applied in order and recorded in SQLite's
 * `PRAGMA user_version`, so a file's version is the number of migrations it has seen. A database
 * from a newer app version (more migrations than this one knows) is refused rather than damaged.
 * Never edit a migration that has shipped: add one.
 */
import type Database from 'better-sqlite3';
import { ServiceError } from '../errors.ts';

/** Each entry moves the schema from version i to i + 1. Never edit one that has shipped. */
export const MIGRATIONS: readonly string[] = [
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
  // A conversation's own system prompt and sampler: JSON ChatSettings (main/contract/types.ts); NULL: none.
  `ALTER TABLE conversations ADD COLUMN chat_settings TEXT;`,
  // The name of the file as attached (NULL: the document's): the same content under two names
  // is one document, and each attachment keeps its own file's name.
  `ALTER TABLE attachments ADD COLUMN name TEXT;`,
];

/** Schema version of an open database (number of migrations applied). */
export function schemaVersion(db: Database.Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * Applies the migrations `db` has not seen, each in its own transaction.
 * @throws ServiceError SCHEMA_TOO_NEW (after closing `db`) when the file (`file`, for the message)
 *   was written by a newer version.
 */
export function migrate(db: Database.Database, file: string): void {
  const current = schemaVersion(db);
  if (current > MIGRATIONS.length) {
    db.close();
    throw new ServiceError('SCHEMA_TOO_NEW', `${file} was written by a newer version of Ropewalk (schema ${current}, this one knows ${MIGRATIONS.length})`);
  }
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}
