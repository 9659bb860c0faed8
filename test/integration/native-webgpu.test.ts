/**
 * The native addon on WebGPU with its KV cache in WebGPU buffers (issue 16 item 2), on this
 * machine's adapter (Mesa's lavapipe here and in CI, `.ci/run`):
 *   - stories260K and its Q8_0 / Q4_0 GGUF, through the engine as a user's answers run: the
 *     native backend on `webgpu` gives the CPU provider's greedy tokens for an answer of 100
 *     tokens at a max context of 64 (KV growths 8 → 64, context shifts), a follow-up that reuses
 *     the first answer's prefix, and a return to it after another prompt (its KV rows copied out
 *     of the WebGPU buffers and back in);
 *   - synthetic Hugging Face Gemma 3 (its sliding layers' own RoPE: a second table in the RoPE
 *     cache) and Phi-3 (LongRoPE, sliding window) checkpoints: the same script gives the JS
 *     backend's tokens on the CPU provider, with every node on WebGPU (nodesOnCpu 0);
 *   - the float16 WebGPU graph (lavapipe has shader-f16): the native backend, float16 KV tensors
 *     in WebGPU buffers, gives the JS backend's tokens on WebGPU through the same script;
 *   - the KV tensors live in ONNX Runtime's WebGPU buffer memory, and a warm decode step binds,
 *     allocates and copies nothing of the KV cache or the RoPE cache (the addon's counters: only
 *     `runs` moves); a KV growth binds once and copies each layer's keys and values once, on the
 *     device (the copy graph's nodes are all placed on WebGPU: ONNX Runtime's placement log); a
 *     RoPE growth binds the whole RoPE cache once;
 *   - through the engine, on webgpu and on the CPU, over the scripted conversation (RoPE and KV
 *     growths, context shifts, prefix reuse, a conversation switch): the RoPE cache is bound
 *     exactly when the engine's RoPE cache grew, every other decode step moves nothing but
 *     `runs`, and the tokens are the JS backend's on the CPU provider.
 * Without a Vulkan adapter these fail saying so (they are not skipped).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { KvCache, type KeyRotation } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache, type RopeTables } from '../../main/engine/cache/rope-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { graphTarget } from '../../main/engine/model/graph-target.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { buildKvCopyGraph } from '../../main/engine/model/kv-copy-graph.ts';
import type { DecoderBackend } from '../../main/engine/model/backend.ts';
import type { NativeDecoderStats } from '../../main/engine/model/native-addon.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { assertSameScript, kvScript } from '../helpers/kv-script.ts';
import { argmax } from '../helpers/onnx-runner.ts';
import { placementLog } from '../helpers/ort-placement.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';

const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-native-webgpu-'));
after(() => rmSync(cacheDir, { recursive: true, force: true }));

const MAX_CONTEXT = 64;
const MODELS = [
  { name: 'stories260K (llama2.c, float32)', file: STORIES_BIN },
  { name: 'stories260K Q8_0 GGUF', file: path.join(GGUF_DIR, 'stories260K-q8_0.gguf') },
  { name: 'stories260K Q4_0 GGUF', file: path.join(GGUF_DIR, 'stories260K-q4_0.gguf') },
];

for (const m of MODELS) {
  test(`native backend on webgpu, ${m.name}: the CPU provider's greedy tokens through KV growths, context shifts, prefix reuse and a conversation switch`, async (t) => {
    const cpu = await Engine.load(m.file, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'cpu', backend: 'native' });
    const gpu = await Engine.load(m.file, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'webgpu', backend: 'native' });
    try {
      assert.equal(gpu.info.executionProvider, 'webgpu', `no WebGPU adapter here: install Mesa's lavapipe (see .ci/run); ${gpu.sessionInfo.fallbackReason}`);
      assert.equal(gpu.info.backend, 'native', String(gpu.sessionInfo.fallbackReason));
      const n = assertSameScript(await kvScript(cpu), await kvScript(gpu));
      t.diagnostic(`${m.name}: ${n} greedy tokens equal`);
    } finally {
      await gpu.dispose();
      await cpu.dispose();
    }
  });
}

const SYNTHETIC = [
  { name: 'Gemma 3 (local RoPE)', spec: { family: 'gemma3_text', seed: 21, layers: 6, headDim: 16, configOverrides: { sliding_window: 16, rope_scaling: { rope_type: 'linear', factor: 8 } } } },
  {
    name: 'Phi-3 (LongRoPE)',
    spec: {
      family: 'phi3', seed: 5, hidden: 64, heads: 4, kvHeads: 2, layers: 2, inter: 96,
      configOverrides: { max_position_embeddings: 256, original_max_position_embeddings: 64, sliding_window: 16, rope_scaling: { type: 'longrope', short_factor: [1, 1.05, 1.1, 1.2, 1.4, 1.8, 2.5, 3], long_factor: [1, 1.2, 1.6, 2.4, 4, 8, 16, 32] } },
    },
  },
] as const;

for (const m of SYNTHETIC) {
  test(`native backend on webgpu, synthetic ${m.name}: the JS backend's greedy tokens on the CPU provider through the same script, every node on WebGPU`, async (t) => {
    const dir = path.join(cacheDir, m.name.replace(/\W+/g, '-'));
    await writeSyntheticCheckpoint(dir, m.spec);
    const cpu = await Engine.load(dir, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'cpu', backend: 'js' });
    const gpu = await Engine.load(dir, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'webgpu', backend: 'native' });
    try {
      assert.equal(gpu.info.executionProvider, 'webgpu', String(gpu.sessionInfo.fallbackReason));
      assert.equal(gpu.info.backend, 'native', String(gpu.sessionInfo.fallbackReason));
      assert.equal(gpu.sessionInfo.nodesOnCpu, 0);
      const n = assertSameScript(await kvScript(cpu), await kvScript(gpu));
      t.diagnostic(`${m.name}: ${n} greedy tokens equal`);
    } finally {
      await gpu.dispose();
      await cpu.dispose();
    }
  });
}

test('native backend on webgpu, synthetic Gemma 3 with the sliding layers\' KV bounded (slack 46: at most 61 of the 64 positions, rows dropped on the device; a rewind of 23 kept): the unbounded JS backend\'s greedy tokens on the CPU provider through the same script', async (t) => {
  const m = SYNTHETIC[0];
  const dir = path.join(cacheDir, m.name.replace(/\W+/g, '-'));
  await writeSyntheticCheckpoint(dir, m.spec);
  const cpu = await Engine.load(dir, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'cpu', backend: 'js' });
  const gpu = await Engine.load(dir, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'webgpu', backend: 'native', kvWindowSlack: 46 });
  try {
    assert.equal(gpu.info.executionProvider, 'webgpu', String(gpu.sessionInfo.fallbackReason));
    assert.ok(gpu.kv.window && !cpu.kv.window);
    const n = assertSameScript(await kvScript(cpu), await kvScript(gpu));
    t.diagnostic(`bounded Gemma 3 on webgpu: ${n} greedy tokens equal; windowed capacity ${gpu.kv.windowCapacity}, ${gpu.kv.stats.windowRowsDropped} layer-rows dropped`);
    assert.ok(gpu.kv.stats.windowRowsDropped > 0);
  } finally {
    await gpu.dispose();
    await cpu.dispose();
  }
});

test('the float16 WebGPU graph (shader-f16) on the native backend, float16 KV in WebGPU buffers: the greedy tokens of the JS backend on WebGPU through the same script', async (t) => {
  const opts = { cacheDir, graphDtype: 'float16' as const, maxContext: MAX_CONTEXT, executionProvider: 'webgpu' as const };
  const js = await Engine.load(STORIES_BIN, { ...opts, backend: 'js' });
  const native = await Engine.load(STORIES_BIN, { ...opts, backend: 'native' });
  try {
    assert.equal(native.manifest.dtype, 'float16');
    for (const e of [js, native]) assert.equal(e.info.executionProvider, 'webgpu', String(e.sessionInfo.fallbackReason));
    assert.equal(native.info.backend, 'native', String(native.sessionInfo.fallbackReason));
    const n = assertSameScript(await kvScript(js), await kvScript(native));
    t.diagnostic(`float16 on WebGPU: ${n} greedy tokens equal on both backends`);
  } finally {
    await native.dispose();
    await js.dispose();
  }
});

test('native backend on webgpu: the KV tensors are WebGPU buffers; a warm decode step binds, allocates and copies none of them', async () => {
  const bundle = await resolveModel(STORIES_BIN, cacheDir, undefined, { target: graphTarget('webgpu') });
  const c = bundle.manifest.config;
  const session = await NativeDecoderSession.create(bundle.modelPath, c, 'webgpu');
  try {
    assert.equal(session.info.executionProvider, 'webgpu', String(session.info.fallbackReason));
    const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: c.trainedContext, hostBuffers: session.kvOnHost });
    const rope = new RopeCache(c.rope, c.trainedContext);
    const step = async (ids: number[]) => {
      const at = kv.length;
      rope.ensure(at + ids.length);
      kv.ensure(at + ids.length);
      const logits = await session.run(ids, rope.tables, kv);
      kv.commit(ids.length);
      return argmax(logits);
    };
    let token = await step([1, 403, 407, 261, 378, 300, 301, 302, 303, 304]); // 10 positions: capacity 16
    assert.equal(session.kvMemory, 'WebGPU_Buf', 'the KV tensors are not in WebGPU buffer memory');
    const grown = session.stats;
    const tensors = 2 * c.numLayers;
    assert.equal(grown.kvBinds, 1);
    assert.equal(grown.kvAllocs, tensors);
    assert.deepEqual([grown.ropeBinds, grown.ropeRows], [1, 16], 'the first run binds the RoPE cache [16, R/2] once');
    for (let i = 0; i < 5; i++) token = await step([token]); // positions 10 … 14: no growth
    const warm = session.stats;
    assert.deepEqual(warm, { ...grown, runs: grown.runs + 5 }, 'a warm decode step moved something of the KV or RoPE cache');
    token = await step([token]); // position 15
    await step([token]); // position 16: growth to 32
    const after16 = session.stats;
    assert.equal(after16.kvBinds, grown.kvBinds + 1, 'a growth binds the new tensors once');
    assert.equal(after16.kvAllocs, grown.kvAllocs + tensors);
    assert.equal(after16.kvCopies, grown.kvCopies + tensors, 'a growth copies each tensor once on the device');
    assert.deepEqual([after16.ropeBinds, after16.ropeRows], [2, 32], 'a RoPE growth binds the grown cache once');
  } finally {
    await session.dispose();
  }
});

test("the KV copy graph (float32, float16) is placed wholly on WebGPU by ONNX Runtime's own placement log: a growth never leaves the device", () => {
  for (const dtype of ['float32', 'float16'] as const) {
    const file = path.join(cacheDir, `kv-copy-${dtype}.onnx`);
    writeFileSync(file, buildKvCopyGraph(dtype));
    assert.deepEqual(placementLog(file), { cpu: 0, webgpu: 2 }, dtype);
  }
});

test('native backend on the CPU: the KV tensors are host memory and no device copy runs', async () => {
  const bundle = await resolveModel(STORIES_BIN, cacheDir);
  const c = bundle.manifest.config;
  const session = await NativeDecoderSession.create(bundle.modelPath, c, 'cpu');
  try {
    const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: c.trainedContext, hostBuffers: session.kvOnHost });
    const rope = new RopeCache(c.rope, c.trainedContext);
    rope.ensure(3);
    kv.ensure(3);
    await session.run([1, 403, 407], rope.tables, kv);
    assert.equal(session.kvMemory, 'Cpu');
    assert.equal(session.stats.kvCopies, 0);
  } finally {
    await session.dispose();
  }
});

/** A native session that records, per run, what the engine handed it and the addon's counters after it. */
class RecordingBackend implements DecoderBackend {
  readonly kvOnHost = false;
  readonly runs: { T: number; P: number; rope: RopeTables; kvCapacity: number; moved: boolean; stats: NativeDecoderStats }[] = [];
  /** A shift, save or restore since the last run (it moves KV rows: that step is not a warm one). */
  private moved = false;
  constructor(readonly inner: NativeDecoderSession) {}
  get info() {
    return this.inner.info;
  }
  async run(tokenIds: ArrayLike<number>, rope: RopeTables, kv: KvCache): Promise<Float32Array> {
    const P = kv.length;
    const logits = await this.inner.run(tokenIds, rope, kv);
    this.runs.push({ T: tokenIds.length, P, rope, kvCapacity: kv.capacity, moved: this.moved, stats: this.inner.stats });
    this.moved = false;
    return logits;
  }
  shift(kv: KvCache, keep: number, drop: number, rotation: KeyRotation): void {
    this.moved = true;
    this.inner.shift(kv, keep, drop, rotation);
  }
  saveKv(kv: KvCache): Float32Array {
    this.moved = true;
    return this.inner.saveKv(kv);
  }
  restoreKv(kv: KvCache, data: Float32Array, length: number): void {
    this.moved = true;
    this.inner.restoreKv(kv, data, length);
  }
  dispose(): Promise<void> {
    return this.inner.dispose();
  }
}

for (const ep of ['webgpu', 'cpu'] as const) {
  test(`native backend on ${ep} through the engine: the RoPE cache is bound once per RoPE growth and a warm decode step moves nothing, through growths, context shifts, prefix reuse and a conversation switch`, async (t) => {
    const reference = await Engine.load(STORIES_BIN, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'cpu', backend: 'js' });
    const loaded = await Engine.load(STORIES_BIN, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: ep, backend: 'native' });
    const c = loaded.manifest.config;
    const inner = await NativeDecoderSession.create(path.join(loaded.info.bundleDir, 'model.onnx'), c, ep);
    const backend = new RecordingBackend(inner);
    const engine = new Engine({ manifest: loaded.manifest, tokenizer: loaded.tokenizer, backend, bundleDir: loaded.info.bundleDir }, { maxContext: MAX_CONTEXT });
    await loaded.dispose();
    try {
      assert.equal(inner.info.executionProvider, ep, String(inner.info.fallbackReason));
      const n = assertSameScript(await kvScript(reference), await kvScript(engine));
      const runs = backend.runs;
      let warm = 0;
      for (let i = 1; i < runs.length; i++) {
        const [prev, cur] = [runs[i - 1], runs[i]];
        const grew = cur.rope !== prev.rope;
        assert.equal(cur.stats.ropeBinds - prev.stats.ropeBinds, grew ? 1 : 0, `run ${i} (P ${cur.P}, T ${cur.T}): the RoPE cache is bound exactly when it grew`);
        assert.equal(cur.stats.ropeRows, cur.rope.rows);
        if (cur.T === 1 && !grew && cur.kvCapacity === prev.kvCapacity && !cur.moved) {
          assert.deepEqual(cur.stats, { ...prev.stats, runs: prev.stats.runs + 1 }, `decode step ${i} at position ${cur.P} moved something`);
          warm++;
        }
      }
      const growths = engine.rope.stats.growths;
      assert.equal(runs.at(-1)!.stats.ropeBinds, growths, 'one RoPE bind per growth of the engine\'s RoPE cache');
      // The prompt's prefill grows once (to its length + 1, room for the token it samples), decode steps the rest.
      assert.ok(growths >= 2 && runs.some((r, i) => i > 0 && r.T === 1 && r.rope !== runs[i - 1].rope), `a decode step grew the RoPE cache (${growths} growths)`);
      assert.ok(runs.some((r) => r.moved && r.T === 1), 'a decode step ran right after a context shift');
      assert.ok(warm >= 100, `${warm} warm decode steps`);
      t.diagnostic(`${ep}: ${n} greedy tokens equal the JS backend on the CPU; ${runs.length} runs, ${warm} warm decode steps moved nothing; RoPE bound ${growths} times (capacity ${engine.rope.capacity})`);
    } finally {
      await engine.dispose();
      await reference.dispose();
    }
  });
}
