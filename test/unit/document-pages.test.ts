/** The wording of a document's pages (main/contract/document-pages.ts), shared by the CLI and the chip. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { noTextWarning, ocrNote, pageList } from '../../main/contract/document-pages.ts';

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
