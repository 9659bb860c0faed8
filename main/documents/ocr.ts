/**
 * Offline OCR of images (scanned PDF pages, PNG and JPEG attachments) with tesseract.js, which
 * runs Tesseract's WebAssembly build in its own worker thread: never on the caller's thread.
 *
 * Contract: `OcrReader.open(opts)` starts one tesseract worker with the language data from npm
 * (`@tesseract.js-data/eng`, LSTM "best_int", gzip as shipped, read from disk: no cache written,
 * nothing fetched); `reader.read(image)` → the recognised text of one image (PNG, JPEG, BMP or
 * PNM bytes), whitespace tidied; `close()` ends the worker. `opts.signal` stops it: the worker is
 * terminated and `read` rejects with DocumentError DOCUMENT_CANCELLED.
 *
 * Languages: `ROPEWALK_OCR_LANGS` (default `eng`, several as `eng+deu`) read from
 * `ROPEWALK_OCR_DATA` (a folder holding `<lang>.traineddata.gz`, e.g. copied from
 * `@tesseract.js-data/deu/4.0.0_best_int`), else from the installed English package.
 *
 * The worker thread runs ocr-worker.cjs (tesseract's worker script with the console silenced, so
 * Tesseract's own messages never reach stderr: our error says what failed). `ocrPaths(base)`
 * gives the files the worker reads from disk: that script (beside the sources, or beside the
 * bundles in dist/app/), tesseract.js's own worker script, and the English data; in a packaged
 * app each path inside `app.asar` is taken from `app.asar.unpacked` (`unpackedPath`), where
 * electron-builder.yml unpacks them, since a worker thread reads with plain fs, outside
 * Electron's asar support.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstLine } from '../common/errors.ts';
import { DocumentError } from './errors.ts';

type TesseractWorker = Awaited<ReturnType<typeof import('tesseract.js').createWorker>>;

export interface OcrOptions {
  /** The file the images come from (named in errors). */
  name: string;
  signal?: AbortSignal;
  /** Fraction (0…1) of the current image recognised. */
  onProgress?: (fraction: number) => void;
}

/** A path inside an Electron `app.asar` as the same path in `app.asar.unpacked` (others as they are). */
export function unpackedPath(p: string): string {
  return p.replace(/([\\/])app\.asar([\\/])/, '$1app.asar.unpacked$2');
}

/** The files the OCR worker reads from disk (see the file comment). */
export interface OcrPaths {
  /** ocr-worker.cjs, the script the worker thread runs. */
  workerPath: string;
  /** tesseract.js's worker script, which it requires. */
  tesseractWorker: string;
  /** The folder holding eng.traineddata.gz. */
  englishData: string;
}

/**
 * Where the OCR files are for code at `base` (this module's URL, or a bundle's: dist/app/ holds
 * ocr-worker.cjs beside main.js and extract-worker.js), mapped out of app.asar.
 */
export function ocrPaths(base: string | URL = import.meta.url): OcrPaths {
  const require = createRequire(base);
  return {
    workerPath: unpackedPath(fileURLToPath(new URL('./ocr-worker.cjs', base))),
    tesseractWorker: unpackedPath(require.resolve('tesseract.js/src/worker-script/node/index.js')),
    englishData: unpackedPath(path.join(path.dirname(require.resolve('@tesseract.js-data/eng/package.json')), '4.0.0_best_int')),
  };
}

export class OcrReader {
  private constructor(
    private readonly worker: TesseractWorker,
    private readonly opts: OcrOptions,
    private readonly progress: { current: ((f: number) => void) | null },
  ) {}

  /**
   * Starts the OCR worker (about 4 s here: the WebAssembly core and 10 MB of language data).
   * @throws DocumentError DOCUMENT_CANCELLED (signal), DOCUMENT_UNREADABLE (no language data).
   */
  static async open(opts: OcrOptions): Promise<OcrReader> {
    cancelledCheck(opts);
    const { createWorker, OEM } = await import('tesseract.js');
    const progress: { current: ((f: number) => void) | null } = { current: null };
    const langs = process.env.ROPEWALK_OCR_LANGS || 'eng';
    const paths = ocrPaths();
    const langPath = process.env.ROPEWALK_OCR_DATA || paths.englishData;
    let worker: TesseractWorker;
    try {
      worker = await createWorker(langs, OEM.LSTM_ONLY, {
        workerPath: paths.workerPath,
        langPath,
        gzip: true,
        cacheMethod: 'none',
        logger: (m: { status: string; progress: number }) => {
          if (m.status === 'recognizing text') progress.current?.(m.progress);
        },
        errorHandler: () => {},
      });
    } catch (e) {
      throw new DocumentError('DOCUMENT_UNREADABLE', opts.name, `OCR could not start (language data ${langs} in ${langPath}): ${firstLine(e)}`);
    }
    const reader = new OcrReader(worker, opts, progress);
    opts.signal?.addEventListener('abort', () => void reader.close(), { once: true });
    if (opts.signal?.aborted) await reader.close();
    cancelledCheck(opts);
    return reader;
  }

  /**
   * The text of one image ('' when none is found).
   * @throws DocumentError DOCUMENT_CANCELLED when stopped, DOCUMENT_CORRUPT for an image Tesseract cannot decode.
   */
  async read(image: Uint8Array): Promise<string> {
    cancelledCheck(this.opts);
    this.progress.current = (f) => this.opts.onProgress?.(f);
    const stop = abortion(this.opts.signal);
    try {
      const result = await Promise.race([this.worker.recognize(Buffer.from(image.buffer, image.byteOffset, image.byteLength)), stop.promise]);
      return tidy(result.data.text);
    } catch (e) {
      cancelledCheck(this.opts);
      throw new DocumentError('DOCUMENT_CORRUPT', this.opts.name, `the image could not be read by OCR: ${firstLine(e)}`);
    } finally {
      stop.dispose();
      this.progress.current = null;
    }
  }

  /** Ends the worker (idempotent). */
  async close(): Promise<void> {
    await this.worker.terminate().catch(() => {});
  }
}

/** Lines trimmed, runs of blank lines made one. */
function tidy(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function cancelledCheck(opts: OcrOptions): void {
  if (opts.signal?.aborted) throw new DocumentError('DOCUMENT_CANCELLED', opts.name, 'stopped while reading text by OCR');
}

/** A promise that rejects when `signal` aborts (never, without one), and the listener's removal. */
function abortion(signal: AbortSignal | undefined): { promise: Promise<never>; dispose(): void } {
  let onAbort = () => {};
  const promise = new Promise<never>((_, reject) => {
    onAbort = () => reject(new Error('aborted'));
  });
  signal?.addEventListener('abort', onAbort, { once: true });
  return { promise, dispose: () => signal?.removeEventListener('abort', onAbort) };
}
