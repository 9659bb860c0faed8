/**
 * The document extraction worker (worker_threads): receives `{ name, bytes, ocr }` once, posts
 * `{ type: 'progress', fraction, phase }` while it works and ends with `{ type: 'done', document }` or
 * `{ type: 'error', code, file, message }` (a DocumentError's fields). One file per worker.
 *
 * A damaged PDF can make pdf.js reject a promise of its own that nothing awaits, beside the one the
 * extraction awaits (test/fixtures/documents/pdf-unhandled-rejection.pdf). In a worker that would
 * end the thread, racing the extraction's own DocumentError, so the caller got a raw "extraction
 * failed" or the file's real reason depending on timing. Such a rejection is held instead: the
 * extraction's own result is posted, or, when none comes within STRAY_REJECTION_MS, the stray
 * reason as the file's error.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { firstLine } from '../common/errors.ts';
import { DocumentError } from './errors.ts';
import { extractDocument } from './extract.ts';

/** How long a stray rejection waits for the extraction's own result before it is the error, ms. */
const STRAY_REJECTION_MS = 1000;

const { name, bytes, ocr } = workerData as { name: string; bytes: Uint8Array; ocr: boolean };
let settled = false;

function postError(e: unknown): void {
  if (settled) return;
  settled = true;
  const d = e instanceof DocumentError ? e : new DocumentError('DOCUMENT_CORRUPT', name, firstLine(e));
  parentPort!.postMessage({ type: 'error', code: d.code, file: d.file, message: d.message });
}

process.on('unhandledRejection', (reason) => {
  setTimeout(() => postError(reason), STRAY_REJECTION_MS);
});

extractDocument(name, bytes, { ocr, onProgress: (fraction, phase) => parentPort!.postMessage({ type: 'progress', fraction, phase }) }).then(
  (document) => {
    settled = true;
    parentPort!.postMessage({ type: 'done', document });
  },
  postError,
);
