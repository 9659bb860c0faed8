/**
 * Builds the window: bundles renderer/main.tsx with esbuild into dist/renderer/app.js (+ app.css,
 * one classic script, so it loads from http://127.0.0.1:PORT/ and from Electron's file:// alike)
 * and copies index.html beside it. Production: minified, NODE_ENV "production".
 *   tsx renderer/build.ts [--dev] [--out DIR]
 */
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface BuildOptions {
  /** Output folder (default dist/renderer at the repository root). */
  outDir?: string;
  /** Unminified, with source maps and NODE_ENV "development". */
  dev?: boolean;
}

/** Builds into outDir; returns the written files (absolute paths). */
export async function buildRenderer(options: BuildOptions = {}): Promise<string[]> {
  const outDir = path.resolve(options.outDir ?? path.join(here, '..', 'dist', 'renderer'));
  const dev = options.dev ?? false;
  await mkdir(outDir, { recursive: true });
  const result = await esbuild.build({
    entryPoints: { app: path.join(here, 'main.tsx') },
    outdir: outDir,
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['chrome120'],
    jsx: 'automatic',
    minify: !dev,
    sourcemap: dev ? 'linked' : false,
    legalComments: 'none',
    define: { 'process.env.NODE_ENV': JSON.stringify(dev ? 'development' : 'production') },
    logLevel: 'warning',
    metafile: true,
    // KaTeX's stylesheet names its fonts: copied beside app.css (fonts/…), served by the app
    // itself, so the CSP's font-src 'self' holds and nothing is fetched from elsewhere.
    loader: { '.woff2': 'file', '.woff': 'file', '.ttf': 'file' },
    assetNames: 'fonts/[name]-[hash]',
  });
  const html = path.join(outDir, 'index.html');
  await copyFile(path.join(here, 'index.html'), html);
  return [...Object.keys(result.metafile.outputs).map((f) => path.resolve(f)), html];
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const outAt = args.indexOf('--out');
  await buildRenderer({ dev: args.includes('--dev'), outDir: outAt >= 0 ? args[outAt + 1] : undefined });
}
