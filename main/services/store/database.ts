/**
 * The conversation store's open SQLite file, shared by its parts (conversations, messages and
 * branches, documents, settings): better-sqlite3, WAL, foreign keys on, migrated to the current
 * schema at open. Also what the parts share: the strictly increasing timestamp ("most recent
 * first" is exact even within one millisecond), the row lookups that throw NOT_FOUND, and the
 * "conversation updated" touch. Synchronous: every call is one short statement or transaction.
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { ServiceError } from '../errors.ts';
import { migrate } from './migrations.ts';
import { notFound, type ConversationRow, type MessageRow } from './rows.ts';

export const DB_FILE = 'ropewalk.db';

/** The injectable clock of a store: ms since the epoch (`Date.now` by default). */
export type StoreClock = () => number;

/** `<dataDir>/ropewalk.db`, open and migrated, with what the store's parts share. */
export class StoreDatabase {
  readonly file: string;
  readonly db: Database.Database;
  /** Set by `close()`; later updates of messages are ignored. */
  closed = false;
  /** Last timestamp handed out. */
  private lastStamp = 0;

  /**
   * Opens (creating if needed) `<dataDir>/ropewalk.db` and migrates it to the current schema.
   * @throws ServiceError DATA_DIR when the folder cannot be created, SCHEMA_TOO_NEW when the file
   *   was written by a newer version; SQLite's own error for an unreadable or corrupt file.
   */
  constructor(
    dataDir: string,
    private readonly now: StoreClock = Date.now,
  ) {
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
    migrate(this.db, this.file);
  }

  /** Now in ms since the epoch, but always later than the previous stamp of this store. */
  stamp(): number {
    this.lastStamp = Math.max(this.now(), this.lastStamp + 1);
    return this.lastStamp;
  }

  /** A conversation's row. @throws ServiceError NOT_FOUND. */
  conversationRow(id: string): ConversationRow {
    const row = this.db.prepare(`SELECT * FROM conversations WHERE id = ?`).get(id) as ConversationRow | undefined;
    if (!row) throw notFound('conversation', id);
    return row;
  }

  /** A message's row. @throws ServiceError NOT_FOUND. */
  messageRow(id: string): MessageRow {
    const row = this.db.prepare(`SELECT * FROM messages WHERE id = ?`).get(id) as MessageRow | undefined;
    if (!row) throw notFound('message', id);
    return row;
  }

  /** Marks a conversation updated at `now` (its place in the list: most recent first). */
  touch(conversationId: string, now: number): void {
    this.db.prepare(`UPDATE conversations SET updated_at = ? WHERE id = ?`).run(now, conversationId);
  }

  /** Closes the file (idempotent). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
