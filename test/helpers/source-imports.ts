/**
 * The project's own import graph, read from the sources (no compiler): every specifier a file
 * imports, requires or dynamically imports (type-only imports included: they are edges of the
 * design too), the source files under a folder, and a file's imports of project modules as paths
 * from the project root. Shared by the layering and import-cycle tests.
 */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from './paths.ts';

const SOURCE = /\.(ts|tsx|mts|cts|js|mjs|cjs)$/;

/** Every module specifier a source file imports, requires or dynamically imports. */
export function specifiers(code: string): string[] {
  const out: string[] = [];
  const patterns = [/\bfrom\s*['"]([^'"]+)['"]/g, /\bimport\s*['"]([^'"]+)['"]/g, /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g, /\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g];
  for (const re of patterns) for (const m of code.matchAll(re)) out.push(m[1]);
  return out;
}

export function sourceFiles(dir: string): string[] {
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

/** `file`'s imports of project modules, as paths from the project root. */
export function projectImports(file: string, code: string): string[] {
  return specifiers(code)
    .filter((s) => s.startsWith('.'))
    .map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s)));
}

