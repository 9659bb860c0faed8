/**
 * The memory refusal's advice (main/engine/model/memory.ts, issue 19 item 7): at a max context
 * that does not fit it names the largest that does (the same estimate the load uses), offers
 * 4-bit weights only for float weights (a Q4_K_M GGUF was told `--quantize q4`), and says it
 * once (the load advice adds no second sentence).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { checkMemory, estimateForShape, largestFittingContext, weightsQuantized } from '../../main/engine/model/memory.ts';

/** Qwen3-0.6B's attention shape: 28 layers, 8 KV heads of 128, rotary dim 128. */
const QWEN3 = { numLayers: 28, numKvHeads: 8, headDim: 128, rope: { rotaryDim: 128 } };
const GIB = 2 ** 30;
const Q4_WEIGHTS = 0.45 * GIB;

function refusal(quantized: boolean, available: number, maxContext = 131_072, weights = Q4_WEIGHTS, offerHalfKv = false): string {
  const e = estimateForShape(QWEN3, weights, maxContext);
  try {
    checkMemory(e, maxContext, available, '/models/qwen3.gguf', quantized, offerHalfKv);
  } catch (err) {
    assert.ok(err instanceof ModelLoadError);
    return err.message;
  }
  throw new Error('expected a refusal');
}

test('KV 28 GiB at 131,072 positions in 8 GiB: the largest max context that fits, and no quantize advice for 4-bit weights', () => {
  const e = estimateForShape(QWEN3, Q4_WEIGHTS, 131_072);
  assert.equal(e.kvCacheBytes, 229_376 * 131_072, '28.0 GiB');
  const fits = largestFittingContext(e, 131_072, 8 * GIB);
  // (8 − 0.45) GiB over 229,376 + 512 bytes a position = 35,262 positions, down to a multiple of 256.
  assert.equal(fits, 35_072);
  assert.ok(estimateForShape(QWEN3, Q4_WEIGHTS, fits).totalBytes <= 8 * GIB, 'it does fit');
  assert.ok(estimateForShape(QWEN3, Q4_WEIGHTS, fits + 256).totalBytes > 8 * GIB, 'the next step does not');
  const message = refusal(true, 8 * GIB);
  assert.match(message, /KV cache 28\.00 GiB at max context 131072\) but only 8\.00 GiB of memory is available; set the max context to 35072 or less \(\/models\/qwen3\.gguf\)$/);
  assert.doesNotMatch(message, /quantize|4-bit/i, 'the weights are 4-bit already');
  assert.equal(message.match(/max context to/g)?.length, 1, 'said once');
});

test('float weights are offered 4-bit weights, in the window\'s words and the terminal\'s', () => {
  const message = refusal(false, 8 * GIB, 131_072, 2.3 * GIB);
  assert.match(message, /; set the max context to \d+ or less, or open it with 4-bit weights \(Weights: Quantize to 4 bits; in the terminal --quantize q4\)/);
});

test('a float32 KV cache that fits at float16: the KV cache setting is offered, where it would fit', () => {
  // 131,072 positions: float32 KV 28.0 GiB, float16 14.0 GiB; 0.45 GiB of weights and 64 MiB of RoPE rows.
  const halfFits = refusal(true, 16 * GIB, 131_072, Q4_WEIGHTS, true);
  assert.match(halfFits, /; set the max context to \d+ or less, or set the KV cache to float16 \(half its bytes: KV cache setting; in the terminal --kv-cache float16\) \(/);
  assert.ok(estimateForShape(QWEN3, Q4_WEIGHTS, 131_072, 'float16').totalBytes <= 16 * GIB, 'float16 does fit');
  assert.doesNotMatch(refusal(true, 8 * GIB, 131_072, Q4_WEIGHTS, true), /float16/, 'float16 would not fit 8 GiB either');
  assert.doesNotMatch(refusal(true, 16 * GIB, 131_072, Q4_WEIGHTS, false), /float16/, 'not offered where the KV is float16 already, or the graph keeps its own');
});

test('weights that alone do not fit: no max context helps', () => {
  assert.match(refusal(true, 0.3 * GIB), /; its weights alone do not fit; choose a smaller model/);
  assert.match(refusal(false, 0.3 * GIB), /; its weights alone do not fit; open it with 4-bit weights .* or choose a smaller model/);
});

test('weightsQuantized: any stored format but the float ones', () => {
  assert.equal(weightsQuantized({ counts: { float32: 13, 'q4 (Q4_K)': 196 } }), true);
  assert.equal(weightsQuantized({ counts: { float32: 13, float16: 2 } }), false);
  assert.equal(weightsQuantized(undefined), false);
});
