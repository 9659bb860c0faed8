/**
 * The engine on the real stories260K model with real ONNX Runtime: llama2.c's greedy reference,
 * the two RoPE-cache seeds (P + T growth checks; zero work on warm decode steps), prefix reuse,
 * cancellation, stop strings and context overflow, each on both decoder backends (JS API and the
 * native addon), whose greedy tokens must be identical.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ContextOverflowError, EngineError } from '../../main/engine/errors.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { BACKEND_KINDS } from '../../main/engine/model/backend.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { argmax } from '../helpers/onnx-runner.ts';
import { mulberry32 } from '../helpers/prng.ts';
import { STORIES_BIN, STORIES_DIR } from '../helpers/paths.ts';
import { loadLlama2cForReference, ReferenceModel } from '../helpers/reference-forward.ts';

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-engine-test-'));
after(() => rmSync(cacheDir, { recursive: true, force: true }));

let reference: Promise<ReferenceModel> | null = null;

/**
 * Greedy tokens of "Once upon a time" on one backend at one max context (an engine of its own, loaded
 * and disposed here), memoized: a fixture any test may ask for in any order, never a value another
 * test recorded.
 */
const greedyRuns = new Map<string, Promise<number[]>>();
function greedyTokens(backend: (typeof BACKEND_KINDS)[number], maxContext: number, maxTokens: number): Promise<number[]> {
  const key = `${backend}/${maxContext}/${maxTokens}`;
  let p = greedyRuns.get(key);
  if (!p) {
    p = (async () => {
      const e = await Engine.load(STORIES_BIN, { cacheDir, backend, maxContext });
      try {
        return (await run(e, { prompt: 'Once upon a time', maxTokens, sampler: GREEDY, ignoreEos: true })).tokens;
      } finally {
        await e.dispose();
      }
    })();
    greedyRuns.set(key, p);
  }
  return p;
}

/** The float64 reference's greedy continuation (one reference model, built once for both backends). */
async function referenceTokens(prompt: number[], n: number): Promise<number[]> {
  // Weights read by the reference's own loader (test/helpers/reference-forward.ts), not the production importer.
  reference ??= Promise.resolve(loadLlama2cForReference(STORIES_BIN)).then(({ config, weights }) => new ReferenceModel(config, weights, 512));
  const ref = await reference;
  ref.reset();
  let logits = ref.forward(prompt);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(argmax(logits));
    logits = ref.forward([out[i]]);
  }
  return out;
}

async function run(e: Engine, req: GenerationRequest, onEvent?: (ev: GenerationEvent) => void, signal?: AbortSignal) {
  let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
  for await (const ev of e.generate(req, { signal })) {
    onEvent?.(ev);
    if (ev.type === 'done') done = ev;
  }
  assert.ok(done, 'generation ended without a done event');
  return done;
}

const isPow2 = (n: number) => n > 0 && (n & (n - 1)) === 0;

/** The README's quote of llama2.c run.c's greedy output, without the blockquote's line breaks. */
function llama2cReferenceText(): string {
  const readme = readFileSync(path.join(STORIES_DIR, 'README.md'), 'utf8');
  const quote = readme
    .split('\n')
    .filter((l) => l.startsWith('> '))
    .map((l) => l.slice(2).trim())
    .join(' ');
  assert.ok(quote.startsWith('Once upon a time'), `README quote not found: ${quote.slice(0, 80)}`);
  return quote;
}

for (const backend of BACKEND_KINDS) {
  describe(`stories260K on the ${backend} backend`, () => {
    let engine: Engine;
    before(async () => {
      engine = await Engine.load(STORIES_BIN, { cacheDir, backend });
      assert.equal(engine.info.backend, backend, String(engine.info.fallbackReason));
    });
    after(async () => {
      await engine?.dispose();
    });

    test('greedy "Once upon a time" reproduces llama2.c and the reference forward pass for 120 tokens', async () => {
      engine.reset();
      const done = await run(engine, { prompt: 'Once upon a time', maxTokens: 120, sampler: GREEDY, ignoreEos: true });
      assert.equal(done.tokens.length, 120);
      const reference = llama2cReferenceText();
      const full = `Once upon a time${done.text}`;
      assert.equal(full.slice(0, reference.length), reference);

      // Token by token against the independent float64 forward pass (written from the papers).
      const refTokens = await referenceTokens(done.promptTokens, 120);
      const firstDiff = refTokens.findIndex((t, i) => t !== done.tokens[i]);
      assert.ok(firstDiff === -1 || firstDiff >= 100, `engine and reference diverge at generated token ${firstDiff}`);
    });

    test('first seed: max context 2048, one token at a time past 512 and 1024, capacity is a power of two ≥ P + T', async () => {
      const big = await Engine.load(STORIES_BIN, { cacheDir, backend, maxContext: 2048 });
      try {
        const seen = new Set<number>();
        const done = await run(big, { prompt: 'Once upon a time', maxTokens: 5000, sampler: GREEDY, ignoreEos: true }, (ev) => {
          if (ev.type !== 'token') return;
          // After each step the caches hold P tokens and must cover them (P + T checked, not T).
          const P = big.kv.length;
          for (const s of [big.rope.stats, big.kv.stats]) {
            assert.ok(s.capacity >= P, `capacity ${s.capacity} < P ${P}`);
            assert.ok(s.capacity <= 2048, `capacity ${s.capacity} > max context`);
            assert.ok(isPow2(s.capacity), `capacity ${s.capacity} is not a power of two`);
          }
          seen.add(big.rope.stats.capacity);
        });
        assert.equal(done.reason, 'context-full');
        // Prompt + generated fill the max context exactly; the last token is emitted, not fed.
        assert.equal(done.tokens.length, 2048 - done.promptTokens.length);
        assert.equal(done.stats.contextUsed, 2047);
        for (const c of [512, 1024, 2048]) assert.ok(seen.has(c), `never grew to ${c}: ${[...seen]}`);
        // Each row computed once, no more.
        assert.equal(big.rope.stats.rowsComputed, 2048);
        assert.equal(big.rope.stats.capacity, 2048);
        // One more position than the max is a typed error, and leaves both caches usable.
        const before = { ...big.rope.stats };
        assert.throws(() => big.rope.ensure(2049), (e) => e instanceof ContextOverflowError && e.requested === 2049 && e.maxContext === 2048);
        assert.throws(() => big.kv.ensure(2049), ContextOverflowError);
        assert.deepEqual(big.rope.stats, before);
        const again = await run(big, { prompt: 'Once upon a time', maxTokens: 3, sampler: GREEDY });
        assert.deepEqual(again.tokens, done.tokens.slice(0, 3));
      } finally {
        await big.dispose();
      }
    });

    test('second seed: after warm-up, 200 decode steps compute no RoPE rows and allocate no RoPE buffers', async () => {
      engine.reset();
      // ~300-token prompt: prefill grows the caches to 512, then 200 decode steps stay inside.
      const prompt = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. '.repeat(9);
      let warm: { rows: number; growths: number; cos: ArrayBufferLike; kvGrowths: number; kvBuf: ArrayBufferLike | null } | null = null;
      let steps = 0;
      const done = await run(engine, { prompt, maxTokens: 201, sampler: GREEDY, ignoreEos: true }, (ev) => {
        if (ev.type !== 'token') return;
        const snapshot = {
          rows: engine.rope.stats.rowsComputed,
          growths: engine.rope.stats.growths,
          cos: engine.rope.rows(0, 1).cos.buffer,
          kvGrowths: engine.kv.stats.growths,
          // The JS backend's KV buffers are the KvCache's; the native ones are the addon's (kvGrowths).
          kvBuf: engine.kv.hostBuffers ? engine.kv.key(0).buffer : null,
        };
        if (!warm) {
          warm = snapshot;
          return;
        }
        steps++;
        assert.equal(snapshot.rows, warm.rows, `step ${steps}: RoPE rows were computed on a warm step`);
        assert.equal(snapshot.growths, warm.growths);
        assert.equal(snapshot.cos, warm.cos, `step ${steps}: a new RoPE buffer was allocated`);
        assert.equal(snapshot.kvGrowths, warm.kvGrowths);
        assert.equal(snapshot.kvBuf, warm.kvBuf, `step ${steps}: the KV cache was reallocated`);
      });
      assert.equal(steps, 200);
      assert.ok(done.promptTokens.length > 256 && done.promptTokens.length + 201 < 512, `prompt has ${done.promptTokens.length} tokens`);
      assert.equal(engine.rope.stats.capacity, 512);
    });

    test('a prompt that ends at a capacity (16 tokens) grows in its prefill to 32, room for the token it samples: the first decode step grows nothing (was: a copy of every held row at that step)', async () => {
      let prompt = 'Once upon a time';
      let promptTokens = 0;
      for (let k = 0; k < 20 && promptTokens !== 16; k++, prompt += ' the') {
        engine.reset();
        promptTokens = (await run(engine, { prompt, maxTokens: 1, sampler: GREEDY })).promptTokens.length;
        if (promptTokens === 16) break;
      }
      assert.equal(promptTokens, 16, 'a 16-token prompt found');
      engine.reset();
      const kvBefore = engine.kv.stats.growths;
      const seen: { kv: number; rope: number; capacity: number }[] = [];
      await run(engine, { prompt, maxTokens: 3, sampler: GREEDY, ignoreEos: true }, (ev) => {
        if (ev.type === 'token') seen.push({ kv: engine.kv.stats.growths, rope: engine.rope.stats.growths, capacity: engine.kv.capacity });
      });
      assert.equal(seen.length, 3);
      assert.ok(seen[0].capacity >= 32, `after the prefill the KV capacity is ${seen[0].capacity}`);
      assert.deepEqual(seen[1], seen[0], 'the first decode step (position 16) grew nothing');
      assert.deepEqual(seen[2], seen[0]);
      assert.ok(seen[0].kv >= kvBefore);
    });

    test('prefix reuse: a follow-up that extends the last sequence prefills only the new tokens, with the same result', async () => {
      engine.reset();
      const first = await run(engine, { prompt: 'Once upon a time', maxTokens: 40, sampler: GREEDY });
      const followUp = `Once upon a time${first.text} Then the dog`;
      const reused = await run(engine, { prompt: followUp, maxTokens: 20, sampler: GREEDY });
      assert.ok(reused.stats.reusedTokens >= first.promptTokens.length + first.tokens.length - 2, `reused only ${reused.stats.reusedTokens}`);
      engine.reset();
      const fresh = await run(engine, { prompt: followUp, maxTokens: 20, sampler: GREEDY });
      assert.equal(fresh.stats.reusedTokens, 0);
      assert.deepEqual(reused.tokens, fresh.tokens);
    });

    test('cancellation ends with done { reason: cancelled } and the partial answer', async () => {
      engine.reset();
      const ac = new AbortController();
      let tokens = 0;
      const done = await run(engine, { prompt: 'Once upon a time', maxTokens: 200, sampler: GREEDY, ignoreEos: true }, (ev) => {
        if (ev.type === 'token' && ++tokens === 5) ac.abort();
      }, ac.signal);
      assert.equal(done.reason, 'cancelled');
      assert.equal(done.tokens.length, 5);
      assert.ok(done.text.length > 0);
    });

    test('a cancel during prefill: the stats count the prompt tokens actually run, and no token means no TTFT', async () => {
      const chunked = await Engine.load(STORIES_BIN, { cacheDir, backend, prefillChunk: 8 });
      try {
        const ac = new AbortController();
        const prompt = 'Once upon a time, there was a little girl named Lily who loved to play outside in the park with her friends.';
        const done = await run(chunked, { prompt, maxTokens: 4, sampler: GREEDY }, (ev) => ev.type === 'prefill' && ev.processed >= 16 && ac.abort(), ac.signal);
        assert.equal(done.reason, 'cancelled');
        assert.ok(done.promptTokens.length > 24, `${done.promptTokens.length} prompt tokens`);
        assert.equal(done.stats.prefilledTokens, 16, 'two chunks of 8 ran, not the whole prompt');
        assert.equal(done.stats.contextUsed, 16);
        assert.equal(done.stats.generatedTokens, 0);
        assert.equal(done.stats.ttftMs, 0);
      } finally {
        await chunked.dispose();
      }
    });

    test('a stop string ends generation before the stop text', async () => {
      engine.reset();
      const done = await run(engine, { prompt: 'Once upon a time', maxTokens: 100, sampler: GREEDY, stop: ['Lily'] });
      assert.equal(done.reason, 'stop');
      assert.equal(done.text, ', there was a little girl named ');
    });

    test('stop strings never take text back: issue 9\'s "girl" (tokens " g", "ir", "l") and random stops from the greedy text', async () => {
      const deltasOf = async (stop: string[], maxTokens = 30) => {
        engine.reset();
        const deltas: string[] = [];
        const done = await run(engine, { prompt: 'Once upon a time', maxTokens, sampler: GREEDY, stop }, (ev) => ev.type === 'token' && deltas.push(ev.text));
        return { deltas, done };
      };
      const girl = await deltasOf(['girl']);
      assert.equal(girl.done.reason, 'stop');
      assert.equal(girl.done.text, ', there was a little ');
      assert.equal(girl.deltas.join(''), girl.done.text, `deltas ${JSON.stringify(girl.deltas)}`);

      const { done: free } = await deltasOf([], 60);
      const reference = free.text;
      const rand = mulberry32(260);
      const chars = Array.from(reference);
      for (let trial = 0; trial < 6; trial++) {
        const stops = Array.from({ length: 1 + (trial % 3) }, () => {
          const start = Math.floor(rand() * (chars.length - 8));
          return chars.slice(start, start + 2 + Math.floor(rand() * 6)).join('');
        });
        if (trial % 2) stops.push(`${stops[0]}🦙`, stops[0].slice(0, -1)); // absent one; a prefix of another
        const { deltas, done } = await deltasOf(stops, 60);
        const why = JSON.stringify({ stops, deltas });
        assert.equal(deltas.join(''), done.text, why);
        assert.equal(done.reason, 'stop', why);
        assert.ok(reference.startsWith(done.text), why);
        assert.ok(stops.some((stop) => reference.startsWith(stop, done.text.length)), `the text does not end where a stop string starts: ${why}`);
      }
    });

    test('a prompt longer than the max context is a typed error before anything runs; the engine stays usable', async () => {
      const small = await Engine.load(STORIES_BIN, { cacheDir, backend, maxContext: 16 });
      try {
        const long = 'Once upon a time, there was a little girl named Lily who loved to play.';
        await assert.rejects(
          run(small, { prompt: long, maxTokens: 4, sampler: GREEDY }),
          (e) => e instanceof ContextOverflowError && e.maxContext === 16 && e.requested > 16 && /16/.test(e.message),
        );
        const ok = await run(small, { prompt: 'Once upon a time', maxTokens: 100, sampler: GREEDY, ignoreEos: true });
        assert.equal(ok.reason, 'context-full');
        assert.equal(ok.stats.contextUsed, 15);
        assert.equal(ok.stats.promptTokens + ok.stats.generatedTokens, 16, 'prompt + generated = the max context, never one more');
      } finally {
        await small.dispose();
      }
    });

    test('bad generation options are rejected with InvalidOptionError quoting the value', async () => {
      await assert.rejects(run(engine, { prompt: 'x', maxTokens: 0, sampler: GREEDY }), (e) => e instanceof EngineError && e.code === 'INVALID_OPTION' && /0/.test(e.message));
      await assert.rejects(run(engine, { prompt: 'x', maxTokens: 5, sampler: { ...GREEDY, topP: 2 } }), (e) => e instanceof EngineError && /2/.test(e.message));
      await assert.rejects(run(engine, { prompt: '', maxTokens: 5, sampler: GREEDY }), (e) => e instanceof EngineError && /empty/.test(e.message));
    });
  });
}

test('greedy tokens are identical on both backends: the 120-token golden and the run to max context 2048', async () => {
  const [a, b] = await Promise.all(BACKEND_KINDS.map((k) => greedyTokens(k, 512, 120)));
  assert.equal(a.length, 120);
  assert.deepEqual(b, a);
  const [longA, longB] = await Promise.all(BACKEND_KINDS.map((k) => greedyTokens(k, 2048, 5000)));
  assert.ok(longA.length > 2000, `long run has ${longA.length} tokens`);
  assert.deepEqual(longB, longA);
});
