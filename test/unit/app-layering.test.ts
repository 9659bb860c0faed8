/**
 * Layering, checked on the sources: an allow-list per layer of what it may import (the engine
 * nothing above it; the services no transport; the renderer only the contract); only app/
 * imports Electron; the pure app modules the tests load stay Electron-free; the preload imports
 * only electron, the bridge and the dependency-free contract names (no zod, no Node).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../helpers/paths.ts';
import { projectImports, sourceFiles, specifiers } from '../helpers/source-imports.ts';

const ELECTRON = ['elec', 'tron'].join(''); // spelled in pieces so this file does not match itself

const isElectron = (s: string) => s === ELECTRON || s.startsWith(`${ELECTRON}/`);

/**
 * Import rules between the project's own modules, as allow-lists (VS Code's `code-layering` rule):
 * each layer names the project modules its files may import (a folder ends with '/', else a
 * file); anything else fails, and a source file under main/, app/, renderer/ or native/ that no
 * layer covers fails too. Packages are not checked here (electron and the preload: below).
 * The most specific `from` wins (a file is judged by the longest matching prefix).
 */
interface LayerRule {
  from: string;
  may: string[];
}

const LAYERS: LayerRule[] = [
  // The common base (typed error base, firstLine, the worker starter, where the default model and the
  // renderer's files lie) lies below every layer and imports only itself.
  { from: 'main/common/', may: ['main/common/'] },
  // The contract is the bottom of the wire: plain types, zod schemas, names; nothing else of ours.
  { from: 'main/contract/', may: ['main/contract/'] },
  // The engine: token ids in, token ids out; nothing above it, not even the wire.
  { from: 'main/engine/', may: ['main/common/', 'main/engine/'] },
  { from: 'main/engine-host/', may: ['main/common/', 'main/engine-host/', 'main/engine/'] },
  // A remote engine is an engine: it may use the engine's types and tokenizer, and the host's ChatEngine.
  { from: 'main/remote/', may: ['main/common/', 'main/remote/', 'main/engine/', 'main/engine-host/'] },
  // Documents run in a worker too: the engine's tokenizer and errors, and the dependency-free limits.
  { from: 'main/documents/', may: ['main/common/', 'main/documents/', 'main/engine/', 'main/contract/limits.ts'] },
  { from: 'main/services/', may: ['main/common/', 'main/services/', 'main/contract/', 'main/engine/', 'main/engine-host/', 'main/remote/', 'main/documents/'] },
  // The composition root and the transports over it.
  { from: 'main/composition/router.ts', may: ['main/common/', 'main/contract/', 'main/services/', 'main/engine/', 'main/documents/'] },
  { from: 'main/composition/start-backend.ts', may: ['main/common/', 'main/composition/router.ts', 'main/services/', 'main/serve/local-server.ts'] },
  { from: 'main/serve/', may: ['main/common/', 'main/serve/', 'main/composition/', 'main/contract/', 'main/services/', 'main/engine/', 'main/engine-host/'] },
  { from: 'main/cli/', may: ['main/common/', 'main/cli/', 'main/contract/', 'main/engine/', 'main/engine-host/', 'main/documents/'] },
  { from: 'app/', may: ['main/common/', 'app/', 'main/composition/', 'main/contract/', 'main/services/'] },
  { from: 'renderer/', may: ['renderer/', 'main/contract/'] },
  { from: 'native/', may: ['native/'] },
];

const under = (p: string, prefix: string) => (prefix.endsWith('/') ? p.startsWith(prefix) : p === prefix);

/** The rule that judges `file`: the one with the longest `from` that covers it. */
function ruleFor(file: string, rules: LayerRule[]): LayerRule | undefined {
  return rules.filter((r) => under(file, r.from)).sort((a, b) => b.from.length - a.from.length)[0];
}

/** "file imports target" for every import no rule allows, and "file: no layer" for files no rule covers. */
function layerViolations(files: { file: string; code: string }[], rules: LayerRule[]): string[] {
  const out: string[] = [];
  for (const { file, code } of files) {
    const rule = ruleFor(file, rules);
    if (!rule) {
      out.push(`${file}: no layer`);
      continue;
    }
    for (const target of projectImports(file, code)) {
      if (!rule.may.some((m) => under(target, m))) out.push(`${file} imports ${target}`);
    }
  }
  return out;
}

describe('layering', () => {
  it('every file under main/, app/, renderer/, native/ imports only what its layer allows', () => {
    const files = ['main', 'app', 'renderer', 'native'].flatMap(sourceFiles).map((f) => ({ file: f.split(path.sep).join('/'), code: readFileSync(path.join(PROJECT_ROOT, f), 'utf8') }));
    assert.ok(files.filter((f) => f.file.startsWith('main/engine/')).length > 10 && files.filter((f) => f.file.startsWith('renderer/')).length > 10, `scanned ${files.length} files`);
    assert.deepEqual(layerViolations(files, LAYERS), []);
  });

  it('the table catches each kind of violation (so the check above can fail)', () => {
    const bad = [
      { file: 'main/engine/generate/x.ts', code: "import { ChatService } from '../../services/chat-service.ts';" },
      { file: 'main/services/x.ts', code: "import { RouterError } from '../composition/router.ts';\nimport type { CompletionBackend } from '../serve/openai.ts';" },
      { file: 'renderer/stores/x.ts', code: "import { Engine } from '../../main/engine/generate/engine.ts';\nimport type { Message } from '../../main/contract/types.ts';" },
      { file: 'main/engine/model/x.ts', code: "import type { QuantizeOption } from '../../contract/types.ts';" },
      { file: 'main/documents/x.ts', code: "import { firstLine } from '../services/errors.ts';\nimport { MAX_DOCUMENT_BYTES } from '../contract/limits.ts';" },
      { file: 'main/new-loose-file.ts', code: '' },
    ];
    assert.deepEqual(layerViolations(bad, LAYERS), [
      'main/engine/generate/x.ts imports main/services/chat-service.ts',
      'main/services/x.ts imports main/composition/router.ts',
      'main/services/x.ts imports main/serve/openai.ts',
      'renderer/stores/x.ts imports main/engine/generate/engine.ts',
      'main/engine/model/x.ts imports main/contract/types.ts',
      'main/documents/x.ts imports main/services/errors.ts',
      'main/new-loose-file.ts: no layer',
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
