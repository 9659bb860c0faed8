/**
 * The text of a PDF, page by page, through unpdf (Mozilla's pdf.js, serverless build), each page
 * in reading order by layout (pdf-layout.ts), not in the order its content stream draws it.
 *
 * Contract: `pdfText(name, bytes, opts)` → `{ text, parts, ocrPages, pagesWithoutText }`: the
 * pages with text joined by a blank line, one part per such page (`page N` at its offset). A page
 * without a text layer (a scan) is read by OCR from its images (pdf-images.ts, ocr.ts) unless
 * `opts.ocr` is false; its number is in `ocrPages` when that found text, else in
 * `pagesWithoutText` (and the page is not in `text`): never dropped without saying so. A page
 * with a text layer that also paints an image over a region holding none of its text (a scanned
 * paragraph pasted into a typed page) gets that image read by OCR too, its lines placed in the
 * image's box and the page laid out again, so they come in reading order; the page is in
 * `ocrPages` then as well.
 * @throws DocumentError DOCUMENT_ENCRYPTED (a password), DOCUMENT_CORRUPT (does not parse),
 *   DOCUMENT_CANCELLED (opts.signal, during OCR).
 */
import { firstLine } from '../common/errors.ts';
import { DocumentError } from './errors.ts';
import type { DocumentPart, ExtractProgress } from './parts.ts';
import { OcrReader } from './ocr.ts';
import { pageImages, type PageBox } from './pdf-images.ts';
import { layoutPageText, type PlacedText } from './pdf-layout.ts';

type PdfDocument = Awaited<ReturnType<typeof import('unpdf').getDocumentProxy>>;
type PdfPage = Awaited<ReturnType<PdfDocument['getPage']>>;

export interface PdfText {
  text: string;
  parts: DocumentPart[];
  /** 1-based numbers of the pages whose text was read by OCR, ascending. */
  ocrPages: number[];
  /** 1-based numbers of pages without text (no text layer, and OCR off or finding none), ascending. */
  pagesWithoutText: number[];
}

export interface PdfTextOptions {
  /** Text pass: fraction of pages read; OCR pass: fraction of the pages without text recognised, with phase 'ocr'. */
  onProgress?: ExtractProgress;
  /** Read pages without a text layer by OCR (default true). */
  ocr?: boolean;
  signal?: AbortSignal;
}

/** Opens a PDF. @throws DocumentError DOCUMENT_ENCRYPTED or DOCUMENT_CORRUPT naming `name`. */
export async function openPdf(name: string, bytes: Uint8Array): Promise<PdfDocument> {
  const { getDocumentProxy } = await import('unpdf');
  try {
    // A copy: pdf.js transfers (detaches) the buffer it is given.
    return await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
  } catch (e) {
    const kind = (e as { name?: string }).name;
    if (kind === 'PasswordException') throw new DocumentError('DOCUMENT_ENCRYPTED', name, 'the PDF is encrypted (password-protected); remove the password and attach it again');
    throw new DocumentError('DOCUMENT_CORRUPT', name, `not a valid PDF (corrupt or truncated): ${firstLine(e)}`);
  }
}

/** See the file comment. */
export async function pdfText(name: string, bytes: Uint8Array, opts: PdfTextOptions = {}): Promise<PdfText> {
  const pdf = await openPdf(name, bytes);
  try {
    // 1. The text layer of every page, in reading order; and the text pages with images over no text.
    const pages: string[] = [];
    const mixed = new Map<number, Mixed>();
    for (let i = 1; i <= pdf.numPages; i++) {
      const page = await pdf.getPage(i);
      const items = await textItems(page);
      pages.push(layoutPageText(items));
      if (opts.ocr !== false && pages[i - 1].length > 0) {
        const regions = (await pageImages(page)).flatMap((im, k) => (holdsNoText(im.box, items) ? [k] : []));
        if (regions.length > 0) mixed.set(i, { items, regions });
      }
      // Frees the page's parsed resources: a 300-page file is read one page at a time.
      page.cleanup();
      opts.onProgress?.(i / pdf.numPages);
    }
    // 2. Pages without one, and the scanned regions of text pages: their images by OCR.
    const empty = pages.flatMap((p, i) => (p.length === 0 ? [i + 1] : []));
    const toRead = [...empty, ...mixed.keys()].sort((a, b) => a - b);
    const ocrPages = opts.ocr === false || toRead.length === 0 ? [] : await ocrPagesOf(name, pdf, toRead, mixed, pages, opts);
    // 3. The pages with text, each a part.
    const parts: DocumentPart[] = [];
    const texts: string[] = [];
    let at = 0;
    pages.forEach((page, i) => {
      if (page.length === 0) return;
      parts.push({ label: `page ${i + 1}`, start: at });
      texts.push(page);
      at += page.length + 2;
    });
    return { text: texts.join('\n\n'), parts, ocrPages, pagesWithoutText: empty.filter((n) => !ocrPages.includes(n)) };
  } catch (e) {
    if (e instanceof DocumentError) throw e;
    throw new DocumentError('DOCUMENT_CORRUPT', name, `the PDF could not be read (corrupt?): ${firstLine(e)}`);
  } finally {
    await pdf.loadingTask.destroy();
  }
}

/** A text page's items and the indexes (in `pageImages` order) of its images over no text. */
interface Mixed {
  items: PlacedText[];
  regions: number[];
}

/** Whether no text item's baseline origin lies inside `box`. */
function holdsNoText(box: PageBox, items: readonly PlacedText[]): boolean {
  return !items.some((t) => t.str.trim().length > 0 && t.x >= box.x0 && t.x <= box.x1 && t.y >= box.y0 && t.y <= box.y1);
}

/**
 * OCRs the images of the pages numbered `numbers` (those without text: all their images; those
 * in `mixed`: their images over no text, merged with the text layer), writing their text into
 * `pages`; → the numbers that got some text by OCR. The OCR worker starts at the first image.
 */
async function ocrPagesOf(name: string, pdf: PdfDocument, numbers: number[], mixed: Map<number, Mixed>, pages: string[], opts: PdfTextOptions): Promise<number[]> {
  let done = 0;
  let reader: OcrReader | null = null;
  // Said before the OCR worker starts (seconds), so the window can say "by OCR" at once.
  opts.onProgress?.(0, 'ocr');
  try {
    const read: number[] = [];
    for (const n of numbers) {
      const page = mixed.get(n);
      const images = (await pageImages(await pdf.getPage(n))).filter((_, k) => !page || page.regions.includes(k));
      const texts: { text: string; box: PageBox }[] = [];
      for (const image of images) {
        reader ??= await OcrReader.open({ name, signal: opts.signal, onProgress: (f) => opts.onProgress?.((done + f) / numbers.length, 'ocr') });
        texts.push({ text: await reader.read(image.bytes), box: image.box });
      }
      const found = texts.filter((t) => t.text.length > 0);
      if (page) pages[n - 1] = layoutPageText([...page.items, ...found.flatMap((t) => linesInBox(t.text, t.box))]);
      else pages[n - 1] = found.map((t) => t.text).join('\n\n');
      if (found.length > 0) read.push(n);
      opts.onProgress?.(++done / numbers.length, 'ocr');
    }
    return read;
  } finally {
    await reader?.close();
  }
}

/**
 * OCR'd text as text items inside the image's box, so the page's layout puts it in reading order
 * with the text layer: one item per line (blank lines kept as gaps), top to bottom at an even
 * pitch, each as wide as the box in proportion to its length, its size 0.7 of the pitch.
 */
function linesInBox(text: string, box: PageBox): PlacedText[] {
  const lines = text.split('\n');
  const pitch = (box.y1 - box.y0) / lines.length;
  const longest = Math.max(1, ...lines.map((l) => l.length));
  return lines.flatMap((str, i) => (str.trim().length === 0 ? [] : [{ str, x: box.x0, y: box.y1 - (i + 0.8) * pitch, width: ((box.x1 - box.x0) * str.length) / longest, size: 0.7 * pitch }]));
}

/** One page's text items, placed (none for a page without a text layer). */
async function textItems(page: PdfPage): Promise<PlacedText[]> {
  const content = await page.getTextContent();
  const items: PlacedText[] = [];
  for (const item of content.items) {
    if (!('str' in item)) continue;
    const [a, b, , , x, y] = item.transform as number[];
    // The font size is the length of the text matrix's x axis (pdf.js's own height is 0 for some fonts).
    items.push({ str: item.str, x, y, width: item.width, size: item.height > 0 ? item.height : Math.hypot(a, b) });
  }
  return items;
}
