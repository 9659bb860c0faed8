/**
 * The two ways a run's new keys/values reach the KV cache agree exactly on the real stories260K
 * weights: 'rows' (only the new rows fetched, written by the session) and 'in-place' (present
 * bound to past, GroupQueryAttention appends), over a chunked prefill, a KV growth and decode
 * steps: same logits and the same KV cache contents. And the JS backend wraps the whole RoPE cache
 * once per RoPE growth, never on a warm step.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KvCache, type KvBuffer } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { readLlama2cCheckpoint } from '../../main/engine/model/import-llama2c.ts';
import type { DecoderSession, KvOutputs } from '../../main/engine/model/js-session.ts';
import { argmax, OnnxRunner } from '../helpers/onnx-runner.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

test("'rows' and 'in-place' KV outputs give the same logits and KV cache", async () => {
  const { config, weights } = await readLlama2cCheckpoint(STORIES_BIN);
  const runner = await OnnxRunner.create(config, weights, 256, 'js');
  const session = runner.session as DecoderSession;
  try {
    const caches = (['rows', 'in-place'] as KvOutputs[]).map((mode) => ({
      mode,
      rope: new RopeCache(config.rope, 256),
      kv: new KvCache({ numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: config.headDim, maxContext: 256 }),
    }));
    const step = async (c: (typeof caches)[number], tokens: number[]) => {
      const P = c.kv.length;
      c.rope.ensure(P + tokens.length);
      c.kv.ensure(P + tokens.length);
      const logits = (await session.run(tokens, c.rope.tables, c.kv, c.mode)).slice();
      c.kv.commit(tokens.length);
      return logits;
    };
    const both = async (tokens: number[]) => {
      const [rows, inPlace] = [await step(caches[0], tokens), await step(caches[1], tokens)];
      assert.deepEqual(rows, inPlace, `logits differ after ${caches[0].kv.length} tokens`);
      return rows;
    };
    // 2 + 13 tokens: the second chunk grows the KV cache (2 → 16) and copies the held rows.
    await both([1, 403]);
    let logits = await both([407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317]);
    for (let s = 0; s < 25; s++) logits = await both([argmax(logits)]);
    const [a, b] = caches.map((c) => c.kv);
    assert.equal(a.length, b.length);
    assert.equal(a.capacity, b.capacity);
    assert.ok(a.stats.growths >= 2, 'the run crossed at least one KV growth');
    const held = (buf: KvBuffer, cap: number) => {
      const out: number[] = [];
      for (let h = 0; h < config.numKvHeads; h++) out.push(...buf.subarray(h * cap * config.headDim, (h * cap + a.length) * config.headDim));
      return out;
    };
    for (let l = 0; l < config.numLayers; l++) {
      assert.deepEqual(held(a.key(l), a.capacity), held(b.key(l), b.capacity), `layer ${l} keys`);
      assert.deepEqual(held(a.value(l), a.capacity), held(b.value(l), b.capacity), `layer ${l} values`);
    }
  } finally {
    await runner.dispose();
  }
});

test('the JS backend binds the whole RoPE cache once per RoPE growth, never on a warm decode step', async () => {
  const { config, weights } = await readLlama2cCheckpoint(STORIES_BIN);
  const runner = await OnnxRunner.create(config, weights, 256, 'js');
  const session = runner.session as DecoderSession;
  try {
    let logits = await runner.forward([1, 403, 407, 261, 378, 432, 383, 286, 261, 376]); // 10 positions: RoPE capacity 16
    assert.deepEqual([session.ropeBinds, runner.rope.capacity], [1, 16]);
    for (let s = 0; s < 6; s++) logits = await runner.forward([argmax(logits)]); // positions 10 … 15
    assert.equal(session.ropeBinds, 1, 'a warm decode step rebound the RoPE cache');
    logits = await runner.forward([argmax(logits)]); // position 16: growth to 32
    assert.deepEqual([session.ropeBinds, runner.rope.capacity], [2, 32], 'a RoPE growth binds the grown cache once');
    for (let s = 0; s < 4; s++) logits = await runner.forward([argmax(logits)]);
    assert.equal(session.ropeBinds, 2);
    assert.equal(runner.rope.stats.growths, 2);
  } finally {
    await runner.dispose();
  }
});
