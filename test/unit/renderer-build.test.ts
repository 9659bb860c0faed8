/**
 * The window's build and layering: `buildRenderer` writes app.js, app.css and index.html (relative
 * URLs, the CSP meta tag, no inline script or style), production-minified; and the renderer's
 * sources import from main/ only types, except the dependency-free contract modules (names.ts,
 * wire.ts, origin.ts, context-caution.ts, load-phase.ts, context-full.ts, document-pages.ts,
 * memory-fit.ts, and types.ts for its constant lists, which import only types themselves), and nothing from Node.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { buildRenderer } from '../../renderer/build.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';

describe('renderer build', () => {
  it('bundles app.js + app.css and copies index.html with relative URLs and the CSP', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-renderer-'));
    try {
      const files = await buildRenderer({ outDir: out });
      const names = files.map((f) => path.relative(out, f).split(path.sep).join('/'));
      assert.deepEqual(names.filter((f) => !f.startsWith('fonts/')).sort(), ['app.css', 'app.js', 'index.html']);
      const fonts = names.filter((f) => f.startsWith('fonts/'));
      assert.ok(fonts.length > 0 && fonts.every((f) => /^fonts\/KaTeX_[\w-]+\.(woff2|woff|ttf)$/.test(f)), 'only KaTeX fonts beside them, served by the app itself');
      const html = await readFile(path.join(out, 'index.html'), 'utf8');
      assert.match(html, /<script defer src="\.\/app\.js"><\/script>/);
      assert.match(html, /<link rel="stylesheet" href="\.\/app\.css" \/>/);
      const csp = /<meta\s+http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(html)?.[1];
      assert.ok(csp, 'CSP meta tag');
      for (const d of ["default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'", "base-uri 'none'"]) assert.ok(csp.includes(d), d);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
      assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
      assert.doesNotMatch(html, /\sstyle=|<style/, 'no inline style');
      const js = await readFile(path.join(out, 'app.js'), 'utf8');
      assert.doesNotMatch(js, /process\.env/, 'NODE_ENV is defined at build time');
      // Minified: long lines (the few newlines left are inside KaTeX's and highlight.js's string literals).
      assert.ok(js.length / js.split('\n').length > 1000, 'minified');
      const css = await readFile(path.join(out, 'app.css'), 'utf8');
      assert.ok(css.includes('.meter'));
      assert.match(css, /url\("?\.\/fonts\/KaTeX_Main-Regular-\w+\.woff2"?\)/, 'KaTeX fonts by relative URL (CSP font-src self)');
      assert.doesNotMatch(css, /url\((?!"?\.\/fonts\/)/, 'no other URL in the stylesheet');
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});

function sources(dir: string): string[] {
  return readdirSync(path.join(PROJECT_ROOT, dir)).flatMap((name) => {
    const rel = path.join(dir, name);
    if (statSync(path.join(PROJECT_ROOT, rel)).isDirectory()) return sources(rel);
    return /\.(ts|tsx)$/.test(name) ? [rel] : [];
  });
}

describe('renderer layering', () => {
  const files = sources('renderer').filter((f) => f !== path.join('renderer', 'build.ts'));

  it('imports from main/ only as types, except the dependency-free contract names, wire path, origin rule, context caution, load phase words, context-full words, document page words, memory fit, the chat settings rule and the types\' constant lists', () => {
    assert.ok(files.length > 15, `scanned ${files.length} files`);
    const runtimeAllowed = new Set(['main/contract/names.ts', 'main/contract/wire.ts', 'main/contract/origin.ts', 'main/contract/context-caution.ts', 'main/contract/load-phase.ts', 'main/contract/context-full.ts', 'main/contract/document-pages.ts', 'main/contract/memory-fit.ts', 'main/contract/chat-settings.ts', 'main/contract/types.ts']);
    // What the window bundles from main/ at run time must itself import only types (no zod, no Node).
    for (const allowed of runtimeAllowed) assert.doesNotMatch(readFileSync(path.join(PROJECT_ROOT, allowed), 'utf8'), /^\s*import\s+(?!type\s)/m, `${allowed} imports more than types`);
    const offenders: string[] = [];
    for (const file of files) {
      const code = readFileSync(path.join(PROJECT_ROOT, file), 'utf8');
      for (const m of code.matchAll(/^import\s+(type\s+)?[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
        const [, isType, spec] = m;
        if (!spec.startsWith('.')) continue;
        const target = path.relative(PROJECT_ROOT, path.resolve(PROJECT_ROOT, path.dirname(file), spec)).split(path.sep).join('/');
        if (!target.startsWith('main/')) continue;
        const typeOnly = Boolean(isType) || /^import\s+\{\s*(type\s+\w+\s*,?\s*)+\}/.test(m[0]);
        if (!typeOnly && !runtimeAllowed.has(target)) offenders.push(`${file}: ${spec}`);
      }
    }
    assert.deepEqual(offenders, []);
  });

  it('imports nothing from Node or Electron', () => {
    const offenders = files.filter((file) => /from\s+['"](node:|fs['"]|path['"]|electron)/.test(readFileSync(path.join(PROJECT_ROOT, file), 'utf8')));
    assert.deepEqual(offenders, []);
  });
});
