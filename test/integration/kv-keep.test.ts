/**
 * Kept KV caches of earlier sequences (Engine, `kvCacheBudgetBytes`) on the real stories260K
 * model, on both backends: after switching to another prompt and back, the first one's tokens
 * are reused rather than prefilled, and the answer is the one a fresh engine gives (the copy
 * out and back in is exact); a budget too small for two keeps only the most recent.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-kv-keep-test-'));
after(() => rmSync(cacheDir, { recursive: true, force: true }));

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const A = 'Once upon a time, there was a little girl named Lily. She loved to play in the park with her ball. '.repeat(4);
const B = 'Tom had a big red truck. He liked to drive it around the house and make loud noises. '.repeat(4);
const C = 'The sun was hot and the sky was blue. A little bird sat in the tree and sang. '.repeat(4);

async function ask(engine: Engine, prompt: string, extra: Partial<GenerationRequest> = {}) {
  let last: GenerationEvent | undefined;
  for await (const ev of engine.generate({ prompt, maxTokens: 16, sampler: GREEDY, ignoreEos: true, ...extra })) last = ev;
  assert.ok(last?.type === 'done' && last.reason === 'length', JSON.stringify(last));
  return last;
}

for (const backend of ['js', 'native'] as const) {
  test(`${backend}: switching to another prompt and back reuses the first one's KV cache; the answer is unchanged`, async () => {
    const engine = await Engine.load(STORIES_BIN, { cacheDir, backend, maxContext: 512 });
    const fresh = await Engine.load(STORIES_BIN, { cacheDir, backend, maxContext: 512 });
    try {
      const a = await ask(engine, A);
      await ask(engine, B);
      const back = await ask(engine, A + a.text + ' Then');
      assert.ok(back.stats.reusedTokens >= a.promptTokens.length, `reused ${back.stats.reusedTokens} of A's ${a.promptTokens.length} prompt tokens`);
      assert.deepEqual(back.tokens, (await ask(fresh, A + a.text + ' Then')).tokens, 'restored KV cache = a fresh prefill');
      assert.equal(engine.savedKvStats.entries, 1, 'B is kept now');

      // A budget that holds one sequence: A → C keeps A and drops B (least recently used); C → B
      // keeps C and drops A; so B and then A are prefilled again.
      const held = [back.promptTokens.length, engine.encodeRequest({ prompt: B }).length, engine.encodeRequest({ prompt: C }).length].map((n) => n + 15);
      assert.ok(2 * Math.min(...held) > Math.max(...held) + 8, `similar lengths: ${held}`);
      const one = (Math.max(...held) + 8) * engine.kv.snapshotFloats(1) * 4;
      await ask(engine, C, { kvCacheBudgetBytes: one });
      assert.equal(engine.savedKvStats.entries, 1);
      assert.ok((await ask(engine, B)).stats.reusedTokens < 10, "B was dropped");
      const again = await ask(engine, A + a.text + ' Then');
      assert.ok(again.stats.reusedTokens < 10, `A was dropped too, reused ${again.stats.reusedTokens}`);
      assert.deepEqual(again.tokens, back.tokens);
      assert.ok(engine.savedKvStats.bytes <= one);
      // Back to B (kept) with room for one: A is kept in its place. (Keeping A once evicted B
      // before B was taken out, and the removal then dropped A instead.)
      assert.ok((await ask(engine, B)).stats.reusedTokens >= engine.encodeRequest({ prompt: B }).length - 1, 'B came back');
      assert.ok((await ask(engine, A + a.text + ' Then')).stats.reusedTokens >= a.promptTokens.length, 'and A was kept for it');
      assert.throws(() => engine.setKvCacheBudget(-1), /KV cache budget.*-1/);
    } finally {
      await engine.dispose();
      await fresh.dispose();
    }
  });
}
