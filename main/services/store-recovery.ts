/**
 * Opening the conversations database when it may be damaged. `openConversationStore(dataDir)`
 * checks `<dataDir>/ropewalk.db` first (SQLite must be able to read it, and `PRAGMA
 * integrity_check` must say "ok"); a file that fails is moved aside, with its -wal and -shm
 * files, to `ropewalk.db.corrupt-<UTC date and time>` beside it, and a fresh database is started.
 * What happened comes back as a `StoreRecovery` whose `message` is the one line the user is shown
 * (serve's stderr, the window's dialog). Errors that are not damage (the folder cannot be
 * created, a newer schema, permissions) propagate unchanged: moving such a file would lose data.
 */
import Database from 'better-sqlite3';
import { existsSync, renameSync } from 'node:fs';
import path from 'node:path';
import { ServiceError } from './errors.ts';
import { ConversationStore, DB_FILE } from './store.ts';

/** A damaged database that was moved aside. */
export interface StoreRecovery {
  /** The database's path (a fresh one is there now). */
  file: string;
  /** Where the damaged file went. */
  movedTo: string;
  /** What SQLite said: its error, or integrity_check's first findings. */
  reason: string;
  /** One line for the user, naming both files. */
  message: string;
}

/** SQLite's result codes for a file that is not a database or is damaged (SQLITE_CORRUPT_*). */
function isDamage(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT'));
}

/**
 * Why `file` cannot be used as it is, or null when it is sound or does not exist.
 * Reads every page (`PRAGMA integrity_check`: linear in the file's size).
 * @throws SQLite's error when the failure is not damage (e.g. SQLITE_CANTOPEN, SQLITE_IOERR).
 */
export function databaseDamage(file: string): string | null {
  if (!existsSync(file)) return null;
  let db: Database.Database | null = null;
  try {
    db = new Database(file, { fileMustExist: true });
    const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
    const findings = rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
    return findings.length ? `integrity check: ${findings.slice(0, 3).join('; ')}` : null;
  } catch (e) {
    if (isDamage(e)) return (e as Error).message;
    throw e;
  } finally {
    db?.close();
  }
}

/** `ropewalk.db.corrupt-2026-12-01T23-05-09Z`: sortable, and a legal file name everywhere. */
export function corruptName(file: string, now: Date): string {
  return `${file}.corrupt-${now.toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-')}`;
}

/**
 * Moves `file` and its -wal / -shm companions to `corruptName(file, now)` (+ the same suffixes).
 * @throws ServiceError DATA_DIR when a rename fails (the damaged file then stays where it is).
 */
function moveAside(file: string, now: Date): string {
  const target = corruptName(file, now);
  for (const suffix of ['', '-wal', '-shm']) {
    if (!existsSync(file + suffix)) continue;
    try {
      renameSync(file + suffix, target + suffix);
    } catch (e) {
      throw new ServiceError('DATA_DIR', `${file} is damaged and cannot be moved aside: ${(e as Error).message}`);
    }
  }
  return target;
}

/**
 * Opens the store in `dataDir`, replacing a damaged database by a fresh one (see the file
 * comment). `recovery` is null when the database was sound or new.
 * @throws ServiceError DATA_DIR / SCHEMA_TOO_NEW as ConversationStore does; SQLite's error for
 *   failures that are not damage.
 */
export function openConversationStore(dataDir: string, now = new Date()): { store: ConversationStore; recovery: StoreRecovery | null } {
  const file = path.join(dataDir, DB_FILE);
  const recover = (reason: string): StoreRecovery => {
    const movedTo = moveAside(file, now);
    const message = `the conversations database ${file} could not be opened (${reason}); it was moved to ${movedTo} and a new, empty one was started`;
    return { file, movedTo, reason, message };
  };
  const reason = databaseDamage(file);
  let recovery = reason === null ? null : recover(reason);
  try {
    return { store: new ConversationStore(dataDir), recovery };
  } catch (e) {
    // Damage the check did not see (e.g. in a page the migrations write): once, the same way.
    if (recovery !== null || !isDamage(e)) throw e;
    recovery = recover((e as Error).message);
    return { store: new ConversationStore(dataDir), recovery };
  }
}
