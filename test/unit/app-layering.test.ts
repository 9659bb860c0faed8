/**
 * Layering, checked on the sources: a table of which folder may not import which (the engine
 * nothing above it; the services no transport; the renderer only the contract); only app/
 * imports Electron; the pure app modules the tests load stay Electron-free; the preload imports
 * only electron, the bridge and the dependency-free contract names (no zod, no Node).
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

/**
 * Import rules between the project's own folders: files under `from` may not import a module
 * under any of `never` (a folder ends with '/', else a file), or, with `only`, any project module
 * outside `only` (packages are not checked by `only`).
 */
interface LayerRule {
  from: string;
  never?: string[];
  only?: string[];
}

const LAYERS: LayerRule[] = [
  { from: 'main/engine/', never: ['main/services/', 'main/serve/', 'main/engine-host/', 'main/remote/', 'main/cli/', 'main/router.ts', 'main/backend.ts', 'app/', 'renderer/'] },
  { from: 'main/documents/', never: ['main/engine-host/', 'main/serve/', 'main/cli/', 'main/router.ts', 'main/backend.ts', 'app/', 'renderer/'] },
  // A remote engine is an engine: it may use the engine's types and tokenizer, nothing above.
  { from: 'main/remote/', never: ['main/services/', 'main/serve/', 'main/cli/', 'main/router.ts', 'main/backend.ts', 'app/', 'renderer/'] },
  { from: 'main/services/', never: ['main/serve/', 'main/cli/', 'main/router.ts', 'main/backend.ts', 'app/', 'renderer/'] },
  { from: 'main/contract/', never: ['main/engine/', 'main/engine-host/', 'main/services/', 'main/serve/', 'main/cli/', 'main/router.ts', 'main/backend.ts', 'app/', 'renderer/'] },
  { from: 'renderer/', only: ['renderer/', 'main/contract/'] },
];

/** `file`'s imports of project modules, as paths from the project root. */
function projectImports(file: string, code: string): string[] {
  return specifiers(code)
    .filter((s) => s.startsWith('.'))
    .map((s) => path.posix.normalize(path.posix.join(path.posix.dirname(file), s)));
}

/** "file imports target" for every import that breaks a rule. */
function layerViolations(files: { file: string; code: string }[], rules: LayerRule[]): string[] {
  const out: string[] = [];
  const under = (p: string, prefix: string) => (prefix.endsWith('/') ? p.startsWith(prefix) : p === prefix);
  for (const { file, code } of files) {
    for (const rule of rules.filter((r) => file.startsWith(r.from))) {
      for (const target of projectImports(file, code)) {
        const forbidden = rule.never?.some((n) => under(target, n)) || (rule.only && !rule.only.some((o) => under(target, o)));
        if (forbidden) out.push(`${file} imports ${target}`);
      }
    }
  }
  return out;
}

describe('layering', () => {
  it('follows the folder table: engine < services < transports; renderer sees only the contract', () => {
    const files = ['main', 'renderer'].flatMap(sourceFiles).map((f) => ({ file: f.split(path.sep).join('/'), code: readFileSync(path.join(PROJECT_ROOT, f), 'utf8') }));
    assert.ok(files.filter((f) => f.file.startsWith('main/engine/')).length > 10 && files.filter((f) => f.file.startsWith('renderer/')).length > 10, `scanned ${files.length} files`);
    assert.deepEqual(layerViolations(files, LAYERS), []);
  });

  it('the table catches each kind of violation (so the check above can fail)', () => {
    const bad = [
      { file: 'main/engine/generate/x.ts', code: "import { ChatService } from '../../services/chat-service.ts';" },
      { file: 'main/services/x.ts', code: "import { RouterError } from '../router.ts';\nimport type { CompletionBackend } from '../serve/openai.ts';" },
      { file: 'renderer/stores/x.ts', code: "import { Engine } from '../../main/engine/generate/engine.ts';\nimport type { Message } from '../../main/contract/types.ts';" },
    ];
    assert.deepEqual(layerViolations(bad, LAYERS), [
      'main/engine/generate/x.ts imports main/services/chat-service.ts',
      'main/services/x.ts imports main/router.ts',
      'main/services/x.ts imports main/serve/openai.ts',
      'renderer/stores/x.ts imports main/engine/generate/engine.ts',
    ]);
  });

  it('no file outside app/ imports electron', () => {
    const files = ['main', 'renderer', 'test', 'native'].flatMap(sourceFiles);
    assert.ok(files.length > 20, `scanned ${files.length} files`);
    const offenders = files.filter((f) => specifiers(readFileSync(path.join(PROJECT_ROOT, f), 'utf8')).some(isElectron));
    assert.deepEqual(offenders, []);
  });

  it('the pure app modules import neither electron nor an app module that does', () => {
    const pure = ['security.ts', 'renderer-files.ts', 'bridge.ts', 'ipc-dispatch.ts', 'lifecycle.ts', 'build.ts', 'secrets.ts'];
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
