/**
 * A sliding-window layer's KV cache bounded by its window (issue 17 item 1, cache/kv-window.ts),
 * through the real ONNX Runtime graph on both decoder backends, on a random-weight Gemma 3 text
 * checkpoint (5 sliding layers with a 16-token window, one global layer):
 *   - 236 greedy tokens (220 past the window) with a small slack (rows dropped every few steps)
 *     equal the independent float64 reference forward's, step by step, and the windowed layers'
 *     capacity, read from the cache's own figures after every run, never passes H + max(S, T);
 *   - in the engine, bounded against unbounded (the whole context in every layer), greedy
 *     tokens equal through a first answer, a follow-up (prefix reuse), a regenerate (a rewind
 *     below what the windowed layers hold: prefilled from 0) and a context shift; the bounded
 *     engine holds fewer KV bytes.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import type { ModelWeights } from '../../main/engine/model/manifest.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { KvCache, kvElementBytes } from '../../main/engine/cache/kv-cache.ts';
import { windowGroup } from '../../main/engine/cache/kv-window.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { OnnxRunner } from '../helpers/onnx-runner.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import { advanceInLockstep, decodeInLockstep } from '../helpers/lockstep.ts';

const WINDOW = 16;
const H = WINDOW - 1;
const SLACK = 8;
const MAX = 512;
const ENGINE_SLACK = 64;
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-window-kv-'));
const dir = path.join(root, 'gemma3');
let raw: ModelWeights;
let model: Awaited<ReturnType<typeof importHuggingFace>>;
before(async () => {
  raw = (await writeSyntheticCheckpoint(dir, { family: 'gemma3_text', seed: 21, layers: 6, headDim: 16, configOverrides: { sliding_window: WINDOW } })) as ModelWeights;
  model = await importHuggingFace(dir);
});
after(() => rmSync(root, { recursive: true, force: true }));

const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13) % 151_000);

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: 220 greedy tokens past the window with the windowed layers' KV bounded equal the reference; capacity never passes H + max(S, longest T)`, async (t) => {
    const c = model.manifest.config;
    let worstCap = 0;
    let dropped = 0;
    let longest = 0;
    const row = 2 * c.numKvHeads * c.headDim * kvElementBytes('float32');
    const r = await greedyAgainstReference({
      config: c, weights: model.weights, refWeights: raw, ids: prompt, steps: WINDOW + 220 - prompt.length, maxContext: MAX, backend, windowSlack: SLACK,
      onStep: (kv, T, runner) => {
        longest = Math.max(longest, T);
        const bound = H + Math.max(SLACK, longest);
        assert.ok(kv.windowCapacity <= bound, `window capacity ${kv.windowCapacity} > ${bound} at ${kv.length} positions`);
        assert.equal(kv.stats.windowBytes, kv.windowCapacity * row * 5);
        // The addon's own blocks, not only the KvCache's count of them.
        if (runner.session instanceof NativeDecoderSession) assert.equal(runner.session.windowCapacity, kv.windowCapacity);
        assert.ok(kv.length - kv.windowStart >= Math.min(kv.length, H), `the windowed layers hold [${kv.windowStart}, ${kv.length})`);
        worstCap = Math.max(worstCap, kv.windowCapacity);
        dropped = kv.stats.windowRowsDropped;
      },
    });
    t.diagnostic(`${backend}: worst |onnx − ref| / scale ${r.worst.toExponential(2)}; window capacity at most ${worstCap} (bound ${H} + max(${SLACK}, ${longest})), ${dropped} layer-rows dropped; unwindowed reference another token ${r.tokensDiffer} times`);
    assert.ok(dropped > 0, 'rows were dropped');
    assert.ok(r.fullOff > 1000 * Math.max(r.worst, 1e-9), 'the window changes the logits far beyond rounding');
  });
}

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: a saved bounded KV cache (windowed rows only) restores and decodes on as the reference`, async (t) => {
    const c = model.manifest.config;
    const runner = await OnnxRunner.create(c, model.weights, MAX, backend, 'cpu', SLACK);
    const ref = new ReferenceModel(c, raw, MAX);
    try {
      let expected = ref.forward(prompt);
      await runner.forward(prompt);
      expected = await advanceInLockstep(runner, ref, expected, 80);
      const { length, windowStart } = { length: runner.kv.length, windowStart: runner.kv.windowStart };
      assert.ok(windowStart > 0, 'the window has moved');
      const saved = runner.session.saveKv(runner.kv);
      assert.equal(saved.length, runner.kv.snapshotFloats(length, windowStart));
      // Something else in between, then back.
      runner.kv.reset();
      await runner.forward(prompt.slice(0, 7).reverse());
      runner.kv.ensureHeld(length, windowStart);
      runner.session.restoreKv(runner.kv, saved, length, windowStart);
      assert.equal(runner.kv.length, length);
      const worst = await decodeInLockstep(runner, ref, expected, 40, 'after the restore');
      t.diagnostic(`${backend}: restored ${length} positions (windowed rows from ${windowStart}), ${saved.length * 4} bytes; 40 steps on, worst |onnx − ref| / scale ${worst.toExponential(2)}`);
    } finally {
      await runner.dispose();
    }
  });
}

test('native: a second KvCache on a session whose window has moved, holding rows it never ran there (as the bench fills one), runs: the addon is never asked for rows before its own window start', async () => {
  const c = model.manifest.config;
  const runner = await OnnxRunner.create(c, model.weights, MAX, 'native', 'cpu', SLACK);
  try {
    await runner.forward(prompt);
    while (runner.kv.length < 80) await runner.forward([1]);
    assert.ok(runner.kv.windowStart > 0, 'the window has moved');
    const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: MAX, hostBuffers: runner.session.kvOnHost, window: windowGroup(c.slidingWindow, MAX, SLACK) });
    kv.ensure(40);
    kv.commit(40); // rows "held" without a run, as test/bench/window-kv.ts prepares its caches
    runner.rope.ensure(41);
    kv.ensure(41);
    // Before the fix: resizeWindow was asked to keep rows from before the addon's start (a negative offset) and threw.
    const logits = await runner.session.run([1], runner.rope.tables, kv);
    assert.equal(logits.length, c.vocabSize);
    assert.ok(logits.every(Number.isFinite), 'finite logits');
  } finally {
    await runner.dispose();
  }
});

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: a context shift whose tail is shorter than the window drops less (KvCache.exactDrop) and then equals the reference's shift`, async (t) => {
    const c = model.manifest.config;
    const runner = await OnnxRunner.create(c, model.weights, MAX, backend, 'cpu', SLACK);
    const ref = new ReferenceModel(c, raw, MAX);
    try {
      let expected = ref.forward(prompt);
      await runner.forward(prompt);
      expected = await advanceInLockstep(runner, ref, expected, 60);
      // A long kept prefix (30: a document in the first exchange) and a cut of 20 would leave a
      // 10-token tail: the next query's window (15 rows back) reaches into the prefix, whose
      // windowed rows the cache dropped long ago (it holds [${runner.kv.windowStart}, 60)).
      const keep = 30;
      assert.ok(runner.kv.windowStart > 60 - 20 - H);
      const drop = runner.kv.exactDrop(keep, 20);
      assert.equal(drop, 60 - keep - H);
      const { cos, sin } = runner.rope.shiftRotation(drop);
      const layerTables = Uint8Array.from(c.slidingWindow!, (w) => (w > 0 ? 1 : 0));
      runner.session.shift(runner.kv, keep, drop, { cos, sin, rotaryDim: c.rope.rotaryDim, interleaved: false, layerTables });
      ref.shift(keep, drop);
      const worst = await decodeInLockstep(runner, ref, expected, 60, 'after the shift');
      t.diagnostic(`${backend}: kept ${keep}, dropped ${drop} instead of 20; 60 steps on, worst |onnx − ref| / scale ${worst.toExponential(2)}`);
    } finally {
      await runner.dispose();
    }
  });
}

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

async function ask(engine: Engine, req: Omit<GenerationRequest, 'sampler'>) {
  let last: GenerationEvent | undefined;
  for await (const ev of engine.generate({ ...req, sampler: GREEDY, ignoreEos: true })) last = ev;
  assert.ok(last?.type === 'done' && last.reason !== 'error', JSON.stringify(last));
  return last;
}

for (const backend of ['js', 'native'] as const) {
  test(`${backend} engine: bounded equals unbounded through prefix reuse, a rewind below the window and a context shift`, async (t) => {
    const cacheDir = path.join(root, 'cache');
    const open = (slack: number, maxContext: number) => Engine.load(dir, { cacheDir, maxContext, backend, kvWindowSlack: slack });
    // Slack 64 (K = 32): follow-ups that rewind ≤ 32 tokens keep their rows; the regenerate below
    // rewinds 80.
    const bounded = await open(ENGINE_SLACK, 256);
    const whole = await open(Infinity, 256);
    try {
      assert.ok(bounded.kv.window && !whole.kv.window);
      const first = 'Once upon a time, in a small town by the sea, there lived an old fisherman. ';
      const a = [await ask(bounded, { prompt: first, maxTokens: 40 }), await ask(whole, { prompt: first, maxTokens: 40 })];
      assert.deepEqual(a[0].tokens, a[1].tokens);
      // Follow-up: the live cache's rows serve the shared prefix.
      const followUp = `${first}${a[0].text} Then one morning`;
      const b = [await ask(bounded, { prompt: followUp, maxTokens: 80 }), await ask(whole, { prompt: followUp, maxTokens: 80 })];
      assert.deepEqual(b[0].tokens, b[1].tokens);
      assert.ok(b[0].stats.reusedTokens > 0 && b[0].stats.reusedTokens === b[1].stats.reusedTokens, `reused ${b[0].stats.reusedTokens} and ${b[1].stats.reusedTokens}`);
      // Regenerate the follow-up: a rewind 80 tokens back, below what the windowed layers hold.
      const c = [await ask(bounded, { prompt: followUp, maxTokens: 80 }), await ask(whole, { prompt: followUp, maxTokens: 80 })];
      assert.deepEqual(c[0].tokens, b[0].tokens);
      assert.deepEqual(c[1].tokens, b[1].tokens);
      assert.equal(c[0].stats.reusedTokens, 0, 'the bounded cache prefills from 0');
      // A context shift: past the max context, the oldest half leaves, ~90 tokens on.
      const d = [await ask(bounded, { prompt: first, maxTokens: 320, contextShift: true }), await ask(whole, { prompt: first, maxTokens: 320, contextShift: true })];
      assert.ok(d[0].stats.contextShifts >= 1);
      assert.equal(d[0].stats.contextShifts, d[1].stats.contextShifts);
      assert.deepEqual(d[0].tokens, d[1].tokens);
      t.diagnostic(`${backend}: KV bytes bounded ${d[0].stats.kv.bytes} vs whole ${d[1].stats.kv.bytes}; ${d[0].stats.contextShifts} shifts; follow-up reused ${b[0].stats.reusedTokens} (bounded) / ${b[1].stats.reusedTokens} (whole)`);
      assert.ok(d[0].stats.kv.bytes < d[1].stats.kv.bytes);
    } finally {
      await bounded.dispose();
      await whole.dispose();
    }
  });
}
