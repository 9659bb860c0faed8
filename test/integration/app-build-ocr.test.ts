/**
 * OCR in the packaged app's layout, checked without Electron (issue 20, item 4): app/build.ts
 * builds the bundles into `resources/app.asar/dist/app/` of a layout made here; what
 * electron-builder.yml's `asarUnpack` globs select is put in `resources/app.asar.unpacked/`
 * (the unpacked packages linked from node_modules, ocr-worker.cjs copied), as electron-builder
 * does. Then ocr.ts `ocrPaths`, from the bundle's own URL, must name files in app.asar.unpacked
 * that exist there, the bundle must find ocr-worker.cjs beside itself, and tesseract.js started
 * with those paths must read a rendered image: the worker script and the language data come
 * from the unpacked folder, where a worker thread's plain fs can read them.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { buildApp } from '../../app/build.ts';
import { ocrPaths } from '../../main/documents/ocr.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';
import { renderTextImages } from '../helpers/rendered-text.ts';

const ROOT = path.join(PROJECT_ROOT, 'test', 'artifacts', `app-build-ocr-${process.pid}`, 'resources');
const ASAR = path.join(ROOT, 'app.asar');
const UNPACKED = path.join(ROOT, 'app.asar.unpacked');
const OCR_PACKAGES = ['tesseract.js', 'tesseract.js-core', '@tesseract.js-data/eng'];

/** electron-builder.yml's asarUnpack globs (the quoted list items under `asarUnpack:`). */
function asarUnpackGlobs(): string[] {
  const yml = readFileSync(path.join(PROJECT_ROOT, 'electron-builder.yml'), 'utf8');
  const block = yml.slice(yml.indexOf('\nasarUnpack:') + 1).split('\n').slice(1);
  const globs: string[] = [];
  for (const line of block) {
    if (/^\s*#/.test(line)) continue;
    const m = /^\s+-\s+"([^"]+)"/.exec(line);
    if (!m) break;
    globs.push(m[1]);
  }
  return globs;
}

/** A glob of `**` (any folders), `*` (within a name) and literal text as a RegExp over a relative path. */
function globRegExp(glob: string): RegExp {
  const body = glob
    .split(/(\*\*\/|\*\*|\*)/)
    .map((part) => (part === '**/' ? '(?:.*/)?' : part === '**' ? '.*' : part === '*' ? '[^/]*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${body}$`);
}

/** Whether electron-builder would unpack the file at `relative` (a path inside the app). */
function unpacks(relative: string): boolean {
  return asarUnpackGlobs().some((g) => globRegExp(g).test(relative));
}

before(async () => {
  // The app as packaged: package.json and the bundles; its node_modules hold the OCR packages.
  await buildApp(path.join(ASAR, 'dist', 'app'));
  writeFileSync(path.join(ASAR, 'package.json'), JSON.stringify({ type: 'module', main: 'dist/app/main.js' }));
  for (const pkg of OCR_PACKAGES) {
    const from = path.join(PROJECT_ROOT, 'node_modules', pkg);
    // Inside the asar, only what module resolution reads (a package's package.json and tesseract.js's sources).
    mkdirSync(path.join(ASAR, 'node_modules', pkg), { recursive: true });
    cpSync(path.join(from, 'package.json'), path.join(ASAR, 'node_modules', pkg, 'package.json'));
    if (pkg === 'tesseract.js') cpSync(path.join(from, 'src'), path.join(ASAR, 'node_modules', pkg, 'src'), { recursive: true });
    // Unpacked, whole, where asarUnpack says so (linked: the core and the data are 58 MB).
    if (unpacks(`node_modules/${pkg}/package.json`)) {
      mkdirSync(path.dirname(path.join(UNPACKED, 'node_modules', pkg)), { recursive: true });
      symlinkSync(path.resolve(from), path.join(UNPACKED, 'node_modules', pkg), 'dir');
    }
  }
  if (unpacks('dist/app/ocr-worker.cjs')) {
    mkdirSync(path.join(UNPACKED, 'dist', 'app'), { recursive: true });
    cpSync(path.join(ASAR, 'dist', 'app', 'ocr-worker.cjs'), path.join(UNPACKED, 'dist', 'app', 'ocr-worker.cjs'));
  }
});
after(() => rmSync(path.dirname(ROOT), { recursive: true, force: true }));

describe('OCR in the packaged layout', () => {
  it('asarUnpack holds the OCR worker script, tesseract.js, its WebAssembly core and the English data', () => {
    for (const file of ['dist/app/ocr-worker.cjs', 'node_modules/tesseract.js/src/worker-script/node/index.js', 'node_modules/tesseract.js-core/tesseract-core-simd-lstm.wasm', 'node_modules/@tesseract.js-data/eng/4.0.0_best_int/eng.traineddata.gz']) {
      assert.ok(unpacks(file), `${file} is not unpacked by electron-builder.yml's asarUnpack (${asarUnpackGlobs().join(', ')})`);
    }
  });

  it('the bundles find ocr-worker.cjs beside themselves, and ocrPaths names files that exist in app.asar.unpacked', () => {
    const bundle = path.join(ASAR, 'dist', 'app', 'extract-worker.js');
    const code = readFileSync(bundle, 'utf8');
    assert.match(code, /function ocrPaths\(base = import\.meta\.url\)/);
    assert.match(code, /new URL\("\.\/ocr-worker\.cjs", base\)/);
    const paths = ocrPaths(pathToFileURL(bundle));
    for (const [what, p] of Object.entries(paths)) {
      assert.ok(p.startsWith(UNPACKED + path.sep), `${what}: ${p} is not in app.asar.unpacked`);
      assert.ok(existsSync(p), `${what}: ${p} does not exist`);
    }
    assert.ok(existsSync(path.join(paths.englishData, 'eng.traineddata.gz')));
    assert.equal(readFileSync(paths.workerPath, 'utf8'), readFileSync(path.join(PROJECT_ROOT, 'main/documents/ocr-worker.cjs'), 'utf8'));
  });

  it('tesseract.js started with those paths reads a rendered image from the unpacked folder', async () => {
    const paths = ocrPaths(pathToFileURL(path.join(ASAR, 'dist', 'app', 'extract-worker.js')));
    const [shot] = await renderTextImages([['The ferry leaves the harbor at noon.']], 'png', { width: 816, height: 200 });
    const { createWorker, OEM } = await import('tesseract.js');
    const worker = await createWorker('eng', OEM.LSTM_ONLY, { workerPath: paths.workerPath, langPath: paths.englishData, gzip: true, cacheMethod: 'none' });
    try {
      const { data } = await worker.recognize(shot.bytes);
      assert.match(data.text, /ferry leaves the harbor at noon/i);
    } finally {
      await worker.terminate();
    }
  });
});
