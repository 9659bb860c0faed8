/**
 * Branches in the conversation store (main/services/store.ts): regenerate and edit leave the
 * replaced message and what followed it as another version beside the new one; a conversation's
 * messages are its chosen path, each with its versions' ids; `selectBranch` switches and brings
 * the newest line of replies after the chosen version; a database written before branches
 * migrates to one line per conversation.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { ConversationStore, DB_FILE } from '../../main/services/store.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-branches-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => path.join(root, `db${n++}`);

const say = (s: ConversationStore, id: string, role: 'user' | 'assistant', content: string) => s.appendMessage(id, { role, content, status: 'complete' });
const path_ = (s: ConversationStore, id: string) => s.messages(id).map((m) => m.content);

test('regenerate and edit keep the earlier versions; the path and each message’s versions follow selectBranch', () => {
  const s = new ConversationStore(freshDir());
  try {
    const c = s.createConversation();
    const u1 = say(s, c.id, 'user', 'q1');
    const a1 = say(s, c.id, 'assistant', 'first answer');
    // Regenerate: the answer leaves the path, the new one is written beside it.
    s.leavePath(c.id, a1.id);
    const a2 = say(s, c.id, 'assistant', 'second answer');
    assert.deepEqual(path_(s, c.id), ['q1', 'second answer']);
    assert.deepEqual(s.messages(c.id)[1].branches, [a1.id, a2.id]);
    assert.equal(s.messages(c.id)[0].branches, undefined, 'one version: no branches');
    assert.deepEqual(s.getMessage(a2.id).branches, [a1.id, a2.id]);

    const conv = s.selectBranch(c.id, a1.id);
    assert.deepEqual(conv.messages.map((m) => m.content), ['q1', 'first answer']);
    assert.deepEqual(s.messages(c.id)[1].branches, [a1.id, a2.id]);

    // Go on from the first answer, then edit the first question.
    say(s, c.id, 'user', 'q2');
    say(s, c.id, 'assistant', 'a to q2');
    s.leavePath(c.id, u1.id);
    const u1b = say(s, c.id, 'user', 'q1, edited');
    say(s, c.id, 'assistant', 'answer to the edit');
    assert.deepEqual(path_(s, c.id), ['q1, edited', 'answer to the edit']);
    assert.deepEqual(s.messages(c.id)[0].branches, [u1.id, u1b.id]);

    // Back to the first question: its newest line of replies comes with it.
    s.selectBranch(c.id, u1.id);
    assert.deepEqual(path_(s, c.id), ['q1', 'second answer'], 'the newest answer under q1');
    s.selectBranch(c.id, a1.id);
    assert.deepEqual(path_(s, c.id), ['q1', 'first answer', 'q2', 'a to q2'], 'the whole line after the chosen version');
    assert.throws(() => s.selectBranch(s.createConversation().id, a1.id), /no message/);
  } finally {
    s.close();
  }
});

test('search and the list look at the chosen path only', () => {
  const s = new ConversationStore(freshDir());
  try {
    const c = s.createConversation('Chat');
    say(s, c.id, 'user', 'q');
    const old = say(s, c.id, 'assistant', 'an answer about zebras');
    s.leavePath(c.id, old.id);
    say(s, c.id, 'assistant', 'an answer about lions');
    assert.equal(s.listConversations('zebras').length, 0);
    assert.equal(s.listConversations('lions').length, 1);
  } finally {
    s.close();
  }
});

test('a database from before branches becomes one line per conversation', () => {
  const dir = freshDir();
  const s = new ConversationStore(dir);
  const c = s.createConversation();
  for (const [role, content] of [['user', 'a'], ['assistant', 'b'], ['user', 'c']] as const) say(s, c.id, role, content);
  const version = s.schemaVersion;
  s.close();
  // Undo the migrations from branches on by hand (branches is the third, a chat's own policy the
  // fourth, reasoning and the Think toggle the fifth, documents' page lists the sixth, a chat's own
  // settings the seventh, an attachment's own name the eighth): what an older Ropewalk wrote.
  const db = new Database(path.join(dir, DB_FILE));
  db.exec(`ALTER TABLE attachments DROP COLUMN name;`);
  db.exec(`ALTER TABLE conversations DROP COLUMN chat_settings;`);
  db.exec(`ALTER TABLE documents DROP COLUMN pages_without_text; ALTER TABLE documents DROP COLUMN ocr_pages;`);
  db.exec(`ALTER TABLE messages DROP COLUMN reasoning; ALTER TABLE conversations DROP COLUMN thinking;`);
  db.exec(`ALTER TABLE conversations DROP COLUMN context_full_policy;`);
  db.exec(`DROP INDEX messages_by_parent; ALTER TABLE messages DROP COLUMN on_path; ALTER TABLE messages DROP COLUMN parent_id;`);
  db.pragma(`user_version = 2`);
  db.close();
  const again = new ConversationStore(dir);
  try {
    assert.equal(again.schemaVersion, version);
    assert.deepEqual(path_(again, c.id), ['a', 'b', 'c']);
    const [a, b] = again.messages(c.id);
    again.leavePath(c.id, b.id);
    say(again, c.id, 'assistant', 'b2');
    assert.deepEqual(path_(again, c.id), ['a', 'b2'], 'the migrated line continues from its parents');
    assert.deepEqual(again.messages(c.id)[1].branches, [b.id, again.messages(c.id)[1].id]);
    void a;
  } finally {
    again.close();
  }
});
