/**
 * Text extraction from an attached file's bytes, in the main process (never in the renderer).
 *
 * Contract: `extractDocument(name, bytes, opts)` → `ExtractedDocument` (the text, its parts — PDF
 * pages or Markdown sections with their character offsets —, the pages read by OCR and the pages
 * without any text, and the file's SHA-256), or a
 * `DocumentError` naming the file: DOCUMENT_TOO_LARGE (over `MAX_DOCUMENT_BYTES`, stated in the
 * message), DOCUMENT_UNSUPPORTED (not text and not a known format), DOCUMENT_ENCRYPTED (a
 * password-protected PDF or .docx), DOCUMENT_CORRUPT (a PDF or .docx that does not parse),
 * DOCUMENT_NO_TEXT (nothing but whitespace, even after OCR), DOCUMENT_CANCELLED (stopped during OCR).
 *
 * Formats: PDF through unpdf (Mozilla's pdf.js, serverless build), .docx through mammoth's HTML
 * and HTML through htmlparser2, both as Markdown-like text (html-text.ts: headings `#`, tables as
 * Markdown rows, lists `- `; script, style and template contents dropped; sections per heading),
 * PNG and JPEG, and PDF pages without a text layer, through tesseract.js OCR (ocr.ts, in its own
 * worker thread; `opts.ocr` false turns it off), and anything else that is valid UTF-8 without
 * NUL bytes as plain text (.txt, .md, source code).
 * Pure: no I/O but the parsers'; `extract-off-thread.ts` runs it in a worker for large files.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { MAX_DOCUMENT_BYTES } from '../contract/limits.ts';
import { firstLine } from '../common/errors.ts';
import { DocumentError } from './errors.ts';
import { htmlText } from './html-text.ts';
import { OcrReader } from './ocr.ts';
import type { DocumentPart, ExtractProgress } from './parts.ts';
import { pdfText } from './pdf-text.ts';

export { MAX_DOCUMENT_BYTES, htmlText };
export type { DocumentPart, ExtractProgress } from './parts.ts';

export type DocumentKind = 'text' | 'markdown' | 'code' | 'pdf' | 'docx' | 'html' | 'image';


export interface ExtractedDocument {
  name: string;
  kind: DocumentKind;
  /** Size of the file, bytes. */
  size: number;
  /** SHA-256 of the file's bytes, lowercase hex: the same file attached twice is stored once. */
  hash: string;
  text: string;
  /** In order of `start`; empty for plain text and code. */
  parts: DocumentPart[];
  /** 1-based pages (an image: page 1) whose text was read by OCR, ascending. */
  ocrPages: number[];
  /** 1-based PDF pages without any text (no text layer, OCR off or finding none): not in `text`. */
  pagesWithoutText: number[];
}


export interface ExtractOptions {
  onProgress?: ExtractProgress;
  /** Stops OCR (DocumentError DOCUMENT_CANCELLED). */
  signal?: AbortSignal;
  /** Read scanned pages and images by OCR (default true). */
  ocr?: boolean;
}

const CODE_EXTENSIONS = new Set(
  'ts tsx js jsx mjs cjs py rb go rs java kt swift c h cc cpp hpp cs php sh bash zsh ps1 sql css scss less json yaml yml toml ini cfg xml lua r m scala hs ex exs erl clj dart vue svelte'.split(' '),
);

/** Extensions of plain text files (kind 'text'): a non-UTF-8 one is an encoding problem, not an unsupported type. */
const PLAIN_TEXT_EXTENSIONS = new Set(['txt', 'text', 'log', 'csv', 'tsv', 'rst', 'tex']);

/** The kind of a file from its extension; null for an unknown one (read as text if it is UTF-8). */
export function documentKind(name: string): DocumentKind | null {
  const ext = path.extname(name).slice(1).toLowerCase();
  if (ext === 'pdf') return 'pdf';
  if (ext === 'docx') return 'docx';
  if (ext === 'html' || ext === 'htm' || ext === 'xhtml') return 'html';
  if (ext === 'md' || ext === 'markdown') return 'markdown';
  if (ext === 'png' || ext === 'jpg' || ext === 'jpeg') return 'image';
  if (CODE_EXTENSIONS.has(ext)) return 'code';
  return null;
}

/**
 * Extracts the text of a file.
 * @param name the file's name as the user sees it (its extension picks the format).
 * @param bytes the whole file.
 * @throws DocumentError (see the file comment); never a parser's own error.
 */
export async function extractDocument(name: string, bytes: Uint8Array, opts: ExtractOptions = {}): Promise<ExtractedDocument> {
  if (bytes.length > MAX_DOCUMENT_BYTES) {
    throw new DocumentError('DOCUMENT_TOO_LARGE', name, `the file is ${mib(bytes.length)}, over the ${mib(MAX_DOCUMENT_BYTES)} limit for attachments`);
  }
  const hash = createHash('sha256').update(bytes).digest('hex');
  const kind = documentKind(name) ?? 'text';
  let text: string;
  let parts: DocumentPart[] = [];
  let ocrPages: number[] = [];
  let pagesWithoutText: number[] = [];
  if (kind === 'pdf') ({ text, parts, ocrPages, pagesWithoutText } = await pdfText(name, bytes, opts));
  else if (kind === 'image') ({ text, ocrPages } = await imageText(name, bytes, opts));
  else if (kind === 'docx') text = await docxText(name, bytes);
  else if (kind === 'html') text = htmlText(utf8(name, bytes, 'HTML'));
  else text = utf8(name, bytes, null);
  // .docx and HTML come out as Markdown (headings, tables): their sections are its headings.
  if (kind === 'markdown' || kind === 'docx' || kind === 'html') parts = markdownSections(text);
  if (text.trim().length === 0) throw new DocumentError('DOCUMENT_NO_TEXT', name, noTextReason(kind, opts.ocr !== false));
  opts.onProgress?.(1);
  return { name, kind, size: bytes.length, hash, text, parts, ocrPages, pagesWithoutText };
}

function noTextReason(kind: DocumentKind, ocr: boolean): string {
  if (kind === 'pdf') return ocr ? 'no text found: no text layer, and OCR found no text in its images' : 'no text found: a scanned PDF? (it has no text layer, and OCR is off)';
  if (kind === 'image') return ocr ? 'no text found: OCR read no text in the image' : 'no text found: an image is read only by OCR, which is off';
  return 'no text found: the file is empty';
}

/** A PNG or JPEG read by OCR: its text, page 1 in `ocrPages` when some was found. */
async function imageText(name: string, bytes: Uint8Array, opts: ExtractOptions): Promise<{ text: string; ocrPages: number[] }> {
  if (opts.ocr === false) return { text: '', ocrPages: [] };
  opts.onProgress?.(0, 'ocr');
  const reader = await OcrReader.open({ name, signal: opts.signal, onProgress: (f) => opts.onProgress?.(f, 'ocr') });
  try {
    const text = await reader.read(bytes);
    return { text, ocrPages: text ? [1] : [] };
  } finally {
    await reader.close();
  }
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(bytes % (1024 * 1024) === 0 ? 0 : 1)} MiB`;
}

/** Strict UTF-8 (a BOM dropped); NUL bytes mean a binary file. */
function utf8(name: string, bytes: Uint8Array, format: string | null): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    text = '\u0000';
  }
  if (text.includes('\u0000')) {
    const ext = path.extname(name) || '(no extension)';
    // A name that promises text (.txt, .md, code…) holds a binary file or another encoding.
    const promisesText = format !== null || documentKind(name) !== null || PLAIN_TEXT_EXTENSIONS.has(ext.slice(1).toLowerCase());
    throw new DocumentError(
      'DOCUMENT_UNSUPPORTED',
      name,
      promisesText
        ? `not a readable ${format ?? ext} file: not UTF-8 text (a binary file, or text in another encoding such as Latin-1); save it as UTF-8`
        : `unsupported type ${ext}: attach text, Markdown, source code, PDF, .docx or HTML`,
    );
  }
  return text.replace(/\r\n?/g, '\n');
}

async function docxText(name: string, bytes: Uint8Array): Promise<string> {
  // An OLE compound file (D0 CF 11 E0): what Word writes for a password-protected .docx.
  if (bytes[0] === 0xd0 && bytes[1] === 0xcf && bytes[2] === 0x11 && bytes[3] === 0xe0) {
    throw new DocumentError('DOCUMENT_ENCRYPTED', name, 'the .docx is encrypted (password-protected) or in the old .doc format; save it as a plain .docx or PDF');
  }
  const mammoth = (await import('mammoth')).default;
  try {
    // HTML, not raw text: raw text puts every table cell in its own paragraph.
    const r = await mammoth.convertToHtml({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) });
    return htmlText(r.value);
  } catch (e) {
    throw new DocumentError('DOCUMENT_CORRUPT', name, `not a valid .docx (corrupt or truncated): ${firstLine(e)}`);
  }
}

/** Markdown sections: one part per ATX heading (`# …` to `###### …`) outside fenced code. */
export function markdownSections(text: string): DocumentPart[] {
  const parts: DocumentPart[] = [];
  let at = 0;
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (m) parts.push({ label: `§ ${m[1]}`, start: at });
    at += line.length + 1;
  }
  return parts;
}

