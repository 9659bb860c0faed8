/**
 * The conversation store on real SQLite in a temp folder: migrations on a fresh file and on
 * re-open, WAL, CRUD, title search with LIKE wildcards taken literally, cascade delete, automatic
 * titles, recovery of answers a dead process left streaming, and settings round-trip.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { ServiceError } from '../../main/services/errors.ts';
import { autoTitle, ConversationStore, DB_FILE, DEFAULT_TITLE, escapeLike } from '../../main/services/store.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-store-test-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => path.join(root, `db${n++}`);

test('a fresh database is migrated, in WAL mode, and re-opening it keeps the data and the schema', () => {
  const dir = freshDir();
  const a = new ConversationStore(dir);
  assert.equal(a.schemaVersion, 7);
  assert.equal(a.journalMode, 'wal');
  const c = a.createConversation('kept');
  a.appendMessage(c.id, { role: 'user', content: 'hello', status: 'complete' });
  a.close();
  a.close(); // idempotent

  const b = new ConversationStore(dir);
  assert.equal(b.schemaVersion, 7);
  assert.equal(b.getConversation(c.id).messages[0].content, 'hello');
  b.close();

  const raw = new Database(path.join(dir, DB_FILE), { readonly: true });
  assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal', 'WAL is a property of the file');
  const tables = (raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).all() as { name: string }[]).map((r) => r.name);
  assert.deepEqual(tables, ['attachments', 'conversations', 'documents', 'messages', 'settings']);
  raw.close();
});

test('a database from a newer schema is refused, not damaged', () => {
  const dir = freshDir();
  new ConversationStore(dir).close();
  const raw = new Database(path.join(dir, DB_FILE));
  raw.pragma('user_version = 99');
  raw.close();
  assert.throws(() => new ConversationStore(dir), (e: unknown) => e instanceof ServiceError && e.code === 'SCHEMA_TOO_NEW');
});

test('a data folder that is a file is refused with DATA_DIR', () => {
  const file = path.join(root, 'a-file');
  writeFileSync(file, 'x');
  assert.throws(() => new ConversationStore(path.join(file, 'sub')), (e: unknown) => e instanceof ServiceError && e.code === 'DATA_DIR');
});

test('conversations: create, get, rename, list by last update, delete; unknown ids are NOT_FOUND', () => {
  const s = new ConversationStore(freshDir());
  try {
    const a = s.createConversation();
    assert.equal(a.title, DEFAULT_TITLE);
    assert.deepEqual(a.messages, []);
    const b = s.createConversation('  Second  ');
    assert.equal(b.title, 'Second');
    s.appendMessage(a.id, { role: 'user', content: 'bump', status: 'complete' });
    assert.deepEqual(
      s.listConversations().map((c) => c.id),
      [a.id, b.id],
      'the conversation with the newest message comes first',
    );
    const renamed = s.renameConversation(b.id, 'Renamed');
    assert.equal(renamed.title, 'Renamed');
    assert.equal(renamed.updatedAt, b.updatedAt, 'renaming is not an update');
    assert.deepEqual(s.listConversations().map((c) => c.id), [a.id, b.id], 'a rename keeps the order (was: moved to the top)');
    const own = s.setConversationPolicy(b.id, 'truncate-middle');
    assert.equal(own.contextFullPolicy, 'truncate-middle');
    assert.equal(own.updatedAt, b.updatedAt, 'a policy is not an update either');
    assert.equal(s.getConversation(b.id).contextFullPolicy, 'truncate-middle');
    assert.equal(s.getConversation(a.id).contextFullPolicy, undefined, 'none of its own: absent');
    assert.equal(s.conversationPolicy(b.id), 'truncate-middle', 'the one-column read agrees with the summary');
    assert.equal(s.conversationPolicy(a.id), null);
    assert.equal(s.setConversationPolicy(b.id, null).contextFullPolicy, undefined);
    assert.equal(s.conversationPolicy(b.id), null);
    s.deleteConversation(b.id);
    assert.deepEqual(s.listConversations().map((c) => c.id), [a.id]);
    const notFound = (e: unknown) => e instanceof ServiceError && e.code === 'NOT_FOUND';
    assert.throws(() => s.getConversation(b.id), notFound);
    assert.throws(() => s.renameConversation(b.id, 'x'), notFound);
    assert.throws(() => s.setConversationPolicy(b.id, 'stop'), notFound);
    assert.equal(s.conversationPolicy(b.id), null, 'no such conversation: no policy of its own (the setting applies)');
    assert.throws(() => s.deleteConversation(b.id), notFound);
    assert.throws(() => s.appendMessage(b.id, { role: 'user', content: 'x', status: 'complete' }), notFound);
  } finally {
    s.close();
  }
});

test('search looks in message text too, with the text around the hit; titles still match; system prompts do not', () => {
  const s = new ConversationStore(freshDir());
  try {
    const cooking = s.createConversation('Cooking');
    const garden = s.createConversation('Garden');
    s.appendMessage(garden.id, { role: 'system', content: 'You like basil.', status: 'complete' });
    s.appendMessage(garden.id, { role: 'user', content: 'What grows well in shade?', status: 'complete' });
    s.appendMessage(garden.id, { role: 'assistant', content: `${'Ferns are a classic choice. '.repeat(3)}Also try BASIL in\npartial sun; it needs about six hours of light a day to do well.`, status: 'complete' });
    assert.deepEqual(s.listConversations('cook').map((c) => [c.title, c.match]), [['Cooking', undefined]]);
    const [hit, ...rest] = s.listConversations('basil');
    assert.equal(rest.length, 0);
    assert.equal(hit.id, garden.id);
    assert.equal(hit.match, '…a classic choice. Also try BASIL in partial sun; it needs about six hours of light a day to…');
    assert.deepEqual(s.listConversations('%').map((c) => c.id), [], 'still literal');
    void cooking;
  } finally {
    s.close();
  }
});

test('title search is a literal, case-insensitive substring: % and _ and \\ are not wildcards', () => {
  const s = new ConversationStore(freshDir());
  try {
    for (const t of ['100% sure', '100 percent', 'snake_case', 'snakeXcase', 'back\\slash', 'Hello World']) s.createConversation(t);
    const titles = (q: string) => s.listConversations(q).map((c) => c.title).sort();
    assert.deepEqual(titles('%'), ['100% sure']);
    assert.deepEqual(titles('0%'), ['100% sure']);
    assert.deepEqual(titles('_'), ['snake_case']);
    assert.deepEqual(titles('e_c'), ['snake_case']);
    assert.deepEqual(titles('\\'), ['back\\slash']);
    assert.deepEqual(titles('hello'), ['Hello World']);
    assert.deepEqual(titles('  world '), ['Hello World']);
    assert.equal(s.listConversations('').length, 6);
    assert.equal(s.listConversations('nothing like this').length, 0);
    assert.equal(escapeLike('a%b_c\\d'), 'a\\%b\\_c\\\\d');
  } finally {
    s.close();
  }
});

test('messages: append in order, update, delete after, cascade on conversation delete', () => {
  const dir = freshDir();
  const s = new ConversationStore(dir);
  try {
    const c = s.createConversation();
    const u1 = s.appendMessage(c.id, { role: 'user', content: 'one', status: 'complete' });
    const a1 = s.appendMessage(c.id, { role: 'assistant', content: '', status: 'streaming' });
    const stats = { finishReason: 'stop' as const, promptTokens: 3, generatedTokens: 2, reusedTokens: 0, ttftMs: 1.5, prefillTokensPerSec: 10, decodeTokensPerSec: 20 };
    assert.equal(s.updateMessage(a1.id, { content: 'answer', status: 'complete', stats }), true);
    assert.equal(s.updateMessage('missing', { content: 'x' }), false);
    const u2 = s.appendMessage(c.id, { role: 'user', content: 'two', status: 'complete' });
    s.appendMessage(c.id, { role: 'assistant', content: 'second', status: 'error', error: 'it failed' });
    let msgs = s.getConversation(c.id).messages;
    assert.deepEqual(msgs.map((m) => m.content), ['one', 'answer', 'two', 'second']);
    assert.deepEqual(msgs[1].stats, stats);
    assert.equal(msgs[3].error, 'it failed');

    assert.equal(s.deleteMessagesAfter(c.id, u2.id), 1);
    assert.equal(s.deleteMessagesAfter(c.id, u1.id), 2);
    msgs = s.getConversation(c.id).messages;
    assert.deepEqual(msgs.map((m) => m.id), [u1.id]);
    // A new message after a deletion still goes last.
    s.appendMessage(c.id, { role: 'assistant', content: 'again', status: 'complete' });
    assert.deepEqual(s.messages(c.id).map((m) => m.content), ['one', 'again']);

    s.deleteConversation(c.id);
    const raw = new Database(path.join(dir, DB_FILE), { readonly: true });
    assert.equal((raw.prepare('SELECT COUNT(*) AS n FROM messages').get() as { n: number }).n, 0, 'messages are deleted with their conversation');
    raw.close();
  } finally {
    s.close();
  }
});

test('automatic title: from the first message, only while the title is the default (or automatic on an edit)', () => {
  const s = new ConversationStore(freshDir());
  try {
    const c = s.createConversation();
    assert.equal(s.setAutoTitle(c.id, '  Tell me\n a story   about a   dragon who learned to fly over the sea '), true);
    const t = s.getSummary(c.id).title;
    assert.ok(t.endsWith('…') && t.length <= 41, t);
    assert.ok(t.startsWith('Tell me a story about a dragon'), t);
    assert.equal(s.setAutoTitle(c.id, 'another'), false, 'a second message does not retitle');
    assert.equal(s.setAutoTitle(c.id, 'edited first message', true), true, 'an edit of the first message does');
    s.renameConversation(c.id, 'Mine');
    assert.equal(s.setAutoTitle(c.id, 'x', true), false, 'a title the user chose is never replaced');
    const named = s.createConversation('Named');
    assert.equal(s.setAutoTitle(named.id, 'hello'), false);
    assert.equal(autoTitle('short'), 'short');
    assert.equal(autoTitle('x'.repeat(100)), `${'x'.repeat(40)}…`);
  } finally {
    s.close();
  }
});

test('answers a dead process left streaming are marked as errors, their text kept', () => {
  const dir = freshDir();
  const a = new ConversationStore(dir);
  const c = a.createConversation();
  const m = a.appendMessage(c.id, { role: 'assistant', content: 'partial', status: 'streaming' });
  a.close();
  const b = new ConversationStore(dir);
  try {
    assert.equal(b.recoverInterrupted('stopped'), 1);
    const got = b.getMessage(m.id);
    assert.equal(got.status, 'error');
    assert.equal(got.content, 'partial');
    assert.equal(got.error, 'stopped');
  } finally {
    b.close();
  }
});

test('settings round-trip as JSON; undefined deletes a key; unparseable rows are skipped', () => {
  const dir = freshDir();
  const s = new ConversationStore(dir);
  s.setSettings({ 'settings.temperature': 0.5, 'settings.seed': null, 'settings.systemPrompt': 'Be "brief".', 'model.path': '/x' });
  s.setSettings({ 'model.path': undefined, 'settings.temperature': 0.25 });
  s.close();
  const raw = new Database(path.join(dir, DB_FILE));
  raw.prepare(`INSERT INTO settings (key, value) VALUES ('broken', '{nope')`).run();
  raw.close();
  const t = new ConversationStore(dir);
  try {
    assert.deepEqual(t.getSettings(), { 'settings.temperature': 0.25, 'settings.seed': null, 'settings.systemPrompt': 'Be "brief".' });
  } finally {
    t.close();
  }
});

test('documents: stored once per content, released with the last message that carries them, drafts cleared', () => {
  const s = new ConversationStore(freshDir());
  const doc = (hash: string, text: string) => ({ name: `${hash}.txt`, kind: 'text' as const, size: text.length, hash, text, parts: [] });
  const a = s.putDocument(doc('aa', 'alpha'));
  assert.equal(s.putDocument({ ...doc('aa', 'alpha'), name: 'renamed.txt' }).id, a.id, 'same content, same document');
  const b = s.putDocument(doc('bb', 'beta'));
  s.putDocument(doc('cc', 'never sent'));
  assert.equal(s.countDocuments(), 3);

  const c1 = s.createConversation('one');
  const c2 = s.createConversation('two');
  const m1 = s.appendMessage(c1.id, { role: 'user', content: 'q1', status: 'complete' });
  const m2 = s.appendMessage(c2.id, { role: 'user', content: 'q2', status: 'complete' });
  s.attachDocuments(m1.id, [{ id: a.id, fit: 'whole' }, { id: b.id, fit: 'relevant' }]);
  s.attachDocuments(m2.id, [{ id: a.id, fit: 'whole' }]);
  assert.deepEqual(s.getConversation(c1.id).messages[0].documents?.map((d) => [d.name, d.fit]), [['aa.txt', 'whole'], ['bb.txt', 'relevant']]);
  assert.deepEqual(s.attachmentsOf(m1.id).map((x) => x.document.text), ['alpha', 'beta']);
  assert.equal(s.releaseDraftDocuments(), 1, 'the document no message carries');

  s.deleteConversation(c1.id);
  assert.equal(s.countDocuments(), 1, 'beta went with its conversation; alpha is still carried by the other');
  assert.equal(s.getDocument(a.id).text, 'alpha');
  s.deleteMessage(m2.id);
  assert.equal(s.countDocuments(), 0);
  assert.throws(() => s.attachDocuments(m1.id, [{ id: 'nope', fit: 'whole' }]), /no document with id nope/);
  s.close();
});

test('a document keeps the pages OCR read and the pages without text, in its info and on its messages', () => {
  const s = new ConversationStore(freshDir());
  const d = s.putDocument({ name: 'scan.pdf', kind: 'pdf', size: 9, hash: 'f'.repeat(64), text: 'one\n\ntwo', parts: [], ocrPages: [2], pagesWithoutText: [3, 4] });
  const plain = s.putDocument({ name: 'a.txt', kind: 'text', size: 1, hash: 'e'.repeat(64), text: 'a', parts: [] });
  assert.deepEqual([d.ocrPages, d.pagesWithoutText], [[2], [3, 4]]);
  assert.equal('ocrPages' in plain || 'pagesWithoutText' in plain, false, 'absent when none');
  const c = s.createConversation();
  const m = s.appendMessage(c.id, { role: 'user', content: 'q', status: 'complete' });
  s.attachDocuments(m.id, [{ id: d.id, fit: 'whole' }]);
  const [info] = s.messages(c.id)[0].documents!;
  assert.deepEqual([info.ocrPages, info.pagesWithoutText], [[2], [3, 4]]);
  s.close();
});
