/**
 * renderer/lib/conversation-file.ts: a conversation exported to JSON reads back as the same
 * messages (stats kept; an answer exported while streaming comes back as interrupted); Markdown
 * carries the settings, the messages and each answer's stats; a file that is not an export, of
 * another version, or with a bad message is refused with the reason.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Conversation, Settings } from '../../main/contract/types.ts';
import { FAKE_SETTINGS } from './renderer-fakes.ts';
import { conversationToJson, conversationToMarkdown, exportFileName, parseConversationFile } from '../../renderer/lib/conversation-file.ts';

const settings: Settings = { ...FAKE_SETTINGS, seed: 7, systemPrompt: 'Be brief.' };
const stats = { finishReason: 'stop' as const, promptTokens: 12, generatedTokens: 40, reusedTokens: 0, ttftMs: 42.4, prefillTokensPerSec: 900, decodeTokensPerSec: 55.55 };
const conversation: Conversation = {
  id: 'c1',
  title: 'Math / notes?',
  createdAt: 1,
  updatedAt: 2,
  messages: [
    { id: 'm1', conversationId: 'c1', role: 'user', content: 'What is $x^2$?', status: 'complete', stats: null, error: null, createdAt: 1 },
    { id: 'm2', conversationId: 'c1', role: 'assistant', content: 'A square.', status: 'complete', stats, error: null, createdAt: 2 },
    { id: 'm3', conversationId: 'c1', role: 'assistant', content: 'Half', status: 'streaming', stats: null, error: null, createdAt: 3 },
  ],
};
const ctx = { settings, model: 'stories260K', now: Date.UTC(2026, 10, 30) };

describe('conversation files', () => {
  it('JSON round trip keeps roles, text and stats; a streaming answer comes back interrupted', () => {
    const back = parseConversationFile(conversationToJson(conversation, ctx));
    assert.equal(back.title, 'Math / notes?');
    assert.deepEqual(back.messages.slice(0, 2), [
      { role: 'user', content: 'What is $x^2$?', status: 'complete', stats: null, error: null },
      { role: 'assistant', content: 'A square.', status: 'complete', stats, error: null },
    ]);
    assert.deepEqual(back.messages[2], { role: 'assistant', content: 'Half', status: 'error', stats: null, error: 'interrupted before it was exported' });
    assert.equal(JSON.parse(conversationToJson(conversation, ctx)).settings.seed, 7);
  });

  it('Markdown has the title, the settings, each message and the answer stats', () => {
    const md = conversationToMarkdown(conversation, ctx);
    assert.match(md, /^# Math \/ notes\?\n\n_Exported 2026-11-30T00:00:00.000Z · settings at export: model stories260K · max context 2048 · max new tokens 256 · temperature 0.8 · top-k 40 · top-p 0.95 · min-p 0.05 · seed 7_\n/);
    assert.match(md, /## System\n\nBe brief.\n/);
    assert.match(md, /## You\n\nWhat is \$x\^2\$\?\n\n## Assistant\n\nA square.\n\n_40 tokens · TTFT 42 ms · 55.5 tok\/s · stop_\n/);
  });

  it("an answer's thinking: kept apart in JSON and read back; a quoted block before the answer in Markdown", () => {
    const thought = { ...stats, reasoningTokens: 12, reasoningMs: 1500 };
    const c: Conversation = {
      ...conversation,
      messages: [{ id: 'm4', conversationId: 'c1', role: 'assistant', content: 'Four.', reasoning: 'Two and two.\n\nSo four.', status: 'complete', stats: thought, error: null, createdAt: 4 }],
    };
    const back = parseConversationFile(conversationToJson(c, ctx));
    assert.deepEqual(back.messages, [{ role: 'assistant', content: 'Four.', reasoning: 'Two and two.\n\nSo four.', status: 'complete', stats: thought, error: null }]);
    assert.match(conversationToMarkdown(c, ctx), /## Assistant\n\n> \*\*Thinking\*\* \(12 tokens, 1\.5 s\)\n>\n> Two and two\.\n>\n> So four\.\n\nFour\.\n/);
  });

  it('refuses what is not an export, with the reason', () => {
    assert.throws(() => parseConversationFile('not json'), /the file is not JSON/);
    assert.throws(() => parseConversationFile('{"format":"other"}'), /not a Ropewalk conversation export \(format "other"\)/);
    assert.throws(() => parseConversationFile('{"format":"ropewalk.conversation","version":9,"messages":[]}'), /version 9 is not one this Ropewalk reads/);
    assert.throws(() => parseConversationFile('{"format":"ropewalk.conversation","version":1,"messages":[{"role":"robot","content":"x"}]}'), /message 1 needs a role/);
  });

  it("each answer is stamped with the model and settings its stats recorded, not the ones at export (another model's answer said the current one)", () => {
    const older = { ...stats, model: 'Qwen3-0.6B', settings: { maxContext: 40960, maxTokens: 512, temperature: 0.6, topK: 20, topP: 0.95, minP: 0, repetitionPenalty: 1, seed: null } };
    const c: Conversation = { ...conversation, messages: [{ id: 'a', conversationId: 'c1', role: 'assistant', content: 'Old.', status: 'complete', stats: older, error: null, createdAt: 1 }] };
    const md = conversationToMarkdown(c, ctx); // exported while stories260K is loaded
    assert.match(md, /_40 tokens · TTFT 42 ms · 55\.5 tok\/s · stop · model Qwen3-0\.6B · max context 40960 · max new tokens 512 · temperature 0\.6 · top-k 20 · top-p 0\.95 · min-p 0 · seed random_/);
    assert.match(md, /settings at export: model stories260K/);
    assert.deepEqual(JSON.parse(conversationToJson(c, ctx)).messages[0].stats, older);
    assert.deepEqual(parseConversationFile(conversationToJson(c, ctx)).messages[0].stats, older, 'kept through an import');
  });

  it('documents: JSON carries each as an attachment (name, kind, hash, text), Markdown names them under the message', () => {
    const doc = (id: string, name: string, kind: 'text' | 'pdf') => ({ id, name, kind, size: 10, hash: `${id}`.padEnd(64, '0'), tokens: 5, fit: 'whole' as const });
    const c: Conversation = {
      ...conversation,
      messages: [
        { id: 'u1', conversationId: 'c1', role: 'user', content: 'Compare them', status: 'complete', stats: null, error: null, createdAt: 1, documents: [doc('d1', 'notes.md', 'text'), doc('d2', 'rope.pdf', 'pdf')] },
        { id: 'a1', conversationId: 'c1', role: 'assistant', content: 'They agree.', status: 'complete', stats, error: null, createdAt: 2 },
      ],
    };
    const texts = new Map([['d1', 'Tie a bowline.']]); // d2 could not be read
    const json = JSON.parse(conversationToJson(c, { ...ctx, documentTexts: texts }));
    assert.deepEqual(json.messages[0].attachments, [
      { name: 'notes.md', kind: 'text', hash: 'd1'.padEnd(64, '0'), text: 'Tie a bowline.' },
      { name: 'rope.pdf', kind: 'pdf', hash: 'd2'.padEnd(64, '0'), text: null },
    ]);
    assert.equal('attachments' in json.messages[1], false, 'none on a message without documents');
    assert.match(conversationToMarkdown(c, ctx), /## You\n\nCompare them\n\n_Attached: notes\.md \(text\), rope\.pdf \(pdf\)_\n\n## Assistant/);
    // Read back: the document with its text comes back; the one exported without text does not.
    const back = parseConversationFile(JSON.stringify(json));
    assert.deepEqual(back.messages.map((m) => m.content), ['Compare them', 'They agree.']);
    assert.deepEqual(back.messages[0].attachments, [{ name: 'notes.md', kind: 'text', hash: 'd1'.padEnd(64, '0'), text: 'Tie a bowline.' }]);
    assert.equal('attachments' in back.messages[1], false);
  });

  it('file names come from the title, made safe', () => {
    assert.equal(exportFileName('Math / notes?', 'md'), 'Math notes.md');
    assert.equal(exportFileName('///', 'json'), 'conversation.json');
  });
});
