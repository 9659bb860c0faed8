/**
 * The native addon on WebGPU with its KV cache in WebGPU buffers (issue 16 item 2), on this
 * machine's adapter (Mesa's lavapipe here and in CI, `.ci/run`):
 *   - stories260K and its Q8_0 / Q4_0 GGUF, through the engine as a user's answers run: the
 *     native backend on `webgpu` gives the CPU provider's greedy tokens for an answer of 100
 *     tokens at a max context of 64 (KV growths 8 → 64, context shifts), a follow-up that reuses
 *     the first answer's prefix, and a return to it after another prompt (its KV rows copied out
 *     of the WebGPU buffers and back in);
 *   - the KV tensors live in ONNX Runtime's WebGPU buffer memory, and a warm decode step binds,
 *     allocates and copies nothing of the KV cache (the addon's counters: only `runs` moves);
 *     a growth binds once and copies each layer's keys and values once, on the device.
 * Without a Vulkan adapter these fail saying so (they are not skipped).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { graphTarget } from '../../main/engine/model/graph-target.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { argmax } from '../helpers/onnx-runner.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';

const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-native-webgpu-'));
after(() => rmSync(cacheDir, { recursive: true, force: true }));

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const MAX_CONTEXT = 64;
const MODELS = [
  { name: 'stories260K (llama2.c, float32)', file: STORIES_BIN },
  { name: 'stories260K Q8_0 GGUF', file: path.join(GGUF_DIR, 'stories260K-q8_0.gguf') },
  { name: 'stories260K Q4_0 GGUF', file: path.join(GGUF_DIR, 'stories260K-q4_0.gguf') },
];
const P = 'Once upon a time, there was a little girl named Lily.';
const OTHER = 'Tom had a big red truck. He liked to drive it around the house and make loud noises.';

async function answer(engine: Engine, prompt: string, maxTokens: number, extra: Partial<GenerationRequest> = {}) {
  let last: GenerationEvent | undefined;
  for await (const ev of engine.generate({ prompt, maxTokens, sampler: GREEDY, ignoreEos: true, ...extra })) last = ev;
  assert.ok(last?.type === 'done' && last.reason === 'length', JSON.stringify(last));
  return last;
}

/** One engine's answers to the scripted conversation: long (shifts), follow-up (reuse), switch and back. */
async function script(engine: Engine) {
  const long = await answer(engine, P, 100, { contextShift: true });
  engine.reset();
  const first = await answer(engine, P, 20);
  const followUp = `${P}${first.text} The`;
  const reuse = await answer(engine, followUp, 20);
  await answer(engine, OTHER, 8);
  const back = await answer(engine, followUp, 20);
  return { long, first, reuse, back };
}

for (const m of MODELS) {
  test(`native backend on webgpu, ${m.name}: the CPU provider's greedy tokens through KV growths, context shifts, prefix reuse and a conversation switch`, async (t) => {
    const cpu = await Engine.load(m.file, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'cpu', backend: 'native' });
    const gpu = await Engine.load(m.file, { cacheDir, maxContext: MAX_CONTEXT, executionProvider: 'webgpu', backend: 'native' });
    try {
      assert.equal(gpu.info.executionProvider, 'webgpu', `no WebGPU adapter here: install Mesa's lavapipe (see .ci/run); ${gpu.sessionInfo.fallbackReason}`);
      assert.equal(gpu.info.backend, 'native', String(gpu.sessionInfo.fallbackReason));
      const a = await script(cpu);
      const b = await script(gpu);
      assert.ok(a.long.stats.contextShifts >= 1 && a.long.tokens.length === 100, `the long answer shifted ${a.long.stats.contextShifts} times`);
      assert.equal(b.long.stats.contextShifts, a.long.stats.contextShifts);
      assert.deepEqual(b.long.tokens, a.long.tokens, `WebGPU ${b.long.text}\nCPU    ${a.long.text}`);
      assert.deepEqual(b.first.tokens, a.first.tokens);
      assert.ok(b.reuse.stats.reusedTokens >= b.first.stats.promptTokens, `the follow-up reused ${b.reuse.stats.reusedTokens} tokens`);
      assert.deepEqual(b.reuse.tokens, a.reuse.tokens);
      assert.equal(b.back.stats.reusedTokens, b.reuse.stats.promptTokens - 1, "back after another prompt: all but the last prompt token reused (the last is run for its logits)");
      assert.deepEqual(b.back.tokens, a.reuse.tokens, 'the KV rows copied out of the WebGPU buffers and back in changed the answer');
      t.diagnostic(`${m.name}: ${b.long.tokens.length + b.first.tokens.length + 2 * b.reuse.tokens.length} greedy tokens equal; ${b.long.stats.contextShifts} shifts`);
    } finally {
      await gpu.dispose();
      await cpu.dispose();
    }
  });
}

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
      const { cos, sin } = rope.rows(at, ids.length);
      const logits = await session.run(ids, cos, sin, kv);
      kv.commit(ids.length);
      return argmax(logits);
    };
    let token = await step([1, 403, 407, 261, 378, 300, 301, 302, 303, 304]); // 10 positions: capacity 16
    assert.equal(session.kvMemory, 'WebGPU_Buf', 'the KV tensors are not in WebGPU buffer memory');
    const grown = session.stats;
    const tensors = 2 * c.numLayers;
    assert.equal(grown.kvBinds, 1);
    assert.equal(grown.kvAllocs, tensors);
    for (let i = 0; i < 5; i++) token = await step([token]); // positions 10 … 14: no growth
    const warm = session.stats;
    assert.deepEqual(warm, { ...grown, runs: grown.runs + 5 }, 'a warm decode step moved something of the KV cache');
    token = await step([token]); // position 15
    await step([token]); // position 16: growth to 32
    const after16 = session.stats;
    assert.equal(after16.kvBinds, grown.kvBinds + 1, 'a growth binds the new tensors once');
    assert.equal(after16.kvAllocs, grown.kvAllocs + tensors);
    assert.equal(after16.kvCopies, grown.kvCopies + tensors, 'a growth copies each tensor once on the device');
  } finally {
    await session.dispose();
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
    const { cos, sin } = rope.rows(0, 3);
    await session.run([1, 403, 407], cos, sin, kv);
    assert.equal(session.kvMemory, 'Cpu');
    assert.equal(session.stats.kvCopies, 0);
  } finally {
    await session.dispose();
  }
});
