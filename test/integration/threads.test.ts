/**
 * The CPU thread count reaches ONNX Runtime, on both backends, with the real stories260K graph:
 * a session opened with `intraOpThreads` N starts N − 1 intra-op pool threads (counted in
 * /proc/self/task, Linux: the kernel's own list of this process's threads), and gives the same
 * greedy tokens as one thread. A bad count is refused by the engine and the addon, quoting it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { DecoderBackend } from '../../main/engine/model/backend.ts';
import { resolveModel, type LoadedBundle } from '../../main/engine/model/bundle.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { physicalCores } from '../../main/engine/model/cpu-threads.ts';
import { openDecoderBackend } from '../../main/engine/model/open-backend.ts';
import { argmax } from '../helpers/onnx-runner.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-threads-test-'));
let bundle: LoadedBundle;
before(async () => {
  bundle = await resolveModel(STORIES_BIN, cacheDir);
});
after(() => rmSync(cacheDir, { recursive: true, force: true }));

const threadsNow = () => readdirSync('/proc/self/task').length;

/** Greedy tokens after `prompt`, one run per token. */
async function greedy(backend: DecoderBackend, prompt: number[], steps: number): Promise<number[]> {
  const c = bundle.manifest.config;
  const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: c.trainedContext, hostBuffers: backend.kvOnHost });
  const rope = new RopeCache(c.rope, c.trainedContext);
  const out: number[] = [];
  let feed = prompt;
  for (let s = 0; s < steps; s++) {
    const P = kv.length;
    rope.ensure(P + feed.length);
    kv.ensure(P + feed.length);
    const logits = await backend.run(feed, rope.tables, kv);
    kv.commit(feed.length);
    feed = [argmax(logits)];
    out.push(feed[0]);
  }
  return out;
}

const OPENERS = {
  native: (threads: number) => NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config, 'cpu', 'float32', threads),
  js: (threads: number) => DecoderSession.create(bundle.modelPath, bundle.manifest.config, 'cpu', threads),
};

for (const [name, open] of Object.entries(OPENERS)) {
  test(`${name} backend: intraOpThreads 4 starts 3 more pool threads than 1, and the same greedy tokens`, async (t) => {
    if (name === 'native' && !loadNativeAddon().available) return t.skip('the native addon is not built');
    // A first session also starts ONNX Runtime's process-wide threads: counted apart.
    await (await open(1)).dispose();
    const base = threadsNow();
    const one = await open(1);
    const withOne = threadsNow() - base;
    const tokensOne = await greedy(one, [1, 403, 411], 12);
    await one.dispose();
    const before4 = threadsNow();
    const four = await open(4);
    const withFour = threadsNow() - before4;
    const tokensFour = await greedy(four, [1, 403, 411], 12);
    await four.dispose();
    assert.ok(withFour - withOne >= 3, `threads started: ${withOne} with 1, ${withFour} with 4`);
    assert.deepEqual(tokensFour, tokensOne);
  });
}

test('threads 0 (the default) opens either backend with one pool thread per physical core after the first, as the count given as a number does', async (t) => {
  // ONNX Runtime's own default for 0 started no pool thread on a 2-core VM (one thread: a decode
  // step 1.6× slower); 0 now becomes physicalCores() before ONNX Runtime sees it (cpu-threads.ts).
  const cores = physicalCores();
  if (cores === null) return t.skip('no CPU topology in sysfs here: ONNX Runtime counts the cores itself');
  if (cores < 2) return t.skip(`one physical core here (${cores}): no pool thread either way`);
  for (const want of ['native', 'js'] as const) {
    if (want === 'native' && !loadNativeAddon().available) continue;
    const open = (threads: number) => openDecoderBackend(bundle.modelPath, bundle.manifest.config, want, 'cpu', 'float32', threads);
    await (await open(1)).backend.dispose(); // ONNX Runtime's process-wide threads, counted apart
    const before1 = threadsNow();
    const one = (await open(1)).backend;
    const withOne = threadsNow() - before1;
    await one.dispose();
    const before0 = threadsNow();
    const dflt = (await open(0)).backend;
    const withDefault = threadsNow() - before0;
    await dflt.dispose();
    assert.equal(withDefault - withOne, cores - 1, `${want}: ${withOne} threads started with 1, ${withDefault} with the default, for ${cores} cores`);
  }
});

test('a bad thread count is refused by the engine (quoting it) and by the addon', async () => {
  await assert.rejects(Engine.load(STORIES_BIN, { cacheDir, threads: -1 }), (e: unknown) => e instanceof InvalidOptionError && /threads.*-1 is not a whole number from 0/.test(e.message));
  await assert.rejects(Engine.load(STORIES_BIN, { cacheDir, threads: 2.5 }), (e: unknown) => e instanceof InvalidOptionError && /2\.5/.test(e.message));
  const status = loadNativeAddon();
  if (status.available) {
    await assert.rejects(OPENERS.native(4096), /intraOpThreads must be a whole number from 0 to 1024/);
  }
});
