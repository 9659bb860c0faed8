/**
 * Saving an answer when the disk refuses (main/services/answer-save.ts, store/unsaved-marks.ts),
 * on a manual clock: which errors are storage faults (better-sqlite3's own SqliteError, Node's errno
 * codes); the writer keeps the newest patch, retries with doubling backoff capped at 5 s, says
 * "disk full" once and null once written; a non-fault is thrown, not retried; the sidecar note
 * survives a reopen and gives the restart mark its cause (real SQLite in a temp folder). The real
 * full disk (a tmpfs) is test/integration/disk-full.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { notSavedOnRestart, RETRY_FIRST_MS, RETRY_MAX_MS, RetryingWriter, storageFault } from '../../main/services/answer-save.ts';
import { ConversationStore, type MessagePatch } from '../../main/services/store.ts';
import { MARKS_BYTES } from '../../main/services/store/unsaved-marks.ts';
import { INTERRUPTED_MESSAGE } from '../../main/services/index.ts';
import { ManualScheduler } from '../helpers/manual-scheduler.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-answer-save-'));
after(() => rmSync(root, { recursive: true, force: true }));

const sqliteError = (code: string) => new Database.SqliteError(`${code} from the driver`, code);
const errno = (code: string) => Object.assign(new Error(`${code}: write failed`), { code });

test('storageFault: disk full, read-only and I/O errors from SQLite and Node; anything else is not one', () => {
  assert.equal(storageFault(sqliteError('SQLITE_FULL')), 'disk full');
  assert.equal(storageFault(errno('ENOSPC')), 'disk full');
  assert.equal(storageFault(errno('EDQUOT')), 'disk full');
  assert.equal(storageFault(sqliteError('SQLITE_READONLY')), 'read-only');
  assert.equal(storageFault(sqliteError('SQLITE_READONLY_DBMOVED')), 'read-only');
  assert.equal(storageFault(errno('EROFS')), 'read-only');
  assert.equal(storageFault(sqliteError('SQLITE_IOERR_WRITE')), 'disk error');
  assert.equal(storageFault(errno('EIO')), 'disk error');
  assert.equal(storageFault(sqliteError('SQLITE_CONSTRAINT_FOREIGNKEY')), null);
  assert.equal(storageFault(new TypeError('x is undefined')), null);
  assert.equal(storageFault('a string'), null);
  assert.equal(storageFault(null), null);
});

/** A write that fails with `fault` while `full` is set, recording what reached the "disk". */
function flakyDisk(fault = sqliteError('SQLITE_FULL')) {
  const disk = { full: true, written: [] as MessagePatch[], attempts: 0 };
  const write = (patch: MessagePatch) => {
    disk.attempts++;
    if (disk.full) throw fault;
    disk.written.push(patch);
  };
  return { disk, write };
}

test('RetryingWriter: a full disk keeps the newest text, retries after 250, 500, 1000 … ms capped at 5 s, and says so once; space back: written, state null', () => {
  const clock = new ManualScheduler();
  const { disk, write } = flakyDisk();
  const states: (string | null)[] = [];
  const faults: string[] = [];
  const w = new RetryingWriter(write, { onState: (s) => states.push(s), onFault: (r) => faults.push(r) }, clock);
  assert.equal(w.save({ content: 'Once' }), false);
  assert.equal(w.notSaved, 'disk full');
  assert.deepEqual(states, ['disk full']);
  // Saves while a retry waits do not write; the retry writes the newest.
  assert.equal(w.save({ content: 'Once upon', reasoning: 'hm' }), false);
  assert.equal(disk.attempts, 1, 'no write storm while the backoff runs');
  const delays: number[] = [];
  for (let i = 0; i < 8; i++) {
    const before = clock.time;
    const attempts: number = disk.attempts;
    while ((disk.attempts as number) === attempts) clock.advance(1);
    delays.push(clock.time - before);
  }
  assert.deepEqual(delays, [RETRY_FIRST_MS, 500, 1000, 2000, 4000, RETRY_MAX_MS, RETRY_MAX_MS, RETRY_MAX_MS]);
  assert.deepEqual(states, ['disk full'], 'said once, not per retry');
  assert.equal(faults.length, 9, 'each failed write is a fault (the store notes the first)');
  w.save({ content: 'Once upon a time' });
  disk.full = false;
  clock.advance(RETRY_MAX_MS);
  assert.deepEqual(disk.written, [{ content: 'Once upon a time', reasoning: 'hm' }], 'one write: the newest fields of every patch');
  assert.deepEqual(states, ['disk full', null]);
  assert.equal(w.notSaved, null);
  assert.equal(w.waiting, false);
  assert.equal(clock.pending, 0, 'no retry left');
  // Written at once from now on, and the backoff starts over at the next fault.
  assert.equal(w.save({ content: 'Once upon a time there' }), true);
  disk.full = true;
  w.save({ status: 'complete' });
  const before = clock.time;
  while ((disk.attempts as number) === 12) clock.advance(1);
  assert.equal(clock.time - before, RETRY_FIRST_MS);
});

test('RetryingWriter: read-only now is said as such; flushNow tries at once; stop ends the retries', () => {
  const clock = new ManualScheduler();
  const { disk, write } = flakyDisk(sqliteError('SQLITE_READONLY'));
  const states: (string | null)[] = [];
  const w = new RetryingWriter(write, { onState: (s) => states.push(s) }, clock);
  w.save({ content: 'a' });
  assert.deepEqual(states, ['read-only']);
  assert.equal(w.flushNow(), false);
  assert.equal(disk.attempts, 2);
  w.stop();
  clock.advance(60_000);
  assert.equal(disk.attempts, 2, 'stopped: no more tries');
  assert.equal(w.save({ content: 'b' }), false);
});

test('RetryingWriter: an error that is not a storage fault is thrown and not retried', () => {
  const clock = new ManualScheduler();
  const w = new RetryingWriter(() => {
    throw sqliteError('SQLITE_CONSTRAINT_CHECK');
  }, { onState: () => assert.fail('no state change for a non-fault') }, clock);
  assert.throws(() => w.save({ status: 'complete' }), /SQLITE_CONSTRAINT_CHECK/);
  assert.equal(clock.pending, 0);
  assert.equal(w.waiting, false);
});

test('the sidecar note: written in place at its fixed size, read by the next start, which marks that answer with the disk as the cause and the others generically', () => {
  const dataDir = path.join(root, 'marks');
  const store = new ConversationStore(dataDir, () => Date.UTC(2026, 11, 2, 1, 52, 7));
  const sidecar = `${store.file}-unsaved`;
  assert.equal(statSync(sidecar).size, MARKS_BYTES, 'written in full at open, while there is room');
  const c = store.createConversation();
  store.appendMessage(c.id, { role: 'user', content: 'Once', status: 'complete' });
  const full = store.appendMessage(c.id, { role: 'assistant', content: 'upon a', status: 'streaming' });
  const other = store.createConversation();
  const killed = store.appendMessage(other.id, { role: 'assistant', content: 'a time', status: 'streaming' });
  const saved = store.appendMessage(other.id, { role: 'assistant', content: 'x', status: 'streaming' });
  assert.equal(store.markUnsaved(full.id, 'disk full'), true);
  assert.equal(store.markUnsaved(saved.id, 'read-only'), true);
  store.clearUnsaved(saved.id);
  assert.equal(statSync(sidecar).size, MARKS_BYTES, 'never grown');
  assert.match(readFileSync(sidecar, 'utf8'), new RegExp(full.id));
  assert.doesNotMatch(readFileSync(sidecar, 'utf8'), new RegExp(saved.id));
  store.close();

  const next = new ConversationStore(dataDir);
  assert.equal(next.recoverInterrupted(INTERRUPTED_MESSAGE, notSavedOnRestart), 3);
  const byId = new Map([...next.messages(c.id), ...next.messages(other.id)].map((m) => [m.id, m]));
  assert.equal(byId.get(full.id)?.status, 'error');
  assert.equal(
    byId.get(full.id)?.error,
    'not saved: the disk was full when this answer was last written (2026-12-02 01:52:07 UTC), and the app stopped before it could be saved; this is the text saved before that',
  );
  assert.equal(byId.get(full.id)?.content, 'upon a', 'the text saved before is kept');
  assert.equal(byId.get(killed.id)?.error, INTERRUPTED_MESSAGE);
  assert.equal(byId.get(saved.id)?.error, INTERRUPTED_MESSAGE, 'a note cleared after its save is no cause');
  assert.equal(readFileSync(sidecar, 'utf8').trim(), '{}', 'the notes are blanked once applied');
  next.close();
  const third = new ConversationStore(dataDir);
  assert.equal(third.recoverInterrupted(INTERRUPTED_MESSAGE, notSavedOnRestart), 0);
  third.close();
});

test('the sidecar: a file that is not ours (garbage, wrong size) is no note and is written afresh', () => {
  const dataDir = path.join(root, 'garbage');
  const first = new ConversationStore(dataDir);
  const sidecar = `${first.file}-unsaved`;
  first.close();
  const garbage = '{"m1": {"reason": "rm -rf", "at": "soon"}, "m2": 7';
  writeFileSync(sidecar, garbage);
  const store = new ConversationStore(dataDir);
  assert.equal(statSync(sidecar).size, MARKS_BYTES);
  const c = store.createConversation();
  const m = store.appendMessage(c.id, { role: 'assistant', content: '', status: 'streaming' });
  assert.equal(store.recoverInterrupted(INTERRUPTED_MESSAGE, notSavedOnRestart), 1);
  assert.equal(store.getMessage(m.id).error, INTERRUPTED_MESSAGE);
  store.close();
});
