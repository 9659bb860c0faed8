/**
 * `recenteredZeroPoints` (main/engine/model/quantized-matmul.ts): a weight with block offsets
 * (value = d·q + m, zero points 0, as Q5_1 / Q4_1 / Q5_K / Q4_K map to MatMulNBits) rewritten as
 * d·(q − z) + r gives the same value for every q, with |r| ≤ |d| / 2 where z is in range, 4-bit
 * zero points packed two a byte per row, and non-zero zero points refused.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { recenteredZeroPoints } from '../../main/engine/model/quantized-matmul.ts';

/** Blocks of [2, 96] (3 per row, block 32): typical Q5_1 mins, a zero scale, a min past the range. */
const scales = new Float32Array([0.02, 0.5, 0.001, 0, 0.03, 1.5]);
const offsets = new Float32Array([-0.33, -7.9, -0.0151, 0.25, 0.1, -1000]);

test('8-bit: every value d·q + m equals d·(q − z) + r, |r| <= |d| / 2 where z is in range', () => {
  const w = { shape: [2, 96] as [number, number], bits: 8 as const, blockSize: 32, scales, zeroPoints: new Uint8Array(6), blockOffsets: offsets };
  const { zeroPoints, offsets: r } = recenteredZeroPoints(w);
  assert.deepEqual([...zeroPoints], [17, 16, 15, 0, 0, 255]);
  for (let i = 0; i < 6; i++) {
    for (let q = 0; q < 32; q++) {
      const before = scales[i] * q + offsets[i];
      const after = scales[i] * (q - zeroPoints[i]) + r[i];
      assert.ok(Math.abs(after - before) <= 1e-6 * Math.max(1, Math.abs(before)), `block ${i}, q ${q}: ${after} != ${before}`);
    }
    if (zeroPoints[i] > 0 && zeroPoints[i] < 255) assert.ok(Math.abs(r[i]) <= scales[i] / 2 + 1e-9, `block ${i}: residual ${r[i]}`);
  }
  assert.equal(r[3], 0.25, 'a zero scale keeps its offset');
});

test('4-bit: zero points clamped to 0..15 and packed two a byte per row, low nibble first', () => {
  const w = { shape: [2, 96] as [number, number], bits: 4 as const, blockSize: 32, scales, zeroPoints: new Uint8Array(4), blockOffsets: offsets };
  const { zeroPoints } = recenteredZeroPoints(w);
  // row 0: z = 15 (17 clamped), 15 (16 clamped), 15; row 1: 0, 0, 15 (255 clamped).
  assert.deepEqual([...zeroPoints], [15 | (15 << 4), 15, 0, 15]);
});

test('non-zero zero points are refused, quoting the bits', () => {
  const w = { shape: [2, 96] as [number, number], bits: 8 as const, blockSize: 32, scales, zeroPoints: new Uint8Array([0, 3, 0, 0, 0, 0]), blockOffsets: offsets };
  assert.throws(() => recenteredZeroPoints(w), (e: unknown) => e instanceof ModelLoadError && /8-bit weight with block offsets has non-zero zero points/.test(e.message));
});
