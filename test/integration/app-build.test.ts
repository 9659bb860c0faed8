/**
 * The bundles app/build.ts makes, checked without Electron: the preload is one CommonJS file that
 * requires only electron and, run in a bare VM context with a fake electron, exposes exactly the
 * contract; main.js imports only Node built-ins and the external packages; the engine worker
 * bundle loads the real stories260K model in a plain Node worker thread and generates; and, in the
 * packaged layout, started as its own process from `resources/app.asar/dist/app/worker.js` where
 * only what electron-builder.yml unpacks is on disk (app.asar.unpacked: the listed dist/app files,
 * symlinks to the listed packages, resolved as links), it loads and generates too — so a file the
 * engine's process needs and the config does not unpack fails here.
 */
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import vm from 'node:vm';
import { Worker } from 'node:worker_threads';
import * as esbuild from 'esbuild';
import { pathToFileURL } from 'node:url';
import { bundleOptions, checkPreloadBundle, copyOcrWorker, EXTERNAL_PACKAGES, writeBundlePackageJson } from '../../app/build.ts';
import { forkEngine, processChannel } from '../../main/engine-host/channel.ts';
import type { WorkerToHost } from '../../main/engine-host/protocol.ts';
import { NATIVE_ADDON_FILE, PACKAGED_ADDON_FILE } from '../../main/engine/model/native-addon.ts';
import { channelOf, EVENT_CHANNEL, METHOD_NAMES } from '../../main/contract/names.ts';
import { withStringMetadata } from '../helpers/gguf-edit.ts';
import { PROJECT_ROOT, STORIES_BIN, STORIES_GGUF } from '../helpers/paths.ts';

// Inside the project, so the bundles see package.json ("type": "module") and node_modules.
const OUT = path.join(PROJECT_ROOT, 'test', 'artifacts', `app-build-${process.pid}`, 'app');
const opts = bundleOptions(OUT);

before(async () => {
  const preload = await esbuild.build({ ...opts.preload, logLevel: 'silent' });
  checkPreloadBundle(opts.preload.outfile!, preload.metafile!);
  await esbuild.build({ ...opts.main, logLevel: 'silent' });
  await esbuild.build({ ...opts.worker, logLevel: 'silent' });
  await esbuild.build({ ...opts.templateWorker, logLevel: 'silent' });
  copyOcrWorker(OUT);
});
after(() => rmSync(path.dirname(OUT), { recursive: true, force: true }));

describe('preload bundle', () => {
  it('requires only electron and contains no zod', () => {
    const code = readFileSync(opts.preload.outfile!, 'utf8');
    assert.deepEqual([...new Set([...code.matchAll(/\brequire\(\s*"([^"]+)"\s*\)/g)].map((m) => m[1]))], ['electron']);
    assert.ok(!/\bzod\b/.test(code), 'zod leaked into the preload');
  });

  it('exposes exactly the contract as window.ropewalk when run like a sandboxed preload', async () => {
    const exposed = new Map<string, Record<string, (...a: unknown[]) => unknown>>();
    const invokes: Array<[string, unknown[]]> = [];
    const ipcListeners = new Map<string, Set<(...a: unknown[]) => void>>();
    const fakeElectron = {
      contextBridge: { exposeInMainWorld: (key: string, api: Record<string, (...a: unknown[]) => unknown>) => exposed.set(key, api) },
      ipcRenderer: {
        invoke: async (channel: string, ...args: unknown[]) => (invokes.push([channel, args]), { ok: true, value: 'v' }),
        on: (ch: string, l: (...a: unknown[]) => void) => ipcListeners.set(ch, (ipcListeners.get(ch) ?? new Set()).add(l)),
        removeListener: (ch: string, l: (...a: unknown[]) => void) => ipcListeners.get(ch)?.delete(l),
      },
    };
    const sandboxRequire = (id: string) => {
      if (id !== 'electron') throw new Error(`a sandboxed preload cannot require ${id}`);
      return fakeElectron;
    };
    const module = { exports: {} };
    vm.runInNewContext(readFileSync(opts.preload.outfile!, 'utf8'), { require: sandboxRequire, module, exports: module.exports, console });

    assert.deepEqual([...exposed.keys()], ['ropewalk']);
    const api = exposed.get('ropewalk')!;
    assert.deepEqual(Object.keys(api).sort(), [...METHOD_NAMES, 'on'].sort());
    assert.equal(await api.getModel({}), 'v');
    assert.deepEqual(invokes, [[channelOf('getModel'), [{}]]]);

    const got: unknown[][] = [];
    const off = api.on('modelState', (...args: unknown[]) => got.push(args)) as () => void;
    const [ipcListener] = ipcListeners.get(EVENT_CHANNEL)!;
    ipcListener({ sender: 'IpcRendererEvent' }, { event: 'modelState', data: { status: 'ready' } });
    assert.deepEqual(got, [[{ status: 'ready' }]], 'the listener gets the data only, never the IpcRendererEvent');
    off();
    assert.equal(ipcListeners.get(EVENT_CHANNEL)!.size, 0);
  });
});

describe('main bundle', () => {
  it('is ESM and imports only Node built-ins and the external packages', () => {
    const code = readFileSync(opts.main.outfile!, 'utf8');
    const imports = new Set([...code.matchAll(/^import\s[^;]*?from\s*["']([^"']+)["'];?$/gm)].map((m) => m[1]));
    assert.ok(imports.has('electron'));
    const allowed = (s: string) => (EXTERNAL_PACKAGES as readonly string[]).includes(s) || s.startsWith('node:') || builtinModules.includes(s);
    assert.deepEqual([...imports].filter((s) => !allowed(s)), []);
    assert.ok(!/\brequire\(\s*["']electron["']\s*\)/.test(code));
    // host.ts finds the worker beside the bundle.
    assert.match(code, /new URL\(`\.\/worker\.\$\{ext\}`, import\.meta\.url\)/);
  });
});

/** Sends `msg` to `worker` and resolves with the reply of the same id (`loaded` info or `result` value). */
function ask(worker: Worker, msg: { type: string; id: number } & Record<string, unknown>): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type: string; id: number; info?: unknown; value?: unknown; error?: unknown }) => {
      if (m.id !== msg.id || m.type === 'progress') return;
      worker.off('message', onMessage);
      if (m.type === 'error') reject(new Error(JSON.stringify(m.error)));
      else resolve(m.type === 'loaded' ? m.info : m.value);
    };
    worker.on('message', onMessage);
    worker.postMessage(msg);
  });
}

describe('engine worker bundle', () => {
  it('renders a chat template in the bundled template sandbox beside it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-worker-bundle-'));
    const gguf = path.join(dir, 'raw.gguf');
    writeFileSync(gguf, withStringMetadata(readFileSync(STORIES_GGUF), 'tokenizer.chat_template', '{% raw %}{{ x }}{% endraw %}{{ messages[0].content }}'));
    const worker = new Worker(opts.worker.outfile!);
    try {
      await ask(worker, { type: 'load', id: 1, source: gguf, options: { cacheDir: path.join(dir, 'cache') } });
      const prompt = await ask(worker, { type: 'renderChat', id: 2, messages: [{ role: 'user', content: 'Hi' }] });
      assert.equal(String(prompt).trimEnd(), '{{ x }}Hi');
    } finally {
      await worker.terminate();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loads stories260K in a plain Node worker and generates greedily', async () => {
    const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-worker-bundle-'));
    const worker = new Worker(opts.worker.outfile!);
    try {
      const text = await new Promise<string>((resolve, reject) => {
        worker.on('error', reject);
        type Reply = { type: string; id: number; info?: { vocabSize: number }; event?: { type: string; text: string }; error?: unknown; messages?: Reply[] };
        const onReply = (m: Reply): void => {
          // Token events may arrive coalesced in one `batch` message (protocol.ts), done included.
          if (m.type === 'batch') return m.messages!.forEach(onReply);
          if (m.type === 'error') reject(new Error(JSON.stringify(m.error)));
          if (m.type === 'loaded') {
            assert.equal(m.info!.vocabSize, 512);
            const sampler = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
            worker.postMessage({ type: 'generate', id: 2, request: { prompt: 'Once upon a time', maxTokens: 12, sampler } });
          }
          if (m.type === 'event' && m.event!.type === 'done') resolve(m.event!.text);
        };
        worker.on('message', onReply);
        worker.postMessage({ type: 'load', id: 1, source: STORIES_BIN, options: { cacheDir } });
      });
      // llama2.c run.c -t 0 continues "Once upon a time" with ", there was a little girl named Lily."
      assert.match(text, /^, there was a little girl/);
    } finally {
      await worker.terminate();
      rmSync(cacheDir, { recursive: true, force: true });
    }
  });
});

/** electron-builder.yml's asarUnpack globs, as written. */
function asarUnpackGlobs(): string[] {
  const yml = readFileSync(path.join(PROJECT_ROOT, 'electron-builder.yml'), 'utf8');
  const block = yml.split(/^asarUnpack:\n/m)[1].split(/^\S/m)[0];
  return [...block.matchAll(/^\s+-\s+"([^"]+)"/gm)].map((m) => m[1]);
}

/**
 * `resources/` as a packaged app has it, holding only what the globs unpack: dist/app files copied
 * from the bundles in `bundles`, node_modules packages as symlinks; the addon where extraResources
 * puts it. No app.asar: anything read from inside it would fail.
 */
function unpackedLayout(root: string, bundles: string): string {
  const resources = path.join(root, 'resources');
  const unpacked = path.join(resources, 'app.asar.unpacked');
  mkdirSync(path.join(unpacked, 'dist', 'app'), { recursive: true });
  mkdirSync(path.join(unpacked, 'node_modules'), { recursive: true });
  for (const glob of asarUnpackGlobs()) {
    const file = /^dist\/app\/([^*/]+)$/.exec(glob)?.[1];
    if (file === 'package.json') writeBundlePackageJson(path.join(unpacked, 'dist', 'app'));
    else if (file) copyFileSync(path.join(bundles, file), path.join(unpacked, 'dist', 'app', file));
    const pkg = /^\*\*\/node_modules\/(.+)\/\*\*$/.exec(glob)?.[1];
    if (pkg && existsSync(path.join(PROJECT_ROOT, 'node_modules', pkg))) {
      mkdirSync(path.dirname(path.join(unpacked, 'node_modules', pkg)), { recursive: true });
      symlinkSync(path.join(PROJECT_ROOT, 'node_modules', pkg), path.join(unpacked, 'node_modules', pkg));
    }
  }
  mkdirSync(path.dirname(path.join(resources, PACKAGED_ADDON_FILE)), { recursive: true });
  symlinkSync(path.join(PROJECT_ROOT, NATIVE_ADDON_FILE), path.join(resources, PACKAGED_ADDON_FILE));
  return resources;
}

describe('the engine process in the packaged layout', () => {
  it('starts from app.asar.unpacked with only what electron-builder.yml unpacks, loads stories260K on the native backend and generates', { timeout: 120_000 }, async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-packaged-'));
    const savedResources = process.env.ROPEWALK_RESOURCES_PATH;
    try {
      const resources = unpackedLayout(root, OUT);
      process.env.ROPEWALK_RESOURCES_PATH = resources;
      // Where host.ts points in the packaged app: beside main.js, inside the archive.
      const url = pathToFileURL(path.join(resources, 'app.asar', 'dist', 'app', 'worker.js'));
      // Links resolved as links: a package not unpacked is not found through a real path elsewhere.
      const channel = processChannel(url, (modulePath, o) => forkEngine(modulePath, { execArgv: ['--preserve-symlinks', ...o.execArgv] }));
      const replies: WorkerToHost[] = [];
      const done = new Promise<{ text: string; backend: string }>((resolve, reject) => {
        let backend = '';
        channel.onDeath((why) => reject(new Error(`the engine process ended: ${why}`)));
        const onReply = (m: WorkerToHost): void => {
          replies.push(m);
          if (m.type === 'batch') return m.messages.forEach(onReply);
          if (m.type === 'error') reject(new Error(JSON.stringify(m.error)));
          if (m.type === 'loaded') {
            backend = m.info.backend;
            const sampler = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
            channel.post({ type: 'generate', id: 2, request: { prompt: 'Once upon a time', maxTokens: 12, sampler } });
          }
          if (m.type === 'event' && m.event.type === 'done') resolve({ text: m.event.text, backend });
        };
        channel.onMessage(onReply);
        channel.post({ type: 'load', id: 1, source: STORIES_BIN, options: { cacheDir: path.join(root, 'cache') } });
      });
      try {
        const { text, backend } = await done;
        assert.match(text, /^, there was a little girl/);
        assert.equal(backend, 'native', 'the addon from resources/native, its ONNX Runtime from the unpacked onnxruntime-node');
      } finally {
        channel.kill();
        await channel.whenEnded;
      }
    } finally {
      if (savedResources === undefined) delete process.env.ROPEWALK_RESOURCES_PATH;
      else process.env.ROPEWALK_RESOURCES_PATH = savedResources;
      rmSync(root, { recursive: true, force: true });
    }
  });
});
