/** The wording of a document's pages (main/contract/document-pages.ts), shared by the CLI and the chip, and the window's citation links (renderer/lib/citations.ts). */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { noTextWarning, ocrNote, pageList } from '../../main/contract/document-pages.ts';
import { findCitations, partRange } from '../../renderer/lib/citations.ts';

it('lists pages with ranges of three or more, and words OCR and pages without text', () => {
  assert.equal(pageList([1, 2, 3, 5, 7, 8]), '1–3, 5, 7, 8');
  assert.equal(pageList([4]), '4');
  assert.equal(ocrNote({ kind: 'pdf', ocrPages: [2, 3, 4] }), 'pages 2–4 read by OCR');
  assert.equal(ocrNote({ kind: 'image', ocrPages: [1] }), 'text read by OCR');
  assert.equal(ocrNote({ kind: 'pdf', ocrPages: [] }), null);
  assert.equal(noTextWarning({ kind: 'pdf', pagesWithoutText: [4] }), 'page 4 has no text (no text layer, and OCR found none): left out');
  assert.equal(noTextWarning({ kind: 'pdf', pagesWithoutText: [4, 5] }), 'pages 4, 5 have no text (no text layer, and OCR found none): left out');
  assert.equal(noTextWarning({ kind: 'pdf' }), null);
});

it('finds the citations of attached documents in an answer, and the range of the cited part', () => {
  const docs = [
    { id: 'd1', name: 'harbor-notes.pdf' },
    { id: 'd2', name: 'guide.md' },
    { id: 'd3', name: 'old harbor-notes.pdf' },
  ];
  const answer = 'The ferry leaves at noon [harbor-notes.pdf p. 2]. Setup is in [guide.md § Setup] and [old harbor-notes.pdf p. 1]; again [harbor-notes.pdf p. 2], not [elsewhere.pdf p. 3] nor [guide.md chapter 4].';
  assert.deepEqual(findCitations(answer, docs), [
    { label: 'harbor-notes.pdf p. 2', documentId: 'd1', part: 'page 2' },
    { label: 'guide.md § Setup', documentId: 'd2', part: '§ Setup' },
    { label: 'old harbor-notes.pdf p. 1', documentId: 'd3', part: 'page 1' },
  ]);
  const parts = [
    { label: 'page 1', start: 0 },
    { label: 'page 2', start: 10 },
  ];
  assert.deepEqual(partRange(parts, 'page 2', 25), { start: 10, end: 25 });
  assert.deepEqual(partRange(parts, 'page 1', 25), { start: 0, end: 10 });
  assert.deepEqual(partRange(parts, '', 25), { start: 0, end: 25 });
  assert.equal(partRange(parts, 'page 9', 25), null);
});
