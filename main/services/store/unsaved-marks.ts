/**
 * What can still be recorded when the disk is full: a sidecar beside the database
 * (`ropewalk.db-unsaved`), MARKS_BYTES long, written in full when the store opens (while there is
 * room) and afterwards only overwritten in place, never grown. On a full disk SQLite cannot write
 * (every write needs new pages or WAL frames) but overwriting blocks a file already owns needs no
 * new space on ext4, xfs and tmpfs, so an answer whose save fails can still leave a note: which
 * message, why ('disk full', 'read-only', 'disk error') and when. On the next start the store reads
 * the notes, marks those answers with the true cause, and blanks the file.
 * Limits, said plainly: on a read-only filesystem the sidecar cannot be written either; on
 * copy-on-write filesystems (btrfs, ZFS) an overwrite may need space too. Then no note is left and
 * the answer gets the generic "the app stopped" mark. Failures here never throw: a note is a
 * best effort beside the database, not a second database.
 */
import { closeSync, openSync, readFileSync, statSync, writeSync, fsyncSync } from 'node:fs';
import type { NotSavedReason } from '../../contract/types.ts';

/** The sidecar's fixed size: room for about 40 notes; only the answers streaming now have one. */
export const MARKS_BYTES = 4096;

/** A note on an answer whose latest save failed. `at`: ms since the epoch. */
export interface UnsavedMark {
  reason: NotSavedReason;
  at: number;
}

/** The sidecar of one database file; notes kept in memory too, so writing one never reads the file. */
export class UnsavedMarks {
  readonly file: string;
  /** The notes the previous run left (message id → note), read at open. */
  readonly left: ReadonlyMap<string, UnsavedMark>;
  private readonly marks = new Map<string, UnsavedMark>();
  /** Whether the file has its full size (written at open); without it nothing is written. */
  private readonly ready: boolean;

  /** Reads the notes a previous run left in `<dbFile>-unsaved` and makes sure the file has its size. */
  constructor(dbFile: string) {
    this.file = `${dbFile}-unsaved`;
    this.left = readMarks(this.file);
    this.ready = ensureSize(this.file);
  }

  /** Notes that a save of `messageId` failed for `reason`. @returns whether the note reached the disk. */
  mark(messageId: string, reason: NotSavedReason, at: number): boolean {
    const had = this.marks.get(messageId);
    if (had?.reason === reason) return true; // the first failure's time is what the note says
    this.marks.set(messageId, { reason, at });
    return this.flush();
  }

  /** Drops the note of `messageId` (its save succeeded). */
  clear(messageId: string): void {
    if (this.marks.delete(messageId)) this.flush();
  }

  /** Blanks the file (the notes of the previous run have been applied). */
  clearLeft(): void {
    if (this.left.size > 0) this.flush();
  }

  private flush(): boolean {
    if (!this.ready) return false;
    const json = Buffer.from(JSON.stringify(Object.fromEntries(this.marks)));
    if (json.length > MARKS_BYTES) return false;
    const block = Buffer.alloc(MARKS_BYTES, 0x20);
    json.copy(block);
    return writeBlock(this.file, 'r+', block);
  }
}

/** The notes in `file` (none when it is missing, blank or not ours). */
function readMarks(file: string): Map<string, UnsavedMark> {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8').trim() || '{}') as Record<string, UnsavedMark>;
    const ok = ([, m]: [string, UnsavedMark]) => typeof m?.at === 'number' && ['disk full', 'read-only', 'disk error'].includes(m?.reason);
    return new Map(Object.entries(parsed).filter(ok));
  } catch {
    return new Map();
  }
}

/** Writes the file blank at its full size unless it has it. @returns whether it has it now. */
function ensureSize(file: string): boolean {
  try {
    if (statSync(file).size === MARKS_BYTES) return true;
  } catch {
    // Missing: written below.
  }
  return writeBlock(file, 'w', Buffer.alloc(MARKS_BYTES, 0x20));
}

/**
 * Writes `block` (MARKS_BYTES) at the start of `file` and syncs it: 'r+' overwrites in place (no
 * new blocks needed, which is why the file is written whole at open), 'w' creates it.
 * @returns whether it was written.
 */
function writeBlock(file: string, flags: 'r+' | 'w', block: Buffer): boolean {
  let fd: number | null = null;
  try {
    fd = openSync(file, flags);
    writeSync(fd, block, 0, MARKS_BYTES, 0);
    fsyncSync(fd);
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}
