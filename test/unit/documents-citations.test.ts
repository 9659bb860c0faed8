/**
 * Citations (issue 20): each passage in the prompt is labelled with its document and page or
 * heading, `[harbor-notes.pdf p. 2]`; a chunk that crosses a page is cut into two labelled
 * passages; the prompt explains the format; `fitDocuments` returns every passage with its range
 * (whole documents and relevant chunks), with a word-count tokenizer so the sizes are plain.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChatMessage } from '../../main/engine/generate/types.ts';
import { ChunkCache, fitDocuments, type AttachedText, type TokenCounter } from '../../main/documents/assemble.ts';
import { citationLabel, labelledBody, passagesOf, wholeBody } from '../../main/documents/citations.ts';
import { CITATION_NOTE, documentBlock, userTurnText } from '../../main/documents/prompt.ts';

const pages = ['Harbor opens at dawn.', 'The ferry leaves at noon.', 'Nets dry on the quay.'];
const text = pages.join('\n\n');
const parts = pages.map((_, i) => ({ label: `page ${i + 1}`, start: pages.slice(0, i).reduce((n, p) => n + p.length + 2, 0) }));

/** One token per word, for prompts and texts alike. */
const words = (t: string) => t.split(/\s+/).filter(Boolean).length;
const counter: TokenCounter = {
  countTokens: async ({ messages }) => messages.reduce((n, m) => n + words(m.content), 0),
  countEach: async (texts) => texts.map(words),
};

describe('citations', () => {
  it('labels pages and sections with the document, and a document without parts with its name', () => {
    assert.equal(citationLabel('harbor-notes.pdf', 'page 2'), 'harbor-notes.pdf p. 2');
    assert.equal(citationLabel('guide.md', '§ Setup'), 'guide.md § Setup');
    assert.equal(citationLabel('book.txt', ''), 'book.txt');
  });

  it('labels each page of a whole document, with the character range of each passage', () => {
    const { body, passages } = wholeBody('harbor-notes.pdf', text, parts);
    assert.equal(body, '[harbor-notes.pdf p. 1]\nHarbor opens at dawn.\n\n[harbor-notes.pdf p. 2]\nThe ferry leaves at noon.\n\n[harbor-notes.pdf p. 3]\nNets dry on the quay.');
    assert.deepEqual(
      passages.map((p) => [p.label, p.page, text.slice(p.start, p.end).trim()]),
      pages.map((t, i) => [`harbor-notes.pdf p. ${i + 1}`, i + 1, t]),
    );
    assert.deepEqual(wholeBody('book.txt', 'plain', []), { body: 'plain', passages: [{ document: 'book.txt', label: 'book.txt', start: 0, end: 5 }] });
  });

  it('cuts a stretch that crosses a page into one passage per page, and names sections', () => {
    const from = text.indexOf('ferry');
    const got = passagesOf('h.pdf', text, parts, from, text.indexOf('dry'));
    assert.deepEqual(got.map((p) => [p.label, text.slice(p.start, p.end).trim()]), [['h.pdf p. 2', 'ferry leaves at noon.'], ['h.pdf p. 3', 'Nets']]);
    assert.equal(labelledBody(text, got), '[h.pdf p. 2]\nferry leaves at noon.\n\n[h.pdf p. 3]\nNets');
    const md = '# Setup\nrun it\n# Use\nask';
    const [setup, use] = passagesOf('g.md', md, [{ label: '§ Setup', start: 0 }, { label: '§ Use', start: 15 }], 0, md.length);
    assert.deepEqual([setup.section, use.section, use.label], ['Setup', 'Use', 'g.md § Use']);
  });

  it('explains the format once at the top of a turn with documents, and not in one without', () => {
    assert.equal(userTurnText('q', [documentBlock('a.pdf', 'x')]), `${CITATION_NOTE}\n\n<document name="a.pdf">\nx\n</document>\n\nq`);
    assert.match(CITATION_NOTE, /\[notes\.pdf p\. 2\]/);
    assert.equal(userTurnText('q', []), 'q');
  });

  it('fitDocuments gives the passages in the prompt: every page whole, or the chosen chunks with their pages', async () => {
    const a: AttachedText = { key: 'k', name: 'harbor-notes.pdf', text, parts, fit: 'relevant' };
    const render = (body: (d: AttachedText) => string): ChatMessage[] => [{ role: 'user', content: userTurnText('When does the ferry leave?', [documentBlock(a.name, body(a))]) }];
    const whole = await fitDocuments({ counter, render, attachments: [a], question: 'When does the ferry leave?', room: 1000, cache: new ChunkCache() });
    assert.deepEqual(whole.passages[0].map((p) => p.page), [1, 2, 3]);
    assert.equal(whole.documentParts, null);
    const long = { ...a, key: 'long', text: pages.map((p) => `${p} ${'filler words here. '.repeat(12)}`).join('\n\n') };
    long.parts = pages.map((_, i) => ({ label: `page ${i + 1}`, start: long.text.split('\n\n').slice(0, i).reduce((n, p) => n + p.length + 2, 0) }));
    const renderLong = (body: (d: AttachedText) => string): ChatMessage[] => [{ role: 'user', content: userTurnText('When does the ferry leave?', [documentBlock(long.name, body(long))]) }];
    const cut = await fitDocuments({ counter, render: renderLong, attachments: [long], question: 'When does the ferry leave?', room: 90, cache: new ChunkCache() });
    const labels = cut.passages[0].map((p) => p.label);
    assert.ok(labels.includes('harbor-notes.pdf p. 2'), labels.join(', '));
    assert.ok(cut.messages[0].content.includes('[harbor-notes.pdf p. 2]\nThe ferry leaves at noon.'), cut.messages[0].content);
    for (const p of cut.passages[0]) assert.ok(cut.messages[0].content.includes(long.text.slice(p.start, p.end).trim()), 'each passage is in the prompt as given by its range');
  });
});
