/**
 * The KV cache's dtype: the memory estimate and the meter's KV bytes follow it (float16 halves
 * them), and a float16 KvCache keeps its rows as float16 bits through growth, snapshot/restore
 * (float32 snapshots, exact for float16 values) and a context shift's key rotation (rounded to
 * float16 once). Also float32 → float16 conversion (`floatToHalf`) against its definition.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { floatToHalf, halfToFloat } from '../../main/engine/model/gguf/quants.ts';
import type { ModelManifest } from '../../main/engine/model/manifest.ts';
import { estimateMemory, kvBytesPerPosition } from '../../main/engine/model/memory.ts';

/** Qwen3-0.6B's shapes (its config.json: 28 layers, 8 KV heads, head_dim 128). */
const QWEN3_06B = { numLayers: 28, numKvHeads: 8, headDim: 128 };

test('KV bytes per position follow the KV dtype: Qwen3-0.6B shapes 229 KB float32 → 115 KB float16', () => {
  assert.equal(kvBytesPerPosition(QWEN3_06B), 229_376);
  assert.equal(kvBytesPerPosition(QWEN3_06B, 'float16'), 114_688);
  assert.equal(Math.round(kvBytesPerPosition(QWEN3_06B) / 1000), 229);
  assert.equal(Math.round(kvBytesPerPosition(QWEN3_06B, 'float16') / 1000), 115);
});

test('the memory estimate counts the KV cache in the manifest dtype', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-kv-dtype-'));
  try {
    const config = { ...QWEN3_06B, rope: { rotaryDim: 128 } } as ModelManifest['config'];
    const manifest = (dtype: 'float32' | 'float16') => ({ config, dtype, weights: { bytes: 1000 } }) as unknown as ModelManifest;
    const f32 = await estimateMemory(manifest('float32'), dir, 4096);
    const f16 = await estimateMemory(manifest('float16'), dir, 4096);
    assert.equal(f32.kvCacheBytes, 229_376 * 4096);
    assert.equal(f16.kvCacheBytes, 114_688 * 4096);
    assert.equal(f32.totalBytes - f16.totalBytes, 114_688 * 4096);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the meter's KV bytes (KvCache.stats.bytes) halve for float16, host buffers or not", () => {
  for (const hostBuffers of [true, false]) {
    const f32 = new KvCache({ ...QWEN3_06B, maxContext: 64, hostBuffers });
    const f16 = new KvCache({ ...QWEN3_06B, maxContext: 64, hostBuffers, dtype: 'float16' });
    f32.ensure(10);
    f16.ensure(10);
    assert.equal(f32.stats.bytes, 16 * 229_376);
    assert.equal(f16.stats.bytes, 16 * 114_688);
  }
  assert.throws(() => new KvCache({ ...QWEN3_06B, maxContext: 8, dtype: 'bfloat16' as 'float16' }), (e) => e instanceof InvalidOptionError && /"bfloat16"/.test(e.message));
});

test('a float16 KvCache keeps float16 rows through growth, snapshot/restore and a rotated shift', () => {
  const kv = new KvCache({ numLayers: 1, numKvHeads: 1, headDim: 4, maxContext: 16, dtype: 'float16' });
  kv.ensure(3);
  const key = kv.key(0);
  assert.ok(key instanceof Uint16Array);
  const rows = [1, 2, 3, 4, 0.5, -1.5, 2.25, 1e-3, 7, 8, -9, 65504];
  rows.forEach((v, i) => (key[i] = floatToHalf(v)));
  kv.value(0).set(rows.map((v) => floatToHalf(-v)));
  kv.commit(3);
  kv.ensure(5); // grows: rows copied at the new stride, as bits
  assert.deepEqual(Array.from(kv.key(0).subarray(0, 12), halfToFloat), rows.map((v) => halfToFloat(floatToHalf(v))));
  const snap = kv.snapshot();
  assert.deepEqual(Array.from(snap.subarray(0, 12)), rows.map((v) => halfToFloat(floatToHalf(v))));
  kv.reset();
  kv.restore(snap, 3);
  assert.deepEqual(Array.from(kv.key(0).subarray(0, 12)), rows.map(floatToHalf));
  // Drop position 0; rows 1, 2 move down and their keys rotate by (cos, sin) on one pair (interleaved).
  const c = Math.cos(0.3);
  const s = Math.sin(0.3);
  kv.discard(0, 1, { cos: new Float32Array([c, 0]), sin: new Float32Array([s, 0]), rotaryDim: 4, interleaved: true });
  const k = kv.key(0);
  const rot = (a: number, b: number) => [floatToHalf(a * Math.fround(c) + b * Math.fround(s)), floatToHalf(b * Math.fround(c) - a * Math.fround(s))];
  assert.deepEqual(Array.from(k.subarray(0, 2)), rot(halfToFloat(floatToHalf(0.5)), -1.5));
  assert.deepEqual(Array.from(k.subarray(4, 6)), rot(7, 8));
  assert.equal(kv.length, 2);
});

test('floatToHalf rounds to nearest even, overflows to Infinity, keeps subnormals (every float16 round-trips)', () => {
  for (let h = 0; h < 65536; h++) {
    if ((h & 0x7c00) === 0x7c00 && h & 0x3ff) continue; // NaN payloads
    assert.equal(floatToHalf(halfToFloat(h)), h, `bits 0x${h.toString(16)}`);
  }
  assert.equal(floatToHalf(1 + 2 ** -11), 0x3c00); // tie → even (1.0)
  assert.equal(floatToHalf(1 + 3 * 2 ** -11), 0x3c02); // tie → even (1 + 2^-9)
  assert.equal(floatToHalf(65519), 0x7bff); // rounds down to 65504
  assert.equal(floatToHalf(65520), 0x7c00); // rounds up to Infinity
  assert.equal(floatToHalf(-(2 ** -25)), 0x8000); // tie between −0 and the smallest subnormal → −0
  assert.equal(floatToHalf(3 * 2 ** -25), 0x0002); // subnormal tie → even
  assert.equal(floatToHalf(NaN) & 0x7e00, 0x7e00);
});
