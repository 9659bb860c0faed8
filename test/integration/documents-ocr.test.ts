/**
 * OCR of scanned pages and images (issue 20), offline with tesseract.js and the English data
 * from npm: text rendered by Chromium (test/helpers/rendered-text.ts) is read back from a PNG and
 * from JPEG pages inside PDFs written here; a wholly scanned PDF becomes text instead of "no text
 * found"; a page without text is named; Stop ends the OCR with DOCUMENT_CANCELLED.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { DocumentError } from '../../main/documents/errors.ts';
import { extractDocumentOffThread } from '../../main/documents/extract-off-thread.ts';
import { extractDocument } from '../../main/documents/extract.ts';
import { buildPdf } from '../helpers/documents.ts';
import { renderTextImages, type RenderedPage } from '../helpers/rendered-text.ts';

const PAGE_ONE = [
  'The harbor master keeps a careful log of every ship that enters the port, with its name, its cargo and the hour of its arrival.',
  'Ropes of hemp and manila were twisted in the long ropewalk beside the quay, and the finished coils were stored in the warehouse.',
  'In winter the north wind brings fog from the sea, so the lighthouse keeper lights the lamp before four in the afternoon.',
];
const PAGE_TWO = ['Tide tables for the second quarter are printed on the back of the ferry timetable.'];
const SCANNED_PARAGRAPH = ['The old ropewalk by the harbor was a quarter of a mile long, and the spinners walked backwards down it all day.'];

/** Lowercase words of a text, without punctuation. */
const words = (text: string) => text.toLowerCase().match(/[a-z0-9]+/g) ?? [];

/** The share of `expected`'s words (counted with repeats) found among `actual`'s. */
function wordRecall(expected: string, actual: string): number {
  const pool = new Map<string, number>();
  for (const w of words(actual)) pool.set(w, (pool.get(w) ?? 0) + 1);
  const want = words(expected);
  let found = 0;
  for (const w of want) {
    const n = pool.get(w) ?? 0;
    if (n > 0) {
      found++;
      pool.set(w, n - 1);
    }
  }
  return found / want.length;
}

let png: RenderedPage;
let jpegs: RenderedPage[];
const scanned = (p: RenderedPage) => ({ jpeg: p.bytes, width: p.width, height: p.height });

describe('OCR', () => {
  before(async () => {
    [png] = await renderTextImages([PAGE_ONE], 'png');
    jpegs = await renderTextImages([PAGE_ONE, PAGE_TWO], 'jpeg');
  });

  it('reads a PNG of rendered text with at least 95 % of its words', async (t) => {
    const progress: [number, string | undefined][] = [];
    const started = Date.now();
    const d = await extractDocument('page.png', png.bytes, { onProgress: (f, phase) => progress.push([f, phase]) });
    t.diagnostic(`OCR of one 816 × 1056 page: ${Date.now() - started} ms with the worker's start; word recall ${(wordRecall(PAGE_ONE.join(' '), d.text) * 100).toFixed(1)} %`);
    assert.equal(d.kind, 'image');
    assert.deepEqual(d.ocrPages, [1]);
    const recall = wordRecall(PAGE_ONE.join(' '), d.text);
    assert.ok(recall >= 0.95, `recognised ${(recall * 100).toFixed(1)} % of the words: ${JSON.stringify(d.text)}`);
    assert.ok(progress.some(([, phase]) => phase === 'ocr'), 'OCR progress is reported');
    assert.deepEqual(progress[progress.length - 1], [1, undefined]);
  });

  it('turns a wholly scanned PDF into its OCR text, page by page (was "no text found")', async () => {
    const d = await extractDocument('scan.pdf', buildPdf(jpegs.map(scanned)));
    assert.deepEqual(d.ocrPages, [1, 2]);
    assert.deepEqual(d.pagesWithoutText, []);
    assert.deepEqual(d.parts.map((p) => p.label), ['page 1', 'page 2']);
    const second = d.text.slice(d.parts[1].start);
    assert.ok(wordRecall(PAGE_TWO.join(' '), second) >= 0.95, second);
    assert.ok(wordRecall(PAGE_ONE.join(' '), d.text.slice(0, d.parts[1].start)) >= 0.95, d.text);
  });

  it('in a worker: text pages kept, the scanned page read by OCR in its place, a blank page named', async () => {
    const pdf = buildPdf([['Page one has a text layer.'], scanned(jpegs[1]), null, ['Page four has one too.']]);
    const phases = new Set<string | undefined>();
    const d = await extractDocumentOffThread('mixed.pdf', pdf, { offThreadBytes: 0, onProgress: (_, phase) => phases.add(phase) });
    assert.deepEqual(d.ocrPages, [2]);
    assert.deepEqual(d.pagesWithoutText, [3]);
    assert.deepEqual(d.parts.map((p) => p.label), ['page 1', 'page 2', 'page 4']);
    assert.ok(d.text.startsWith('Page one has a text layer.\n\n'), d.text);
    assert.ok(d.text.endsWith('\n\nPage four has one too.'), d.text);
    assert.ok(wordRecall(PAGE_TWO.join(' '), d.text.slice(d.parts[1].start, d.parts[2].start)) >= 0.95, d.text);
    assert.ok(phases.has('ocr'), 'OCR progress crosses the worker');
  });

  it('a typed page with a scanned paragraph pasted in: the image read by OCR and merged in reading order', async () => {
    // 612 × 300 pt at the middle of the page, rendered at 816 × 400 px (96 dpi); typed lines above and below it.
    const [region] = await renderTextImages([SCANNED_PARAGRAPH], 'jpeg', { width: 816, height: 400 });
    const page = {
      lines: [
        { x: 72, y: 740, text: 'Typed heading above the scan.' },
        { x: 72, y: 100, text: 'Typed footer below the scan.' },
      ],
      image: scanned(region),
      at: { x: 0, y: 250, width: 612, height: 300 },
    };
    const d = await extractDocument('pasted.pdf', buildPdf([['Page one is typed.'], page]));
    assert.deepEqual(d.ocrPages, [2]);
    assert.deepEqual(d.pagesWithoutText, []);
    const second = d.text.slice(d.parts[1].start);
    const recall = wordRecall(SCANNED_PARAGRAPH.join(' '), second);
    assert.ok(recall >= 0.95, `recognised ${(recall * 100).toFixed(1)} % of the scanned words: ${JSON.stringify(second)}`);
    const [above, scan, below] = ['Typed heading above the scan.', 'ropewalk', 'Typed footer below the scan.'].map((w) => second.indexOf(w));
    assert.ok(above === 0 && above < scan && scan < below, `in reading order: ${JSON.stringify(second)}`);
    // An image over the page's text (a letterhead, a watermark) is not read.
    const over = { ...page, at: { x: 0, y: 0, width: 612, height: 792 } };
    const plain = await extractDocument('letterhead.pdf', buildPdf([over]));
    assert.deepEqual(plain.ocrPages, []);
    assert.equal(plain.text, (await extractDocument('typed.pdf', buildPdf([page.lines]))).text, 'the text as without the image');
  });

  it('Stop (an AbortSignal) ends the OCR with DOCUMENT_CANCELLED, naming the file', async () => {
    const stop = new AbortController();
    const started = Date.now();
    await assert.rejects(
      extractDocument('scan.pdf', buildPdf(jpegs.map(scanned)), { signal: stop.signal, onProgress: (_, phase) => phase === 'ocr' && stop.abort() }),
      (e: unknown) => e instanceof DocumentError && e.code === 'DOCUMENT_CANCELLED' && e.message.startsWith('scan.pdf: '),
    );
    assert.ok(Date.now() - started < 30_000);
  });
});
