/**
 * Document extraction on fixtures written here (test/helpers/documents.ts): a PDF with a text
 * layer, one without (a scan), an encrypted PDF, a corrupt one, a .docx, HTML with scripts,
 * Markdown sections, binary and oversized files; and the worker path gives the same result.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DocumentError } from '../../main/documents/errors.ts';
import { extractDocumentOffThread } from '../../main/documents/extract-off-thread.ts';
import { extractDocument, htmlText, MAX_DOCUMENT_BYTES } from '../../main/documents/extract.ts';
import { buildDocx, buildPdf } from '../helpers/documents.ts';

const enc = (s: string) => new TextEncoder().encode(s);

/** Asserts `p` rejects with a DocumentError of `code` whose message names `file` and matches `re`. */
async function rejectsWith(p: Promise<unknown>, code: string, file: string, re: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof DocumentError, `expected a DocumentError, got ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.file, file);
    assert.ok(e.message.startsWith(`${file}: `), e.message);
    assert.match(e.message, re);
    return true;
  });
}

describe('extractDocument', () => {
  it('reads a PDF text layer page by page, with page parts at the right offsets', async () => {
    const pdf = buildPdf([['Ropes are laid (twisted) in a ropewalk.', 'A second line.'], null, ['Page three speaks of hemp.']]);
    const d = await extractDocument('rope.pdf', pdf);
    assert.equal(d.kind, 'pdf');
    assert.equal(d.size, pdf.length);
    assert.match(d.hash, /^[0-9a-f]{64}$/);
    assert.equal(d.text, 'Ropes are laid (twisted) in a ropewalk.\nA second line.\n\nPage three speaks of hemp.');
    assert.deepEqual(d.parts.map((p) => p.label), ['page 1', 'page 3']);
    assert.equal(d.text.slice(d.parts[1].start), 'Page three speaks of hemp.');
    // Page 2 has no text layer and no image to read by OCR: named, not dropped silently.
    assert.deepEqual(d.pagesWithoutText, [2]);
    assert.deepEqual(d.ocrPages, []);
  });

  it('refuses a PDF without a text layer, an encrypted PDF and a corrupt one, naming the file', async () => {
    await rejectsWith(extractDocument('scan.pdf', buildPdf([null, null])), 'DOCUMENT_NO_TEXT', 'scan.pdf', /no text found: no text layer, and OCR found no text in its images/);
    await rejectsWith(extractDocument('scan.pdf', buildPdf([null, null]), { ocr: false }), 'DOCUMENT_NO_TEXT', 'scan.pdf', /no text found: a scanned PDF\? .*OCR is off/);
    await rejectsWith(extractDocument('locked.pdf', buildPdf([['secret']], { encrypted: true })), 'DOCUMENT_ENCRYPTED', 'locked.pdf', /encrypted/);
    const truncated = buildPdf([['cut short']]).subarray(0, 60);
    await rejectsWith(extractDocument('cut.pdf', truncated), 'DOCUMENT_CORRUPT', 'cut.pdf', /not a valid PDF/);
  });

  it('reads a .docx and refuses a corrupt one', async () => {
    const d = await extractDocument('notes.docx', await buildDocx(['First paragraph.', 'Second <one> & more.']));
    assert.equal(d.kind, 'docx');
    assert.equal(d.text.trim(), 'First paragraph.\n\nSecond <one> & more.');
    await rejectsWith(extractDocument('broken.docx', enc('PK\u0003\u0004 not really a zip')), 'DOCUMENT_CORRUPT', 'broken.docx', /not a valid \.docx/);
  });

  it('keeps the visible text of HTML, without scripts or styles', () => {
    const text = htmlText('<html><head><title>T</title><style>p{}</style></head><body><h1>Knots</h1><script>alert("x")</script><p>Bowline &amp; hitch</p><p>Reef<br>knot</p></body></html>');
    assert.equal(text, '# Knots\n\nBowline & hitch\n\nReef\nknot');
  });

  it('reads text, code and Markdown (with sections) as UTF-8, and refuses binary files', async () => {
    const md = await extractDocument('guide.md', enc('\uFEFFIntro\r\n# Setup\r\nrun it\n```\n# not a heading\n```\n## Use\nask'));
    assert.equal(md.kind, 'markdown');
    assert.deepEqual(md.parts.map((p) => p.label), ['§ Setup', '§ Use']);
    assert.equal(md.text.slice(md.parts[1].start, md.parts[1].start + 6), '## Use');
    assert.equal((await extractDocument('main.rs', enc('fn main() {}'))).kind, 'code');
    assert.equal((await extractDocument('LICENSE', enc('MIT'))).kind, 'text');
    await rejectsWith(extractDocument('photo.gif', new Uint8Array([0x47, 0x49, 0x46, 0x38, 0, 0, 0, 13])), 'DOCUMENT_UNSUPPORTED', 'photo.gif', /unsupported type \.gif/);
    // A name that promises text, holding bytes that are not UTF-8: an encoding problem, said so.
    await rejectsWith(extractDocument('menu.txt', new Uint8Array([0x63, 0x61, 0x66, 0xe9])), 'DOCUMENT_UNSUPPORTED', 'menu.txt', /not a readable \.txt file: not UTF-8 text .*save it as UTF-8/);
    await rejectsWith(extractDocument('data.txt', new Uint8Array([1, 0, 2, 0])), 'DOCUMENT_UNSUPPORTED', 'data.txt', /not UTF-8 text \(a binary file/);
    await rejectsWith(extractDocument('empty.txt', enc('  \n ')), 'DOCUMENT_NO_TEXT', 'empty.txt', /no text found/);
  });

  it('refuses a file over the size limit and states the limit', async () => {
    await rejectsWith(extractDocument('huge.txt', new Uint8Array(MAX_DOCUMENT_BYTES + 1)), 'DOCUMENT_TOO_LARGE', 'huge.txt', /over the 16 MiB limit/);
  });
});

describe('extractDocumentOffThread', () => {
  it('extracts in a worker with progress, with the same result and the same typed errors', async () => {
    const pdf = buildPdf([['one'], ['two'], ['three'], ['four']]);
    const progress: number[] = [];
    const d = await extractDocumentOffThread('four.pdf', pdf, { offThreadBytes: 0, onProgress: (f) => progress.push(f) });
    assert.deepEqual(d, await extractDocument('four.pdf', pdf));
    assert.deepEqual(progress, [0.25, 0.5, 0.75, 1, 1]);
    await rejectsWith(extractDocumentOffThread('scan.pdf', buildPdf([null]), { offThreadBytes: 0 }), 'DOCUMENT_NO_TEXT', 'scan.pdf', /no text layer, and OCR found no text/);
  });
});
