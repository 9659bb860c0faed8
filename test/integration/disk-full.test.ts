/**
 * A full disk in the middle of an answer, for real: the data folder on a small tmpfs
 * (test/helpers/tmpfs.ts, root only), real SQLite, the real engine with stories260K. While the
 * disk is full the answer keeps streaming and stays whole in memory; the window hears
 * "not saved yet: disk full" (answerSaveState; getConversation shows `notSaved`); the database
 * keeps the text written before; a new message is refused with NOT_SAVED naming the cause. Once
 * space returns the retry writes the whole answer and the note clears. Killed while full (SIGKILL
 * of a child process running the services), or closed while full (the last write at close fails
 * too), the next start marks the answer with the disk as the cause, not "the app stopped",
 * keeping the text saved before.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import type { EventTypes, ResponseOf } from '../../main/contract/channels.ts';
import type { Settings } from '../../main/contract/types.ts';
import { RouterError } from '../../main/composition/router.ts';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import { DB_FILE } from '../../main/services/store.ts';
import { PROJECT_ROOT, STORIES_BIN } from '../helpers/paths.ts';
import { nextEvent } from '../helpers/router-events.ts';
import { mountTmpfs, TMPFS_SKIP } from '../helpers/tmpfs.ts';

const cacheRoot = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-disk-full-'));
after(() => rmSync(cacheRoot, { recursive: true, force: true }));

/** Greedy with a strong repetition bonus: stories260K never picks EOS, the answer runs until stopped. */
const LONG_ANSWER: Partial<Settings> = { maxContext: 16384, maxTokens: 12000, temperature: 0, repetitionPenalty: 0.1 };
/** Room for the database, its WAL and the sidecar, and little more. */
const TMPFS_BYTES = 8 * 2 ** 20;

function storedRow(dataDir: string, id: string): { content: string; status: string; error: string | null } {
  const db = new Database(path.join(dataDir, DB_FILE), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT content, status, error FROM messages WHERE id = ?').get(id) as { content: string; status: string; error: string | null };
  } finally {
    db.close();
  }
}

test('disk full mid-answer: kept in memory and shown as not saved; a new message refused; space back: the whole answer saved', { skip: TMPFS_SKIP, timeout: 120_000 }, async () => {
  const fs = mountTmpfs(TMPFS_BYTES);
  let s: Backend | null = null;
  try {
    const dataDir = path.join(fs.dir, 'data');
    s = await startBackend({ dataDir, cacheDir: path.join(cacheRoot, 'a'), defaultModel: STORIES_BIN, executionProvider: 'cpu' });
    await s.modelLoaded;
    const call = s.router.call.bind(s.router) as (m: string, p: unknown) => Promise<any>;
    await call('updateSettings', LONG_ANSWER);
    const conv = await call('createConversation', {});
    const streaming = nextEvent(s.router, 'answerDelta', (d) => d.conversationId === conv.id);
    const { assistantMessage } = await call('sendMessage', { conversationId: conv.id, content: 'Once upon a time' });
    await streaming;
    const notSaved = nextEvent(s.router, 'answerSaveState', (d) => d.messageId === assistantMessage.id, 20_000);
    assert.ok(fs.fill() > 0);
    assert.deepEqual(await notSaved, { conversationId: conv.id, messageId: assistantMessage.id, notSaved: 'disk full' });
    const sidecar = readFileSync(path.join(dataDir, `${DB_FILE}-unsaved`), 'utf8');
    assert.match(sidecar, new RegExp(`"${assistantMessage.id}":\\{"reason":"disk full"`), 'the note beside the database');

    // More text streams after the disk filled; the window's view has it, with the mark.
    const moreText = nextEvent(s.router, 'answerDelta', (d) => d.messageId === assistantMessage.id);
    await moreText;
    const live = (await call('getConversation', { id: conv.id })).messages.at(-1);
    assert.equal(live.notSaved, 'disk full');

    const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === conv.id);
    await call('stopGeneration', { conversationId: conv.id });
    const final = (await done).message as EventTypes['answerDone']['message'];
    assert.equal(final.status, 'cancelled');
    assert.equal(final.notSaved, 'disk full', 'the final state is not saved either');
    const stored = storedRow(dataDir, assistantMessage.id);
    assert.equal(stored.status, 'streaming', 'the database still has the state before the disk filled');
    assert.ok(final.content.startsWith(stored.content) && final.content.length > stored.content.length, `memory has more than the disk (${final.content.length} > ${stored.content.length} chars)`);
    const shown = (await call('getConversation', { id: conv.id })).messages.at(-1);
    assert.deepEqual([shown.content, shown.status, shown.notSaved], [final.content, 'cancelled', 'disk full'], 'reading the conversation shows the answer from memory');

    await assert.rejects(call('sendMessage', { conversationId: conv.id, content: 'And then' }), (e: unknown) => {
      assert.ok(e instanceof RouterError);
      assert.equal(e.code, 'NOT_SAVED');
      assert.match(e.message, /could not be saved \(disk full\)/);
      return true;
    });

    const saved = nextEvent(s.router, 'answerSaveState', (d) => d.messageId === assistantMessage.id && d.notSaved === null, 20_000);
    fs.free();
    await saved;
    const after = storedRow(dataDir, assistantMessage.id);
    assert.deepEqual([after.status, after.content], ['cancelled', final.content], 'the whole answer, as it ended');
    assert.equal((await call('getConversation', { id: conv.id })).messages.at(-1).notSaved, undefined);
    assert.equal(readFileSync(path.join(dataDir, `${DB_FILE}-unsaved`), 'utf8').trim(), '{}', 'the note is dropped once saved');

    await call('updateSettings', { maxTokens: 8 });
    const next = nextEvent(s.router, 'answerDone', (d) => d.conversationId === conv.id);
    await call('sendMessage', { conversationId: conv.id, content: 'And then' });
    assert.equal((await next).message.status, 'complete', 'the next answer works');
  } finally {
    await s?.dispose();
    fs.unmount();
  }
});

test('killed while the disk is full: the next start marks the answer "not saved: the disk was full …", keeping the text saved before', { skip: TMPFS_SKIP, timeout: 120_000 }, async () => {
  const fs = mountTmpfs(TMPFS_BYTES);
  let s: Backend | null = null;
  const dataDir = path.join(fs.dir, 'data');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'test/helpers/answer-child.ts'), dataDir, path.join(cacheRoot, 'b')], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const lines = createInterface({ input: child.stdout! });
    let messageId = '';
    for await (const line of lines) {
      const msg = JSON.parse(line) as { ready?: true; messageId?: string; saveState?: EventTypes['answerSaveState'] };
      if (msg.ready) {
        messageId = msg.messageId!;
        fs.fill();
      }
      if (msg.saveState?.notSaved === 'disk full') break;
    }
    assert.ok(messageId, 'the answer streamed');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const before = storedRow(dataDir, messageId);
    assert.equal(before.status, 'streaming');
    fs.free();

    s = await startBackend({ dataDir, cacheDir: path.join(cacheRoot, 'b'), defaultModel: STORIES_BIN, executionProvider: 'cpu' });
    const [conv] = (await s.router.call('listConversations', {})) as ResponseOf<'listConversations'>;
    const { messages } = (await s.router.call('getConversation', { id: conv.id })) as ResponseOf<'getConversation'>;
    const answer = messages.find((m) => m.id === messageId)!;
    assert.equal(answer.status, 'error');
    assert.match(answer.error ?? '', /^not saved: the disk was full when this answer was last written \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\), and the app stopped before it could be saved; this is the text saved before that$/);
    assert.equal(answer.content, before.content, 'the text saved before the disk filled');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await s?.dispose();
    fs.unmount();
  }
});

test('closed while the disk is full: the last write at close fails too, and the next start says the disk was full', { skip: TMPFS_SKIP, timeout: 120_000 }, async () => {
  const fs = mountTmpfs(TMPFS_BYTES);
  let s: Backend | null = null;
  try {
    const dataDir = path.join(fs.dir, 'data');
    const start = () => startBackend({ dataDir, cacheDir: path.join(cacheRoot, 'c'), defaultModel: STORIES_BIN, executionProvider: 'cpu' });
    s = await start();
    await s.modelLoaded;
    const call = s.router.call.bind(s.router) as (m: string, p: unknown) => Promise<any>;
    await call('updateSettings', LONG_ANSWER);
    const conv = await call('createConversation', {});
    const streaming = nextEvent(s.router, 'answerDelta', (d) => d.conversationId === conv.id);
    const { assistantMessage } = await call('sendMessage', { conversationId: conv.id, content: 'Once upon a time' });
    await streaming;
    const notSaved = nextEvent(s.router, 'answerSaveState', (d) => d.messageId === assistantMessage.id, 20_000);
    fs.fill();
    await notSaved;
    const before = storedRow(dataDir, assistantMessage.id);
    await s.dispose(); // stops the answer (its final state refused) and closes
    s = null;
    fs.free();
    s = await start();
    const { messages } = (await s.router.call('getConversation', { id: conv.id })) as ResponseOf<'getConversation'>;
    const answer = messages.find((m) => m.id === assistantMessage.id)!;
    assert.equal(answer.status, 'error');
    assert.match(answer.error ?? '', /^not saved: the disk was full when this answer was last written/);
    assert.equal(answer.content, before.content, 'the text saved before the disk filled');
  } finally {
    await s?.dispose();
    fs.unmount();
  }
});
