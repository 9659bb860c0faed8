/**
 * The document extraction worker (worker_threads): receives `{ name, bytes, ocr }` once, posts
 * `{ type: 'progress', fraction, phase }` while it works and ends with `{ type: 'done', document }` or
 * `{ type: 'error', code, file, message }` (a DocumentError's fields). One file per worker.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { firstLine } from '../common/errors.ts';
import { DocumentError } from './errors.ts';
import { extractDocument } from './extract.ts';

const { name, bytes, ocr } = workerData as { name: string; bytes: Uint8Array; ocr: boolean };
extractDocument(name, bytes, { ocr, onProgress: (fraction, phase) => parentPort!.postMessage({ type: 'progress', fraction, phase }) }).then(
  (document) => parentPort!.postMessage({ type: 'done', document }),
  (e: unknown) => {
    const d = e instanceof DocumentError ? e : new DocumentError('DOCUMENT_CORRUPT', name, firstLine(e));
    parentPort!.postMessage({ type: 'error', code: d.code, file: d.file, message: d.message });
  },
);
