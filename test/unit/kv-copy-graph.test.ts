/**
 * The native addon's KV copy graph (main/engine/model/kv-copy-graph.ts) on ONNX Runtime's CPU
 * provider, through onnxruntime-node: rows [0, n) of every head kept, the rest zero up to the new
 * capacity, in float32 and float16; a save (C = n) is the compact rows. The expected tensors are
 * written out by hand from the input, not by the graph.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import ort from 'onnxruntime-node';
import { floatsToHalves, halfToFloat } from '../../main/engine/model/gguf/quants.ts';
import { buildKvCopyGraph, KV_COPY_IO } from '../../main/engine/model/kv-copy-graph.ts';

/** src [1, H=2, S=3, D=2]: value 100·h + 10·s + d. */
const H = 2;
const S = 3;
const D = 2;
const src = Float32Array.from({ length: H * S * D }, (_, i) => 100 * Math.floor(i / (S * D)) + 10 * Math.floor((i % (S * D)) / D) + (i % D));

async function copy(dtype: 'float32' | 'float16', rows: number, capacity: number): Promise<number[]> {
  const session = await ort.InferenceSession.create(buildKvCopyGraph(dtype));
  try {
    const data = dtype === 'float32' ? src : floatsToHalves(src); // float16 tensors are Uint16Array bits on Node 20
    const out = await session.run({
      [KV_COPY_IO.src]: new ort.Tensor(dtype, data, [1, H, S, D]),
      [KV_COPY_IO.ends]: new ort.Tensor('int64', BigInt64Array.from([BigInt(rows)]), [1]),
      [KV_COPY_IO.pads]: new ort.Tensor('int64', BigInt64Array.from([0, 0, 0, 0, 0, 0, capacity - rows, 0].map(BigInt)), [8]),
    });
    const dst = out[KV_COPY_IO.dst];
    assert.deepEqual(dst.dims, [1, H, capacity, D]);
    return Array.from(dst.data as ArrayLike<number>, dtype === 'float32' ? Number : halfToFloat);
  } finally {
    await session.release();
  }
}

test('growth: rows [0, 2) of each head kept, rows 2 … 4 zero (capacity 5)', async () => {
  const want = [0, 1, 10, 11, 0, 0, 0, 0, 0, 0, 100, 101, 110, 111, 0, 0, 0, 0, 0, 0];
  assert.deepEqual(await copy('float32', 2, 5), want);
});

test('save: the compact rows [0, 3) (capacity = rows), float16 KV', async () => {
  assert.deepEqual(await copy('float16', 3, 3), [0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121]);
});

test('restore from one zero row (how the addon zeroes a fresh device tensor) and a copy of one row', async () => {
  assert.deepEqual(await copy('float32', 1, 2), [0, 1, 0, 0, 100, 101, 0, 0]);
});
