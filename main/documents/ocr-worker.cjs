/**
 * The OCR worker thread: tesseract.js's own worker script (tesseract.js/src/worker-script/node),
 * with the thread's console silenced first. Tesseract's WebAssembly core binds `console.error`
 * when it starts and writes its libraries' messages there (a corrupt PNG: `libpng error: Read
 * Error`), and a worker thread's console is the process's stderr, so the CLI printed them above
 * its own one line. Every failure still reaches the caller as the job's rejection (ocr.ts words
 * it). `ROPEWALK_OCR_DEBUG=1` keeps the console, to see what Tesseract says.
 *
 * Plain CommonJS, not TypeScript: tesseract.js starts it with `new Worker(workerPath)`, without
 * the tsx loader. app/build.ts copies it beside the bundles (dist/app/ocr-worker.cjs), and the
 * packaged app runs it from app.asar.unpacked (electron-builder.yml asarUnpack).
 */
'use strict';

if (!process.env.ROPEWALK_OCR_DEBUG) {
  const quiet = () => {};
  console.error = quiet;
  console.warn = quiet;
  console.log = quiet;
}
require('tesseract.js/src/worker-script/node/index.js');
