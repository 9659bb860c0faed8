/**
 * Extraction off the main thread: a file larger than `OFF_THREAD_BYTES` is extracted in its own
 * worker thread (extract-worker.ts), so the window and IPC stay responsive while pdf.js or mammoth
 * parse it, with progress per PDF page (then per page read by OCR); `signal` stops it; a small file is extracted inline (starting a worker costs
 * more than parsing it), except a PDF: a damaged one can leave a rejected promise inside pdf.js
 * that nothing handles (found by fuzzing: test/fixtures/documents/pdf-unhandled-rejection.pdf),
 * which ends a Node process, so every PDF is parsed in a worker whose death costs nothing.
 * Same result and same `DocumentError`s as `extractDocument`.
 */
import type { Worker } from 'node:worker_threads';
import { firstLine } from '../common/errors.ts';
import { workerThread } from '../common/worker-thread.ts';
import { DocumentError, type DocumentErrorCode } from './errors.ts';
import { documentKind, extractDocument, type ExtractedDocument, type ExtractOptions, MAX_DOCUMENT_BYTES } from './extract.ts';

/**
 * Files above this many bytes go to a worker (256 KiB: measured here, a 60-page text PDF of that
 * size takes pdf.js about a quarter of a second, which the window must not wait out frozen).
 */
export const OFF_THREAD_BYTES = 256 * 1024;

type WorkerReply =
  | { type: 'progress'; fraction: number; phase?: 'ocr' }
  | { type: 'done'; document: ExtractedDocument }
  | { type: 'error'; code: DocumentErrorCode; file: string; message: string };

/**
 * Extracts `bytes` as `extractDocument` does, in a worker when it is large or a PDF.
 * @param opts.offThreadBytes threshold override (tests run the worker path on small files).
 * @throws DocumentError as extractDocument; DOCUMENT_UNREADABLE when the worker itself dies.
 */
export async function extractDocumentOffThread(name: string, bytes: Uint8Array, opts: ExtractOptions & { offThreadBytes?: number } = {}): Promise<ExtractedDocument> {
  const small = bytes.length <= (opts.offThreadBytes ?? OFF_THREAD_BYTES) && documentKind(name) !== 'pdf';
  if (small || bytes.length > MAX_DOCUMENT_BYTES) return extractDocument(name, bytes, opts);
  if (opts.signal?.aborted) throw new DocumentError('DOCUMENT_CANCELLED', name, 'stopped before it was read');
  const worker = startWorker({ name, bytes, ocr: opts.ocr !== false });
  // Stop: the worker ends, and the OCR worker it started with it.
  const stop = () => void worker.terminate();
  opts.signal?.addEventListener('abort', stop, { once: true });
  try {
    return await new Promise<ExtractedDocument>((resolve, reject) => {
      worker.on('message', (m: WorkerReply) => {
        if (m.type === 'progress') opts.onProgress?.(m.fraction, m.phase);
        else if (m.type === 'done') resolve(m.document);
        else reject(new DocumentError(m.code, m.file, m.message.slice(m.file.length + 2)));
      });
      worker.on('error', (e) => reject(new DocumentError('DOCUMENT_UNREADABLE', name, `extraction failed: ${firstLine(e)}`)));
      worker.on('exit', (code) =>
        reject(opts.signal?.aborted ? new DocumentError('DOCUMENT_CANCELLED', name, 'stopped while it was being read') : new DocumentError('DOCUMENT_UNREADABLE', name, `extraction stopped (exit code ${code})`)),
      );
    });
  } finally {
    opts.signal?.removeEventListener('abort', stop);
    void worker.terminate();
  }
}

function startWorker(workerData: { name: string; bytes: Uint8Array; ocr: boolean }): Worker {
  return workerThread(new URL(`./extract-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url), { workerData });
}
