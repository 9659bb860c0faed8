/**
 * Layering, checked on the sources: only app/ imports Electron; the pure app modules the tests
 * load stay Electron-free; the preload imports only electron, the bridge and the dependency-free
 * contract names (no zod, no Node).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../helpers/paths.ts';

const ELECTRON = ['elec', 'tron'].join(''); // spelled in pieces so this file does not match itself
const SOURCE = /\.(ts|tsx|mts|cts|js|mjs|cjs)$/;

/** Every module specifier a source file imports, requires or dynamically imports. */
function specifiers(code: string): string[] {
  const out: string[] = [];
  const patterns = [/\bfrom\s*['"]([^'"]+)['"]/g, /\bimport\s*['"]([^'"]+)['"]/g, /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g, /\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g];
  for (const re of patterns) for (const m of code.matchAll(re)) out.push(m[1]);
  return out;
}

function sourceFiles(dir: string): string[] {
  const abs = path.join(PROJECT_ROOT, dir);
  let entries: string[];
  try {
    entries = readdirSync(abs);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    if (name === 'node_modules' || name === 'artifacts' || name.startsWith('.')) return [];
    const rel = path.join(dir, name);
    if (statSync(path.join(PROJECT_ROOT, rel)).isDirectory()) return sourceFiles(rel);
    return SOURCE.test(name) ? [rel] : [];
  });
}

const isElectron = (s: string) => s === ELECTRON || s.startsWith(`${ELECTRON}/`);

describe('layering', () => {
  it('no file outside app/ imports electron', () => {
    const files = ['main', 'renderer', 'test', 'native'].flatMap(sourceFiles);
    assert.ok(files.length > 20, `scanned ${files.length} files`);
    const offenders = files.filter((f) => specifiers(readFileSync(path.join(PROJECT_ROOT, f), 'utf8')).some(isElectron));
    assert.deepEqual(offenders, []);
  });

  it('the pure app modules import neither electron nor an app module that does', () => {
    const pure = ['security.ts', 'renderer-files.ts', 'bridge.ts', 'ipc-dispatch.ts', 'lifecycle.ts', 'build.ts'];
    for (const file of pure) {
      const specs = specifiers(readFileSync(path.join(PROJECT_ROOT, 'app', file), 'utf8'));
      assert.ok(!specs.some(isElectron), `app/${file} imports electron`);
      for (const s of specs.filter((x) => x.startsWith('./'))) assert.ok(pure.includes(s.slice(2)), `app/${file} imports ${s}`);
    }
  });

  it('the preload imports only electron, the bridge and the contract names', () => {
    const specs = specifiers(readFileSync(path.join(PROJECT_ROOT, 'app/preload.ts'), 'utf8'));
    assert.deepEqual(specs.sort(), [ELECTRON, '../main/contract/names.ts', './bridge.ts'].sort());
    const bridge = specifiers(readFileSync(path.join(PROJECT_ROOT, 'app/bridge.ts'), 'utf8'));
    // Type-only imports are erased by the bundler; the value imports must be zod-free.
    const code = readFileSync(path.join(PROJECT_ROOT, 'app/bridge.ts'), 'utf8');
    const valueImports = [...code.matchAll(/^import\s+(?!type\b)[^;]*?from\s*['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    assert.deepEqual(valueImports, ['../main/contract/names.ts']);
    assert.ok(!bridge.includes('zod'));
  });
});
