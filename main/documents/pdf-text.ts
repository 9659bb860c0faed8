/**
 * The text of a PDF, page by page, through unpdf (Mozilla's pdf.js, serverless build), each page
 * in reading order by layout (pdf-layout.ts), not in the order its content stream draws it.
 *
 * Contract: `pdfText(name, bytes, opts)` → `{ text, parts, ocrPages, pagesWithoutText }`: the
 * pages with text joined by a blank line, one part per such page (`page N` at its offset). A page
 * without a text layer (a scan) is read by OCR from its images (pdf-images.ts, ocr.ts) unless
 * `opts.ocr` is false; its number is in `ocrPages` when that found text, else in
 * `pagesWithoutText` (and the page is not in `text`): never dropped without saying so.
 * @throws DocumentError DOCUMENT_ENCRYPTED (a password), DOCUMENT_CORRUPT (does not parse),
 *   DOCUMENT_CANCELLED (opts.signal, during OCR).
 */
import { firstLine } from '../common/errors.ts';
import { DocumentError } from './errors.ts';
import type { DocumentPart, ExtractProgress } from './parts.ts';
import { OcrReader } from './ocr.ts';
import { pageImages } from './pdf-images.ts';
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
    // 1. The text layer of every page, in reading order.
    const pages: string[] = [];
    for (let i = 1; i <= pdf.numPages; i++) {
      pages.push(await pageText(await pdf.getPage(i)));
      opts.onProgress?.(i / pdf.numPages);
    }
    // 2. Pages without one: their images by OCR.
    const empty = pages.flatMap((p, i) => (p.length === 0 ? [i + 1] : []));
    const ocrPages = opts.ocr === false || empty.length === 0 ? [] : await ocrPagesOf(name, pdf, empty, pages, opts);
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

/**
 * OCRs the images of the pages numbered `numbers`, writing their text into `pages`; → the numbers
 * that got some. The OCR worker starts at the first page that has an image.
 */
async function ocrPagesOf(name: string, pdf: PdfDocument, numbers: number[], pages: string[], opts: PdfTextOptions): Promise<number[]> {
  let done = 0;
  let reader: OcrReader | null = null;
  // Said before the OCR worker starts (seconds), so the window can say "by OCR" at once.
  opts.onProgress?.(0, 'ocr');
  try {
    const read: number[] = [];
    for (const n of numbers) {
      const texts: string[] = [];
      for (const image of await pageImages(await pdf.getPage(n))) {
        reader ??= await OcrReader.open({ name, signal: opts.signal, onProgress: (f) => opts.onProgress?.((done + f) / numbers.length, 'ocr') });
        texts.push(await reader.read(image));
      }
      pages[n - 1] = texts.filter((t) => t.length > 0).join('\n\n');
      if (pages[n - 1].length > 0) read.push(n);
      opts.onProgress?.(++done / numbers.length, 'ocr');
    }
    return read;
  } finally {
    await reader?.close();
  }
}

/** One page's text layer in reading order ('' when it has none). */
async function pageText(page: PdfPage): Promise<string> {
  const content = await page.getTextContent();
  const items: PlacedText[] = [];
  for (const item of content.items) {
    if (!('str' in item)) continue;
    const [a, b, , , x, y] = item.transform as number[];
    // The font size is the length of the text matrix's x axis (pdf.js's own height is 0 for some fonts).
    items.push({ str: item.str, x, y, width: item.width, size: item.height > 0 ? item.height : Math.hypot(a, b) });
  }
  // Frees the page's parsed resources: a 300-page file is read one page at a time.
  page.cleanup();
  return layoutPageText(items);
}
