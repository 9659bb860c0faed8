/**
 * The bundles app/build.ts makes, checked without Electron: the preload is one CommonJS file that
 * requires only electron and, run in a bare VM context with a fake electron, exposes exactly the
 * contract; main.js imports only Node built-ins and the external packages; the engine worker
 * bundle loads the real stories260K model in a plain Node worker thread and generates.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import vm from 'node:vm';
import { Worker } from 'node:worker_threads';
import * as esbuild from 'esbuild';
import { bundleOptions, checkPreloadBundle, EXTERNAL_PACKAGES } from '../../app/build.ts';
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
