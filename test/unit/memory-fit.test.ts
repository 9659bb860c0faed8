/**
 * The window's memory estimate for another max context (main/contract/memory-fit.ts) is the
 * load's own (main/engine/model/memory.ts): for model shapes and memory sizes, `memoryAt` gives
 * estimateForShape's total and fit, and `largestFittingContext` the same bound checkMemory names;
 * and the Max context field's line, for Qwen3-0.6B at 131,072 positions (the 28.0 GiB).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { largestFittingContext, maxContextMemoryNote, memoryAt, type MemoryFacts } from '../../main/contract/memory-fit.ts';
import { estimateForShape, largestFittingContext as engineLargest } from '../../main/engine/model/memory.ts';

const GIB = 2 ** 30;
const GEMMA3_WINDOWS = Array.from({ length: 34 }, (_, i) => ((i + 1) % 6 === 0 ? 0 : 1024));
const SHAPES = [
  { name: 'stories260K', numLayers: 5, numKvHeads: 4, headDim: 8, rope: { rotaryDim: 8 }, weights: 1_171_200 },
  { name: 'Qwen3-0.6B', numLayers: 28, numKvHeads: 8, headDim: 128, rope: { rotaryDim: 128 }, weights: 0.45 * GIB },
  { name: 'Llama-3-8B', numLayers: 32, numKvHeads: 8, headDim: 128, rope: { rotaryDim: 128 }, weights: 4.6 * GIB },
  // Sliding-window layers (cache/kv-window.ts): Gemma 3 4B (29 of 34 layers slide, window 1024),
  // gpt-oss-20b (every other layer, window 128).
  { name: 'Gemma-3-4B', numLayers: 34, numKvHeads: 4, headDim: 256, rope: { rotaryDim: 256 }, weights: 2.5 * GIB, slidingWindow: GEMMA3_WINDOWS },
  { name: 'gpt-oss-20b', numLayers: 24, numKvHeads: 8, headDim: 64, rope: { rotaryDim: 64 }, weights: 12 * GIB, slidingWindow: Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? 128 : 0)) },
];

/** The facts the engine reports at load (engine.ts Engine.open), from its estimate at `loadedAt`. */
function factsOf(shape: (typeof SHAPES)[number], loadedAt: number, available: number): MemoryFacts {
  const e = estimateForShape(shape, shape.weights, loadedAt);
  const windowBytes = e.window ? e.window.bytesPerPosition * Math.min(loadedAt, e.window.rows) : 0;
  return {
    weightBytes: e.weightBytes, kvBytesPerPosition: (e.kvCacheBytes - windowBytes) / loadedAt, ropeBytesPerPosition: e.ropeCacheBytes / loadedAt, availableBytes: available,
    ...(e.window ? { windowKvBytesPerPosition: e.window.bytesPerPosition, windowRows: e.window.rows } : {}),
  };
}

test('the same estimate as the load: total, fit and the largest max context, for each shape', () => {
  for (const shape of SHAPES) {
    for (const available of [0.01 * GIB, 1 * GIB, 8 * GIB, 64 * GIB]) {
      const facts = factsOf(shape, 4096, available);
      for (const n of [16, 512, 4096, 32_768, 131_072]) {
        const engine = estimateForShape(shape, shape.weights, n);
        const here = memoryAt(facts, n);
        assert.equal(here.totalBytes, engine.totalBytes, `${shape.name} at ${n}`);
        assert.equal(here.kvCacheBytes, engine.kvCacheBytes);
        assert.equal(here.fits, engine.totalBytes <= available);
      }
      assert.equal(largestFittingContext(facts), engineLargest(estimateForShape(shape, shape.weights, 4096), 4096, available), `${shape.name} in ${available}`);
    }
  }
});

test("the Max context field's line: the KV cache at the typed value, and what fits", () => {
  const qwen = factsOf(SHAPES[1], 40_960, 8 * GIB);
  assert.equal(
    maxContextMemoryNote(qwen, 131_072),
    'KV cache at 131,072 positions: 28.0 GiB; with the weights and RoPE tables 28.5 GiB of 8.0 GiB available: does not fit (35,072 or less does)',
  );
  assert.equal(maxContextMemoryNote(qwen, 4096), 'KV cache at 4,096 positions: 896.0 MiB; with the weights and RoPE tables 1.3 GiB of 8.0 GiB available: fits');
  assert.match(maxContextMemoryNote({ ...qwen, availableBytes: 0.2 * GIB }, 4096), /does not fit \(the weights alone do not\)$/);
});

test('sliding-window layers count min(context, H + S) positions: Gemma 3 4B at 131,072 needs 5.28 GiB of KV, not 34 GiB', () => {
  const row = 2 * 4 * 256 * 4; // key + value, 4 KV heads of 256, float32: bytes per layer and position
  const bound = 1023 + 256; // H = W − 1, S = max(256, ⌈H / 4⌉)
  const shape = SHAPES.find((s) => s.name === 'Gemma-3-4B')!;
  for (const n of [512, 1279, 4096, 131_072]) {
    assert.equal(estimateForShape(shape, 0, n).kvCacheBytes, 5 * row * n + 29 * row * Math.min(n, bound), `at ${n}`);
  }
  assert.equal((estimateForShape(shape, 0, 131_072).kvCacheBytes / GIB).toFixed(2), '5.28');
  // Where the bound passes the context, nothing is bounded: every layer holds every position.
  assert.equal(estimateForShape(shape, 0, 1024).kvCacheBytes, 34 * row * 1024);
  // The largest fitting context goes past the bound once the windowed layers are paid for.
  const e = estimateForShape(shape, 2.5 * GIB, 131_072);
  const fits = engineLargest(e, 131_072, 4 * GIB);
  const total = (n: number) => 2.5 * GIB + 5 * row * n + 29 * row * Math.min(n, bound) + n * 256 * 4;
  assert.ok(total(fits) <= 4 * GIB && total(fits + 256) > 4 * GIB, `${fits}`);
});
