/**
 * The model library on fixture folders laid out as LM Studio, Ollama, Jan and the Hugging Face
 * cache keep them (real GGUF files copied from ../shared/models): names as those apps show them,
 * facts from the headers, the memory estimate equal to the one the load computes from the
 * imported bundle, nothing in the other apps' folders touched, recent models remembered in SQLite.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { estimateMemory } from '../../main/engine/model/memory.ts';
import { ModelLibraryService } from '../../main/services/model-library.ts';
import { ConversationStore } from '../../main/services/store.ts';
import { makeLibraryFixture, type LibraryFixture } from '../helpers/library-fixtures.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

let fx: LibraryFixture;
let dataDir: string;
let store: ConversationStore;

before(async () => {
  fx = await makeLibraryFixture();
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-library-data-'));
  store = new ConversationStore(dataDir);
});
after(() => {
  store?.close();
  fx?.remove();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const GIB = 2 ** 30;
function library(over: Partial<ConstructorParameters<typeof ModelLibraryService>[0]> = {}): ModelLibraryService {
  return new ModelLibraryService({
    store,
    builtinPath: STORIES_BIN,
    modelsFolder: () => '',
    maxContext: (trained) => trained ?? 512,
    home: fx.home,
    env: {},
    available: () => GIB,
    ...over,
  });
}

/** Every file under `dir` with its size and mtime (what "read-only" must leave as it was). */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile()) {
        const st = statSync(full);
        out.push(`${full} ${st.size} ${st.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return out.sort();
}

test('lists the built-in model first and every fixture model under the name its app shows, nothing else', async () => {
  const before = snapshot(fx.home);
  const lib = await library().list();
  assert.equal(lib.models[0].source, 'builtin');
  assert.equal(lib.models[0].path, STORIES_BIN);
  const listed = Object.fromEntries(lib.models.slice(1).map((m) => [m.name, m.path]));
  assert.deepEqual(listed, fx.expected);
  const sources = Object.fromEntries(lib.models.map((m) => [m.name, m.source]));
  assert.equal(sources['stories:q4'], 'ollama');
  assert.equal(sources['someone/tales:latest'], 'ollama');
  assert.equal(sources['lmstudio-community/stories260K-GGUF/stories260K-Q8_0'], 'lmstudio');
  assert.equal(sources['stories-q5'], 'jan');
  assert.equal(sources['karpathy/tinyllamas/stories260K'], 'huggingface');
  assert.equal(sources['tiny-org/tiny-qwen3'], 'huggingface');
  assert.equal(sources['stories260K-q8'], 'ropewalk');
  assert.deepEqual(snapshot(fx.home), before, 'the scan wrote, moved or touched nothing');
  const found = lib.roots.filter((r) => r.found).map((r) => r.source);
  assert.deepEqual(found, ['ropewalk', 'lmstudio', 'ollama', 'jan', 'huggingface']);
});

test('facts come from the headers: architecture, quantization, parameters, size, trained context', async () => {
  const byName = new Map((await library().list()).models.map((m) => [m.name, m]));
  const builtin = [...byName.values()][0];
  // stories260K.bin: 28-byte header + float32 tensors (README of ../shared/models/stories260K).
  assert.deepEqual(
    { a: builtin.architecture, q: builtin.quantization, p: builtin.parameterCount, b: builtin.fileBytes, t: builtin.trainedContext, problem: builtin.problem },
    { a: 'llama', q: 'F32', p: (1056540 - 28) / 4, b: 1056540, t: 512, problem: null },
  );
  const q4 = byName.get('stories:q4')!;
  // These fixtures say llama.context_length 2048 (gguf-py wrote them so); the header is what is shown.
  assert.deepEqual([q4.architecture, q4.quantization, q4.fileBytes, q4.trainedContext, q4.format], ['llama', 'Q4_0', 370752, 2048, 'gguf']);
  // 292,800: the parameter count @huggingface/gguf's own counter gives for these files.
  assert.equal(q4.parameterCount, 292800);
  assert.equal(byName.get('stories-q5')!.quantization, 'Q5_1');
  assert.equal(byName.get('lmstudio-community/stories260K-GGUF/stories260K-Q8_0')!.quantization, 'Q8_0');
  const hf = byName.get('tiny-org/tiny-qwen3')!;
  assert.deepEqual([hf.architecture, hf.quantization, hf.trainedContext, hf.format, hf.problem], ['qwen3', 'BF16', 2048, 'safetensors', null]);
  assert.ok(hf.parameterCount! > 0);
});

test('the memory estimate is the one the load computes from the imported bundle, KV cache included', async () => {
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-library-cache-'));
  try {
    const lib = await library({ maxContext: () => 1024 }).list();
    for (const name of ['stories:q4', 'stories-q5', 'lmstudio-community/stories260K-GGUF/stories260K-Q8_0', 'karpathy/tinyllamas/stories260K', 'tiny-org/tiny-qwen3']) {
      const m = lib.models.find((x) => x.name === name)!;
      const bundle = await resolveModel(m.path, cacheDir);
      const load = await estimateMemory(bundle.manifest, bundle.dir, 1024, 'float16'); // the KV cache a load with no setting runs
      assert.equal(m.memory!.maxContext, 1024);
      assert.equal(m.memory!.kvCacheBytes, load.kvCacheBytes, `${name}: KV cache`);
      // stories260K: 2 × 5 layers × 4 KV heads × head size 8 × 1024 positions × 2 bytes (float16, the default).
      if (name !== 'tiny-org/tiny-qwen3') assert.equal(m.memory!.kvCacheBytes, 2 * 5 * 4 * 8 * 1024 * 2);
      assert.equal(m.memory!.weightBytes, load.weightBytes, `${name}: weights as the bundle stores them`);
      assert.equal(m.memory!.totalBytes, load.totalBytes);
    }
  } finally {
    rmSync(cacheDir, { recursive: true, force: true });
  }
});

test('fits says whether the estimate is within the available memory', async () => {
  const small = (await library({ available: () => 100_000 }).list()).models[0].memory!;
  assert.equal(small.fits, false);
  assert.equal(small.availableBytes, 100_000);
  const roomy = (await library({ available: () => GIB }).list()).models[0].memory!;
  assert.equal(roomy.fits, true);
});

test('unreadable and odd entries are skipped: a dangling link, a link loop, a non-model file', async () => {
  const odd = path.join(fx.modelsFolder, 'odd');
  mkdirSync(odd, { recursive: true });
  symlinkSync(path.join(fx.home, 'nowhere.gguf'), path.join(odd, 'dangling.gguf'));
  symlinkSync(fx.home, path.join(odd, 'loop'));
  writeFileSync(path.join(odd, 'fake.gguf'), 'this is text, not GGUF');
  // A download cut short: the header is whole, the tensor data is not.
  writeFileSync(path.join(odd, 'partial.gguf'), readFileSync(fx.expected['stories:q4']).subarray(0, 200_000));
  try {
    const lib = await library().list();
    const fake = lib.models.find((m) => m.path.endsWith('fake.gguf'))!;
    assert.match(fake.problem!, /GGUF/);
    assert.equal(fake.memory, null);
    const partial = lib.models.find((m) => m.path.endsWith('partial.gguf'))!;
    assert.match(partial.problem!, /past the end of the 200000-byte file \(truncated\?\)/);
    assert.ok(!lib.models.some((m) => m.path.includes(`${path.sep}loop${path.sep}`)), 'a link to a folder is not followed');
    assert.ok(!lib.models.some((m) => m.path.endsWith('dangling.gguf')));
  } finally {
    rmSync(odd, { recursive: true, force: true });
  }
});

test('the apps’ own folder settings move their roots: HF_HUB_CACHE, OLLAMA_MODELS, Jan’s data_folder', async () => {
  const roots = (await library({ env: { HF_HUB_CACHE: '/x/hub', OLLAMA_MODELS: '/y/ollama' } }).list()).roots;
  assert.ok(roots.some((r) => r.source === 'huggingface' && r.path === '/x/hub' && !r.found));
  assert.ok(roots.some((r) => r.source === 'ollama' && r.path === '/y/ollama'));
  const janSettings = path.join(fx.home, '.config', 'Jan');
  mkdirSync(janSettings, { recursive: true });
  writeFileSync(path.join(janSettings, 'settings.json'), JSON.stringify({ data_folder: '/z/jan-data' }));
  try {
    const janRoots = (await library().list()).roots.filter((r) => r.source === 'jan').map((r) => r.path);
    assert.equal(janRoots[0], '/z/jan-data');
  } finally {
    rmSync(janSettings, { recursive: true, force: true });
  }
});

test('recent models: most recent first, named as listed, kept in the database across a restart', async () => {
  const lib = library();
  await lib.list();
  lib.remember(fx.expected['stories:q4'], 1000);
  lib.remember(STORIES_BIN, 2000);
  lib.remember(fx.expected['stories:q4'], 3000);
  assert.deepEqual(lib.recent(), [
    { path: fx.expected['stories:q4'], name: 'stories:q4', openedAt: 3000 },
    { path: STORIES_BIN, name: 'stories260K', openedAt: 2000 },
  ]);
  store.close();
  store = new ConversationStore(dataDir);
  assert.equal(library({ store }).recent()[0].name, 'stories:q4');
});
