/**
 * Reasoning kept apart in the conversation store (real SQLite in a temp folder): the migration
 * from a database without it, messages' reasoning written, patched and read back, a chat's Think
 * toggle; and the history as the chat template receives it (`historyMessages` → the real Qwen3
 * template drops earlier turns' reasoning itself and renders the current turn's; a template that
 * does not read `reasoning_content` gets the content alone).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { historyMessages } from '../../main/services/history.ts';
import { ConversationStore, DB_FILE } from '../../main/services/store.ts';
import { qwen3Tokenizer } from '../helpers/forced-backend.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-store-reasoning-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => path.join(root, `db${n++}`);

test('a database from before reasoning gains the columns; its answers have none', () => {
  const dir = freshDir();
  const s = new ConversationStore(dir);
  const version = s.schemaVersion;
  const c = s.createConversation('old');
  s.appendMessage(c.id, { role: 'assistant', content: '<think>x</think>y', status: 'complete' });
  s.close();
  const db = new Database(path.join(dir, DB_FILE));
  // Undo the migrations after reasoning's (an attachment's own name, the eighth; a chat's own
  // settings, the seventh; documents' page lists, the sixth), then reasoning's (the fifth).
  db.exec(`ALTER TABLE attachments DROP COLUMN name;`);
  db.exec(`ALTER TABLE conversations DROP COLUMN chat_settings;`);
  db.exec(`ALTER TABLE documents DROP COLUMN pages_without_text; ALTER TABLE documents DROP COLUMN ocr_pages;`);
  db.exec(`ALTER TABLE messages DROP COLUMN reasoning; ALTER TABLE conversations DROP COLUMN thinking;`);
  db.pragma(`user_version = 4`); // the schema before reasoning's (the fifth)
  db.close();
  const again = new ConversationStore(dir);
  try {
    assert.equal(again.schemaVersion, version);
    const [m] = again.getConversation(c.id).messages;
    assert.equal(m.content, '<think>x</think>y', 'old text is left as it was stored');
    assert.equal(m.reasoning, undefined);
    assert.equal(again.getSummary(c.id).thinking, undefined);
  } finally {
    again.close();
  }
});

test("an answer's reasoning is stored apart, patched as it streams, and '' means none", () => {
  const s = new ConversationStore(freshDir());
  const c = s.createConversation('r');
  const m = s.appendMessage(c.id, { role: 'assistant', content: '', status: 'streaming' });
  assert.equal(m.reasoning, undefined);
  s.updateMessage(m.id, { reasoning: 'Thinking so far' });
  s.updateMessage(m.id, { content: 'Answer', reasoning: 'Thinking, all of it', status: 'complete' });
  const [got] = s.getConversation(c.id).messages;
  assert.deepEqual([got.content, got.reasoning], ['Answer', 'Thinking, all of it']);
  s.updateMessage(m.id, { reasoning: '' });
  assert.equal(s.getMessage(m.id).reasoning, undefined);
  const imported = s.importConversation('imp', [{ role: 'assistant', content: 'A', reasoning: 'R', status: 'complete', stats: null, error: null }]);
  assert.equal(imported.messages[0].reasoning, 'R');
  s.close();
});

test("a chat's Think toggle: unset, on, off, back to the template's default; unknown chat refused", () => {
  const s = new ConversationStore(freshDir());
  const c = s.createConversation('t');
  assert.equal(s.conversationThinking(c.id), null);
  assert.equal(s.setConversationThinking(c.id, true).thinking, true);
  assert.equal(s.conversationThinking(c.id), true);
  assert.equal(s.setConversationThinking(c.id, false).thinking, false);
  assert.equal(s.listConversations()[0].thinking, false);
  assert.equal(s.setConversationThinking(c.id, null).thinking, undefined);
  assert.throws(() => s.setConversationThinking('nope', true), /no conversation with id nope/);
  s.close();
});

test('the history reaches the template as the template expects it', () => {
  const s = new ConversationStore(freshDir());
  const c = s.createConversation('h');
  s.appendMessage(c.id, { role: 'user', content: 'Q1', status: 'complete' });
  s.appendMessage(c.id, { role: 'assistant', content: 'A1', reasoning: 'R1', status: 'complete' });
  s.appendMessage(c.id, { role: 'user', content: 'Q2', status: 'complete' });
  const history = historyMessages(s.getConversation(c.id).messages);
  s.close();
  assert.deepEqual(history, [
    { role: 'user', content: 'Q1' },
    { role: 'assistant', content: 'A1', reasoning: 'R1' },
    { role: 'user', content: 'Q2' },
  ]);
  const qwen3 = qwen3Tokenizer();
  // Qwen3's own template drops an earlier turn's reasoning ...
  assert.equal(
    qwen3.renderChat(history),
    '<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n',
  );
  // ... and renders it for the turn after the last user message (it got `reasoning_content`).
  assert.equal(
    qwen3.renderChat(history.slice(0, 2), { addGenerationPrompt: false }),
    '<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nR1\n</think>\n\nA1<|im_end|>\n',
  );
  // A template that does not read reasoning_content: the content alone (nor under our own name).
  const plain = qwen3Tokenizer('{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ m.reasoning }}{% endfor %}');
  assert.equal(plain.renderChat(history.slice(0, 2), { addGenerationPrompt: false }), '[user]Q1[assistant]A1');
});

test('enable_thinking reaches the template when the chat sets it; unset, the template default holds', () => {
  const qwen3 = qwen3Tokenizer();
  const msgs = [{ role: 'user' as const, content: 'Hi' }];
  assert.ok(qwen3.renderChat(msgs, { enableThinking: false }).endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'));
  assert.ok(qwen3.renderChat(msgs, { enableThinking: true }).endsWith('<|im_start|>assistant\n'));
  assert.ok(qwen3.renderChat(msgs).endsWith('<|im_start|>assistant\n'), "unset: Qwen3's default (thinking)");
  const echo = qwen3Tokenizer('{{ messages[0].content }}:{{ enable_thinking }}');
  // Printed as Python's jinja2 prints a boolean (jinja-compat.ts), as transformers would render it.
  assert.deepEqual([echo.renderChat(msgs, { enableThinking: false }), echo.renderChat(msgs)], ['Hi:False', 'Hi:']);
});
