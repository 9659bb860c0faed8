/**
 * The text of a PDF, page by page, through unpdf (Mozilla's pdf.js, serverless build), each page
 * in reading order by layout (pdf-layout.ts), not in the order its content stream draws it.
 *
 * Contract: `pdfText(name, bytes, onProgress)` → `{ text, parts, pagesWithoutText }`: the pages
 * with text joined by a blank line, one part per such page (`page N` at its offset), and the
 * 1-based numbers of the pages that have no text layer (scans, images), which are not in `text`.
 * @throws DocumentError DOCUMENT_ENCRYPTED (a password), DOCUMENT_CORRUPT (does not parse).
 */
import { firstLine } from '../services/errors.ts';
import { DocumentError } from './errors.ts';
import type { DocumentPart, ExtractProgress } from './extract.ts';
import { layoutPageText, type PlacedText } from './pdf-layout.ts';

type PdfDocument = Awaited<ReturnType<typeof import('unpdf').getDocumentProxy>>;
type PdfPage = Awaited<ReturnType<PdfDocument['getPage']>>;

export interface PdfText {
  text: string;
  parts: DocumentPart[];
  /** 1-based numbers of pages without a text layer, ascending. */
  pagesWithoutText: number[];
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
export async function pdfText(name: string, bytes: Uint8Array, onProgress?: ExtractProgress): Promise<PdfText> {
  const pdf = await openPdf(name, bytes);
  try {
    const pages: string[] = [];
    const parts: DocumentPart[] = [];
    const pagesWithoutText: number[] = [];
    let at = 0;
    for (let i = 1; i <= pdf.numPages; i++) {
      const page = await pageText(await pdf.getPage(i));
      if (page.length > 0) {
        parts.push({ label: `page ${i}`, start: at });
        pages.push(page);
        at += page.length + 2;
      } else pagesWithoutText.push(i);
      onProgress?.(i / pdf.numPages);
    }
    return { text: pages.join('\n\n'), parts, pagesWithoutText };
  } catch (e) {
    throw new DocumentError('DOCUMENT_CORRUPT', name, `the PDF could not be read (corrupt?): ${firstLine(e)}`);
  } finally {
    await pdf.loadingTask.destroy();
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
  return layoutPageText(items);
}
