/**
 * Documents in the conversation store on real SQLite (issue 19 item 6): the same content attached
 * under two names is one stored document, but each attachment keeps its own file's name (in the
 * messages, in the prompt's attachments, in what putDocument returns); and search finds a
 * conversation by the text of a document it carries, with the document's name and the text
 * around the hit as the match.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ConversationStore } from '../../main/services/store.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-store-docs-test-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = () => new ConversationStore(path.join(root, `db${n++}`));
const doc = (name: string, text: string, hash = 'a'.repeat(64)) => ({ name, kind: 'text' as const, size: text.length, hash, text, parts: [] });

test('the same content under two names: one document, each attachment under its own name', () => {
  const s = fresh();
  try {
    const first = s.putDocument(doc('notes.txt', 'The harbor opens at six.'));
    const second = s.putDocument(doc('copy of notes.txt', 'The harbor opens at six.'));
    assert.equal(second.id, first.id, 'stored once');
    assert.equal(second.name, 'copy of notes.txt', 'the file just attached is named as itself');
    assert.equal(s.countDocuments(), 1);

    const c = s.createConversation('two names');
    const m1 = s.appendMessage(c.id, { role: 'user', content: 'one', status: 'complete' });
    const m2 = s.appendMessage(c.id, { role: 'user', content: 'two', status: 'complete' });
    s.attachDocuments(m1.id, [{ id: first.id, fit: 'whole', name: first.name }]);
    s.attachDocuments(m2.id, [{ id: second.id, fit: 'whole', name: second.name }]);
    assert.deepEqual(s.getConversation(c.id).messages.map((m) => m.documents?.map((d) => d.name)), [['notes.txt'], ['copy of notes.txt']]);
    assert.deepEqual([s.attachmentsOf(m1.id)[0].document.name, s.attachmentsOf(m2.id)[0].document.name], ['notes.txt', 'copy of notes.txt']);
    // Without a name (an older client), the stored document's.
    const m3 = s.appendMessage(c.id, { role: 'user', content: 'three', status: 'complete' });
    s.attachDocuments(m3.id, [{ id: first.id, fit: 'whole' }]);
    assert.equal(s.attachmentsOf(m3.id)[0].document.name, 'notes.txt');
  } finally {
    s.close();
  }
});

test('search finds a conversation by the text of a document it carries, with the name and the text around the hit', () => {
  const s = fresh();
  try {
    const text = `${'Tides and ropes. '.repeat(6)}The lighthouse keeper paints the railing GREEN every spring, before the boats return.`;
    const d = s.putDocument(doc('harbor.md', text));
    const carries = s.createConversation('Harbor questions');
    const m = s.appendMessage(carries.id, { role: 'user', content: 'When does it open?', status: 'complete' });
    s.attachDocuments(m.id, [{ id: d.id, fit: 'whole', name: 'harbor notes.md' }]);
    const says = s.createConversation('Paint');
    s.appendMessage(says.id, { role: 'user', content: 'Is green a good railing colour?', status: 'complete' });
    s.createConversation('Unrelated');

    const found = s.listConversations('railing green');
    assert.deepEqual(found.map((c) => c.title), ['Harbor questions'], 'only the document holds "railing green"');
    assert.equal(found[0].match, 'harbor notes.md: …lighthouse keeper paints the railing GREEN every spring, before the boats return.');
    // A hit in the messages is shown before one in a document.
    const green = s.listConversations('green');
    assert.deepEqual(green.map((c) => [c.title, c.match?.slice(0, 17)]), [['Paint', 'Is green a good r'], ['Harbor questions', 'harbor notes.md: ']]);
    // Off the path (an edit left it on an earlier branch), a document is not a hit.
    s.leavePath(carries.id, m.id);
    assert.deepEqual(s.listConversations('railing green'), []);
  } finally {
    s.close();
  }
});

test('an imported conversation brings its documents back (their text, under their names); a claimed hash never shows another text', () => {
  const s = fresh();
  try {
    const mine = s.putDocument(doc('mine.txt', 'My own notes.', 'c'.repeat(64)));
    const c = s.importConversation('Imported', [
      { role: 'user', content: 'Compare them', status: 'complete', attachments: [
        { name: 'notes.md', kind: 'markdown', hash: 'd'.repeat(64), text: 'Tie a bowline.' },
        { name: 'unread.pdf', kind: 'pdf', hash: 'e'.repeat(64), text: null },
        { name: 'claims mine.txt', kind: 'text', hash: 'c'.repeat(64), text: 'Something else.' },
      ] },
      { role: 'assistant', content: 'They agree.', status: 'complete' },
    ]);
    const [q] = c.messages;
    assert.deepEqual(q.documents?.map((d) => [d.name, d.kind]), [['notes.md', 'markdown'], ['claims mine.txt', 'text']], 'one without text is left out');
    const texts = s.attachmentsOf(q.id).map((a) => a.document.text);
    assert.deepEqual(texts, ['Tie a bowline.', 'Something else.']);
    assert.notEqual(s.attachmentsOf(q.id)[1].document.id, mine.id, 'the hash of another text: stored apart');
    assert.equal(s.getDocument(mine.id).text, 'My own notes.', 'the existing document is untouched');
  } finally {
    s.close();
  }
});
