/**
 * Builds the Electron app into dist/ (run: `tsx app/build.ts`, or `npm run build:app`).
 *
 * Contract — what it emits, and why each file is shaped so:
 * - dist/app/main.js: the main process, ESM (package.json has "type": "module"; Electron ≥ 28
 *   loads ESM main entries). ESM keeps `import.meta.url` meaningful, which the engine host uses
 *   to find the worker beside the bundle.
 * - dist/app/worker.js: the engine worker (main/engine-host/worker.ts), ESM, beside main.js:
 *   host.ts starts `new URL('./worker.js', import.meta.url)` and, bundled, import.meta.url is
 *   dist/app/main.js.
 * - dist/app/extract-worker.js: the document extraction worker (main/documents/extract-worker.ts),
 *   beside main.js for the same reason.
 * - dist/app/template-worker.js: the chat-template sandbox (main/engine/tokenizer/template-worker.ts),
 *   beside main.js and worker.js, both of which start it.
 * - dist/app/package.json: `{"type":"module"}`. The engine worker and the template worker are
 *   entry points of another process or thread, started from app.asar.unpacked (electron-builder.yml
 *   asarUnpack), where the project's package.json (inside the asar) is not seen; this one tells
 *   Node there that the bundles are ESM (Node 20.19+ and 22 would also detect it from the syntax,
 *   parsing twice; this does not rely on that).
 * - dist/app/ocr-worker.cjs: the OCR worker thread's script (main/documents/ocr-worker.cjs,
 *   copied: plain CommonJS that requires tesseract.js's worker script), beside the bundles that
 *   start OCR (main.js, extract-worker.js); unpacked from the asar (electron-builder.yml).
 * - dist/app/preload.cjs: the sandboxed preload, CommonJS, whose only require is `electron`
 *   (checked after the build: a sandboxed preload can require nothing else, and zod must not be
 *   in it).
 * - Native and Electron packages stay external (resolved from node_modules at run time):
 *   electron, onnxruntime-node, better-sqlite3, ws, and tesseract.js (it starts its worker from a
 *   file beside its own sources and loads its WebAssembly core and language data from
 *   node_modules). Everything else is bundled.
 * - Then, if renderer/build.ts exists, it is run too (it writes dist/renderer/).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

/** Packages loaded from node_modules at run time, never bundled. */
export const EXTERNAL_PACKAGES = ['electron', 'onnxruntime-node', 'better-sqlite3', 'ws', 'tesseract.js'] as const;

/** The project root (this file is app/build.ts). */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// Bundled CommonJS dependencies call `require` for Node built-ins; an ESM bundle has none, so
// give it one bound to the bundle's own URL.
const ESM_REQUIRE_BANNER = [
  "import { createRequire as __ropewalkCreateRequire } from 'node:module';",
  'const require = __ropewalkCreateRequire(import.meta.url);',
].join('\n');

const NODE_TARGET = 'node20'; // Electron 45 ships Node 22; the worker smoke test runs on Node 20.

/** esbuild options of the three bundles, writing into `outDir`. */
export function bundleOptions(outDir: string, root = PROJECT_ROOT): Record<'main' | 'worker' | 'extractWorker' | 'templateWorker' | 'preload', esbuild.BuildOptions> {
  const common: esbuild.BuildOptions = {
    absWorkingDir: root,
    bundle: true,
    platform: 'node',
    external: [...EXTERNAL_PACKAGES],
    sourcemap: 'linked',
    logLevel: 'warning',
    metafile: true,
  };
  const esm: esbuild.BuildOptions = { ...common, format: 'esm', target: NODE_TARGET, banner: { js: ESM_REQUIRE_BANNER } };
  return {
    main: { ...esm, entryPoints: [path.join(root, 'app/main.ts')], outfile: path.join(outDir, 'main.js') },
    worker: { ...esm, entryPoints: [path.join(root, 'main/engine-host/worker.ts')], outfile: path.join(outDir, 'worker.js') },
    extractWorker: { ...esm, entryPoints: [path.join(root, 'main/documents/extract-worker.ts')], outfile: path.join(outDir, 'extract-worker.js') },
    templateWorker: { ...esm, entryPoints: [path.join(root, 'main/engine/tokenizer/template-worker.ts')], outfile: path.join(outDir, 'template-worker.js') },
    preload: {
      ...common,
      format: 'cjs',
      target: 'chrome130',
      entryPoints: [path.join(root, 'app/preload.ts')],
      outfile: path.join(outDir, 'preload.cjs'),
    },
  };
}

/**
 * Checks the preload bundle: its only `require` is electron, and no zod (or other
 * node_modules package) went into it. @throws Error naming what is wrong.
 */
export function checkPreloadBundle(file: string, metafile: esbuild.Metafile): void {
  const code = readFileSync(file, 'utf8');
  const requires = [...code.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]);
  const bad = requires.filter((r) => r !== 'electron');
  if (bad.length) throw new Error(`the preload requires ${bad.join(', ')}; a sandboxed preload may only require electron`);
  const packages = Object.keys(metafile.inputs).filter((input) => input.includes('node_modules'));
  if (packages.length) throw new Error(`the preload bundles node_modules code: ${packages.slice(0, 5).join(', ')}`);
}

/** What says "ESM" to Node beside the bundles when they run from app.asar.unpacked (see the contract above). */
export const BUNDLE_PACKAGE_JSON = '{ "type": "module" }\n';

/** Writes `outDir`/package.json (BUNDLE_PACKAGE_JSON). */
export function writeBundlePackageJson(outDir: string): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'package.json'), BUNDLE_PACKAGE_JSON);
}

/** Bundles main, worker and preload into `outDir` (default dist/app), beside their package.json, and checks the preload. */
export async function buildApp(outDir = path.join(PROJECT_ROOT, 'dist/app')): Promise<void> {
  const opts = bundleOptions(outDir);
  writeBundlePackageJson(outDir);
  const builds = [opts.main, opts.worker, opts.extractWorker, opts.templateWorker].map((o) => esbuild.build(o));
  const [preload] = await Promise.all([esbuild.build(opts.preload), ...builds]);
  checkPreloadBundle(opts.preload.outfile!, preload.metafile!);
  copyOcrWorker(outDir);
}

/** Copies the OCR worker thread's script (plain CommonJS, not bundled) into `outDir`, beside the bundles that start OCR. */
export function copyOcrWorker(outDir: string): void {
  mkdirSync(outDir, { recursive: true });
  copyFileSync(path.join(PROJECT_ROOT, 'main/documents/ocr-worker.cjs'), path.join(outDir, 'ocr-worker.cjs'));
}

/** Runs renderer/build.ts when it exists (owned by the renderer; writes dist/renderer/). */
function buildRenderer(): void {
  const script = path.join(PROJECT_ROOT, 'renderer/build.ts');
  if (!existsSync(script)) {
    console.warn('app/build: renderer/build.ts does not exist yet; dist/renderer was not built');
    return;
  }
  const run = spawnSync(process.execPath, ['--import', 'tsx', script], { cwd: PROJECT_ROOT, stdio: 'inherit' });
  if (run.status !== 0) throw new Error(`renderer/build.ts failed (exit ${run.status ?? run.signal})`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  try {
    await buildApp();
    console.error('app/build: dist/app/main.js, dist/app/worker.js, dist/app/extract-worker.js, dist/app/template-worker.js, dist/app/ocr-worker.cjs, dist/app/preload.cjs');
    buildRenderer();
  } catch (e) {
    console.error(`app/build: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  }
}
