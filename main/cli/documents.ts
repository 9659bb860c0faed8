/**
 * `npm run chat -- --attach FILE … "question"`: the terminal chat's documents. The same
 * extraction, delimiters and fitting as the app (main/documents/), without the store.
 *
 * `readAttachments(paths)` reads and extracts each file (a DocumentError naming the file for an
 * unreadable, unsupported, encrypted, corrupt, empty or oversized one; scanned pages and images
 * are read by OCR, and `pageNotes` words what OCR read and which pages have no text). `documentPrompt` puts
 * them in the user turn before the question and fits them into `room` (max context − max
 * tokens): whole, or with `--fit relevant` the best chunks when whole does not fit; without it a
 * prompt that does not fit is a `UsageError` (exit 2) with both numbers. Each document's
 * tokens are as counted in the prompt: the prompt's count with it minus the count without it.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { CLI_CONTEXT_REMEDIES, raiseUpToTrained } from '../contract/context-full.ts';
import { noTextWarning, ocrNote } from '../contract/document-pages.ts';
import type { ChatMessage } from '../engine/generate/types.ts';
import { ChunkCache, fitDocuments, type AttachedText, type TokenCounter } from '../documents/assemble.ts';
import type { Passage } from '../documents/citations.ts';
import { DocumentError } from '../documents/errors.ts';
import { extractDocumentOffThread } from '../documents/extract-off-thread.ts';
import type { ExtractedDocument } from '../documents/extract.ts';
import { documentBlock, userTurnText } from '../documents/prompt.ts';
import { UsageError } from './options.ts';


/** The stderr notes of a document's pages (OCR, pages without text), in the window's words. */
export function pageNotes(d: ExtractedDocument): string[] {
  return [ocrNote(d), noTextWarning(d)].flatMap((n) => (n ? [`${d.name}: ${n}`] : []));
}

/** The `--json` fields of a document's pages: present only when not empty. */
function pageFields(d: ExtractedDocument): { ocrPages?: number[]; pagesWithoutText?: number[] } {
  return { ...(d.ocrPages.length ? { ocrPages: d.ocrPages } : {}), ...(d.pagesWithoutText.length ? { pagesWithoutText: d.pagesWithoutText } : {}) };
}

/**
 * Extracts every file, in order (`signal`: Ctrl-C stops OCR; `onProgress`: per file, as extraction reports it).
 * @throws DocumentError naming the first file that fails.
 */
export async function readAttachments(paths: readonly string[], signal?: AbortSignal, onProgress?: (name: string, fraction: number, phase?: 'ocr') => void): Promise<ExtractedDocument[]> {
  const out: ExtractedDocument[] = [];
  for (const p of paths) {
    const name = path.basename(p);
    let bytes: Buffer;
    try {
      bytes = await readFile(p);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new DocumentError('DOCUMENT_UNREADABLE', p, code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a folder, not a file' : `cannot be read (${code ?? String(e)})`);
    }
    try {
      out.push(await extractDocumentOffThread(name, bytes, { signal, onProgress: (f, phase) => onProgress?.(name, f, phase) }));
    } catch (e) {
      // Name the file as the user wrote it.
      if (e instanceof DocumentError && p !== name) throw new DocumentError(e.code, p, e.message.slice(name.length + 2));
      throw e;
    }
  }
  return out;
}

export interface DocumentPrompt {
  messages: ChatMessage[];
  /** Per document: tokens as counted in the prompt, and (when any) the pages read by OCR or without text. */
  documents: { name: string; tokens: number; ocrPages?: number[]; pagesWithoutText?: number[] }[];
  /** Parts used when cut to the relevant chunks, else null. */
  documentParts: string[] | null;
  /** Every labelled passage in the prompt (document, label, page or section, character range), in prompt order. */
  passages: Passage[];
}

/**
 * The prompt with `docs` in the user turn, fitted to `room` tokens.
 * @throws UsageError (without `relevant`, or when even the relevant parts cannot fit).
 */
export async function documentPrompt(
  counter: TokenCounter,
  system: ChatMessage[],
  question: string,
  docs: readonly ExtractedDocument[],
  opts: { relevant: boolean; room: number; maxContext: number; trainedContext: number | null; reserve: number },
): Promise<DocumentPrompt> {
  const attachments: AttachedText[] = docs.map((d) => ({ key: d.hash, name: d.name, text: d.text, parts: d.parts, fit: opts.relevant ? 'relevant' : 'whole' }));
  const render = (body: (a: AttachedText) => string, only = attachments): ChatMessage[] => [
    ...system,
    { role: 'user', content: userTurnText(question, only.map((a) => documentBlock(a.name, body(a)))) },
  ];
  const fitted = await fitDocuments({ counter, render: (body) => render(body), attachments, question, room: opts.room, cache: new ChunkCache() });
  // Whole documents of megabytes that surely do not fit are measured, not counted (fitDocuments).
  const total = fitted.measured ? (await counter.countTokens({ messages: fitted.measured.messages })) + fitted.measured.tokens : await counter.countTokens({ messages: fitted.messages });
  if (total > opts.room) {
    const raise = raiseUpToTrained(opts.maxContext, opts.trainedContext, CLI_CONTEXT_REMEDIES);
    const hint = opts.relevant ? 'even the relevant parts do not fit beside the question' : raise ? `use --fit relevant, ${raise} or lower --max-tokens` : 'use --fit relevant or lower --max-tokens';
    throw new UsageError(
      `the documents do not fit: the prompt needs ${fitted.measured ? 'about ' : ''}${total} tokens plus ${opts.reserve} reserved for the answer (--max-tokens), ${total + opts.reserve} > max context ${opts.maxContext}; ${hint}`,
    );
  }
  // Tokens per document as counted in the prompt: the count with the first k minus the first k − 1.
  const counts = [await counter.countTokens({ messages: render(() => '', []) })];
  for (let k = 1; k <= attachments.length; k++) {
    counts.push(await counter.countTokens({ messages: render((a) => fitted.bodies[attachments.indexOf(a)], attachments.slice(0, k)) }));
  }
  return {
    messages: fitted.messages,
    documents: attachments.map((a, i) => ({ name: a.name, tokens: counts[i + 1] - counts[i], ...pageFields(docs[i]) })),
    documentParts: fitted.documentParts,
    passages: fitted.passages.flat(),
  };
}
