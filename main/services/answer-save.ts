/**
 * Saving an answer when the disk may refuse: `storageFault` tells a storage fault (disk full,
 * read-only, an I/O error: the write may work later) from any other failure, and `RetryingWriter`
 * keeps the latest wanted state of one message in memory and writes it, retrying a fault with
 * backoff until it is written. Nothing is lost while the process lives: the newest patch waits in
 * memory and each retry writes it. The caller hears each change of the saved state
 * (`onState(reason | null)`), so the window can show "not saved yet: disk full" and clear it.
 * `AnswerSaves` wires one writer per answer to the store, the `answerSaveState` event and the
 * sidecar note (store/unsaved-marks.ts) that tells the next start why an answer was not saved, and
 * holds the answers that ended unsaved, so reading a conversation shows their text from memory.
 * Time comes from an injected `Scheduler` (answer-stream.ts), so tests drive the retries by hand.
 */
import type { Conversation, Message, NotSavedReason } from '../contract/types.ts';
import { realScheduler, type Scheduler } from './answer-stream.ts';
import { firstLine } from './errors.ts';
import type { Emit } from './events.ts';
import type { ConversationStore, MessagePatch } from './store.ts';

/** First retry after a fault, ms; each next one waits twice as long, up to RETRY_MAX_MS. */
export const RETRY_FIRST_MS = 250;
export const RETRY_MAX_MS = 5000;

/**
 * The storage fault an error is, from its code (better-sqlite3's `SqliteError.code`, Node's
 * `errno` codes): 'disk full' (SQLITE_FULL, ENOSPC, EDQUOT), 'read-only' (SQLITE_READONLY and its
 * extended codes, EROFS), 'disk error' (SQLITE_IOERR and its extended codes, EIO); null for
 * anything else (a bug, a deleted row: retrying would not help).
 */
export function storageFault(e: unknown): NotSavedReason | null {
  const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : '';
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return 'disk full';
  if (code.startsWith('SQLITE_READONLY') || code === 'EROFS') return 'read-only';
  if (code.startsWith('SQLITE_IOERR') || code === 'EIO') return 'disk error';
  return null;
}

const CAUSE: Record<NotSavedReason, string> = {
  'disk full': 'the disk was full',
  'read-only': 'the disk was read-only',
  'disk error': 'the disk reported a write error',
};

/**
 * The restart mark of an answer whose last save failed (the note the sidecar kept): why, since
 * when (UTC), and that the text shown is what was saved before.
 */
export function notSavedOnRestart(note: { reason: NotSavedReason; at: number }): string {
  const when = new Date(note.at).toISOString().replace('T', ' ').slice(0, 19);
  return `not saved: ${CAUSE[note.reason]} when this answer was last written (${when} UTC), and the app stopped before it could be saved; this is the text saved before that`;
}

export interface RetryingWriterHooks {
  /** The saved state changed: a reason when a write first failed, null once the latest patch is written. */
  onState(notSaved: NotSavedReason | null): void;
  /** A write failed with a fault (each time; the store records it where it still can). */
  onFault?(reason: NotSavedReason): void;
}

/**
 * Writes one message's patches through `write`, newest wins: fields of a later patch replace the
 * same fields of one still waiting. A storage fault keeps the patch and retries after
 * RETRY_FIRST_MS, doubling up to RETRY_MAX_MS; a `save` while a retry waits only updates what the
 * retry will write (no write storms on a full disk).
 */
export class RetryingWriter {
  private pending: MessagePatch | null = null;
  private reason: NotSavedReason | null = null;
  private timer: unknown = null;
  private delayMs = RETRY_FIRST_MS;
  private stopped = false;

  constructor(
    private readonly write: (patch: MessagePatch) => void,
    private readonly hooks: RetryingWriterHooks,
    private readonly scheduler: Scheduler = realScheduler,
  ) {}

  /** Why the latest patch is not written yet; null when it is. */
  get notSaved(): NotSavedReason | null {
    return this.reason;
  }

  /** Whether a patch waits to be written (a fault happened and no retry has succeeded yet). */
  get waiting(): boolean {
    return this.pending !== null;
  }

  /**
   * Writes `patch` now, or keeps it for the waiting retry.
   * @returns true when it was written now.
   * @throws whatever `write` throws that is not a storage fault (nothing is kept then).
   */
  save(patch: MessagePatch): boolean {
    if (this.stopped) return false;
    this.pending = { ...this.pending, ...patch };
    if (this.timer !== null) return false;
    return this.attempt();
  }

  /** One more try now, whatever the backoff (the app is closing). @returns whether everything is written. */
  flushNow(): boolean {
    if (this.pending === null) return true;
    if (this.timer !== null) this.scheduler.cancel(this.timer);
    this.timer = null;
    try {
      return this.attempt();
    } catch {
      return false;
    }
  }

  /** Stops retrying; what was not written stays unwritten. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.scheduler.cancel(this.timer);
    this.timer = null;
  }

  private attempt(): boolean {
    const patch = this.pending as MessagePatch;
    try {
      this.write(patch);
    } catch (e) {
      const fault = storageFault(e);
      if (fault === null) {
        this.pending = null;
        throw e;
      }
      this.hooks.onFault?.(fault);
      if (fault !== this.reason) {
        this.reason = fault;
        this.hooks.onState(fault);
      }
      this.retryLater();
      return false;
    }
    // Only what was written is done: a save during the write (none: writes are synchronous) would stay.
    if (this.pending === patch) this.pending = null;
    this.delayMs = RETRY_FIRST_MS;
    if (this.reason !== null) {
      this.reason = null;
      this.hooks.onState(null);
    }
    return true;
  }

  private retryLater(): void {
    const delay = this.delayMs;
    this.delayMs = Math.min(this.delayMs * 2, RETRY_MAX_MS);
    this.timer = this.scheduler.after(delay, () => {
      this.timer = null;
      if (this.stopped || this.pending === null) return;
      try {
        this.attempt();
      } catch {
        // Not a storage fault (the row went away with its conversation): nothing left to write.
      }
    });
  }
}

/**
 * The answers' writers and the ended answers whose final state is only in memory (retried until
 * written, shown by `overlay`). One per ChatService.
 */
export class AnswerSaves {
  /** Ended answers not written yet: message id → the final message as the window sees it. */
  private readonly finals = new Map<string, { message: Message; writer: RetryingWriter }>();

  constructor(
    private readonly store: ConversationStore,
    private readonly emit: Emit,
    private readonly scheduler: Scheduler = realScheduler,
  ) {}

  /** How many ended answers wait to be written. */
  get unsaved(): number {
    return this.finals.size;
  }

  /**
   * The writer of one answer: its faults leave a note beside the database, and each change of its
   * saved state is an `answerSaveState` event (null: written; its note dropped).
   */
  writer(conversationId: string, messageId: string): RetryingWriter {
    return new RetryingWriter((patch) => this.store.updateMessage(messageId, patch), {
      onFault: (reason) => void this.store.markUnsaved(messageId, reason),
      onState: (notSaved) => {
        if (notSaved === null) {
          this.store.clearUnsaved(messageId);
          this.finals.delete(messageId);
        }
        this.emit('answerSaveState', { conversationId, messageId, notSaved });
      },
    }, this.scheduler);
  }

  /**
   * Writes an answer's final state through its writer. @returns the final message as the window
   * should see it: with `notSaved` while the disk refuses it (kept here and retried); with status
   * 'error' and the reason when the write failed for another reason than the disk.
   */
  saveFinal(writer: RetryingWriter, message: Message, state: MessagePatch): Message {
    const final = { ...message, ...state } as Message;
    try {
      if (writer.save(state) || !writer.waiting) return final;
    } catch (e) {
      return { ...final, status: 'error', error: `the answer could not be saved: ${firstLine(e)}` };
    }
    const kept = { ...final, notSaved: writer.notSaved ?? 'disk error' } as Message;
    this.finals.set(message.id, { message: kept, writer });
    return kept;
  }

  /** `conv` with the ended answers not written yet as they are in memory. */
  overlay(conv: Conversation): Conversation {
    if (this.finals.size === 0) return conv;
    return { ...conv, messages: conv.messages.map((m) => this.finals.get(m.id)?.message ?? m) };
  }

  /** One last write of each unsaved answer, then no more retries (the app closes). @returns how many stay unwritten. */
  dispose(): number {
    let left = 0;
    for (const { writer } of [...this.finals.values()]) {
      if (!writer.flushNow()) left++;
      writer.stop();
    }
    this.finals.clear();
    return left;
  }
}
