/**
 * Safetensors reader/writer: float16/bfloat16 conversions against values worked out by hand,
 * file round trips in F32/F16/BF16, reads in chunks, a hand-built file read without the writer, and corrupt or
 * unsupported files rejected with a ModelLoadError that names the file and tensor, before any
 * tensor-sized allocation.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  openSafetensors,
  readSafetensors,
  writeSafetensors,
} from '../../main/engine/model/safetensors.ts';
import { countAllocations } from '../helpers/allocation-counter.ts';
import { rawSafetensors } from '../helpers/synthetic-hf.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'ropewalk-st-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Asserts `p` rejects with a ModelLoadError whose message contains every string in `parts`. */
async function rejectsWith(p: Promise<unknown>, ...parts: string[]): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof ModelLoadError, `expected ModelLoadError, got ${String(e)}`);
    for (const s of parts) assert.ok(e.message.includes(s), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(s)}`);
    return true;
  });
}

describe('float16 conversions', () => {
  it('encodes hand-computed values, rounding to nearest even', () => {
    const cases: [number, number][] = [
      [1.0, 0x3c00],
      [-2.5, 0xc100],
      [65504, 0x7bff], // largest finite half
      [65519, 0x7bff], // just below the midpoint to 65536
      [65520, 0x7c00], // the midpoint rounds to even: overflow to +Infinity
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [1023 * 2 ** -24, 0x03ff], // largest subnormal
      [2 ** -25, 0x0000], // half the smallest subnormal: tie, rounds to even 0
      [1.5 * 2 ** -25, 0x0001],
      [1 + 2 ** -11, 0x3c00], // tie between 1 and 1+2^-10: even mantissa wins
      [1 + 3 * 2 ** -11, 0x3c02], // tie between mantissa 1 and 2: even (2) wins
      [0, 0x0000],
      [-0, 0x8000],
      [Infinity, 0x7c00],
      [-Infinity, 0xfc00],
      [1e-10, 0x0000],
      [1e10, 0x7c00],
    ];
    for (const [x, bits] of cases) assert.equal(f32ToF16Bits(x), bits, `f16(${x})`);
    const nan = f32ToF16Bits(NaN);
    assert.equal(nan & 0x7c00, 0x7c00);
    assert.notEqual(nan & 0x3ff, 0);
  });

  it('decodes normals, subnormals, zeros, infinities and NaN', () => {
    assert.equal(f16BitsToF32(0x3c00), 1);
    assert.equal(f16BitsToF32(0xc100), -2.5);
    assert.equal(f16BitsToF32(0x7bff), 65504);
    assert.equal(f16BitsToF32(0x0001), 2 ** -24);
    assert.equal(f16BitsToF32(0x03ff), 1023 * 2 ** -24);
    assert.equal(f16BitsToF32(0x0400), 2 ** -14);
    assert.ok(Object.is(f16BitsToF32(0x8000), -0));
    assert.equal(f16BitsToF32(0x7c00), Infinity);
    assert.equal(f16BitsToF32(0xfc00), -Infinity);
    assert.ok(Number.isNaN(f16BitsToF32(0x7e00)));
    assert.ok(Number.isNaN(f16BitsToF32(0xfc01)));
  });

  it('round-trips every finite half exactly', () => {
    for (let h = 0; h < 0x10000; h++) {
      if ((h & 0x7c00) === 0x7c00) continue;
      assert.equal(f32ToF16Bits(f16BitsToF32(h)), h);
    }
  });
});

describe('bfloat16 conversions', () => {
  it('encodes hand-computed values, rounding to nearest even', () => {
    const cases: [number, number][] = [
      [1.0, 0x3f80],
      [-2.5, 0xc020],
      [3.140625, 0x4049], // 1.5703125 · 2^1: exponent 0x80, mantissa 0b1001001
      [Math.PI, 0x4049], // f32 0x40490fdb: lower half < 0x8000 rounds down
      [65504, 0x4780], // not representable: rounds up to 65536
      [1 + 2 ** -8, 0x3f80], // f32 0x3f808000, tie: even 0x3f80
      [1 + 3 * 2 ** -8, 0x3f82], // f32 0x3f818000, tie: even 0x3f82
      [Infinity, 0x7f80],
      [-Infinity, 0xff80],
      [-0, 0x8000],
    ];
    for (const [x, bits] of cases) assert.equal(f32ToBf16Bits(x), bits, `bf16(${x})`);
    assert.ok(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN))));
  });

  it('decodes including subnormals', () => {
    assert.equal(bf16BitsToF32(0x4049), 3.140625);
    assert.equal(bf16BitsToF32(0xc020), -2.5);
    assert.equal(bf16BitsToF32(0x0001), 2 ** -133);
    assert.equal(bf16BitsToF32(0xff80), -Infinity);
    assert.ok(Number.isNaN(bf16BitsToF32(0x7fc0)));
  });
});

describe('safetensors files', () => {
  const values = Float32Array.from([1.0, -2.5, 65504, 2 ** -24, 3.140625, 0, Infinity, -Infinity]);

  it('round-trips F32 exactly, F16 and BF16 through their rounding', async () => {
    const file = path.join(dir, 'rt.safetensors');
    await writeSafetensors(file, {
      a32: { dtype: 'F32', shape: [2, 4], data: values },
      a16: { dtype: 'F16', shape: [8], data: values },
      b16: { dtype: 'BF16', shape: [4, 2], data: values },
      nan: { dtype: 'F16', shape: [1], data: Float32Array.from([NaN]) },
      empty: { dtype: 'F32', shape: [0, 3], data: new Float32Array(0) },
    }, { format: 'pt' });
    const t = await readSafetensors(file);
    assert.deepEqual([...t.keys()], ['a32', 'a16', 'b16', 'nan', 'empty']);
    assert.deepEqual(t.get('a32')!.shape, [2, 4]);
    assert.deepEqual([...t.get('a32')!.data], [...values]);
    assert.deepEqual([...t.get('a16')!.data], [...values]); // all exactly representable in f16
    assert.deepEqual(t.get('b16')!.shape, [4, 2]);
    // bf16: 65504 → 65536, 2^-24 exact (8-bit exponent), 3.140625 exact.
    assert.deepEqual([...t.get('b16')!.data], [1.0, -2.5, 65536, 2 ** -24, 3.140625, 0, Infinity, -Infinity]);
    assert.ok(Number.isNaN(t.get('nan')!.data[0]));
    assert.deepEqual(t.get('empty')!.shape, [0, 3]);
    assert.equal(t.get('empty')!.data.length, 0);
  });

  it('reads a file built by hand (unaligned data, metadata entry)', async () => {
    const data = Buffer.alloc(2 * 3 + 4 * 2);
    [0x3c00, 0xc100, 0x0001].forEach((h, i) => data.writeUInt16LE(h, i * 2)); // f16 1, -2.5, 2^-24
    data.writeFloatLE(0.5, 6);
    data.writeFloatLE(-7, 10);
    const header = {
      __metadata__: { format: 'pt' },
      h: { dtype: 'F16', shape: [3], data_offsets: [0, 6] },
      f: { dtype: 'F32', shape: [1, 2], data_offsets: [6, 14] },
    };
    const file = path.join(dir, 'hand.safetensors');
    await writeFile(file, rawSafetensors(header, data));
    const st = await openSafetensors(file);
    try {
      assert.deepEqual([...st.entries.keys()], ['h', 'f']);
      assert.deepEqual([...(await st.load('h')).data], [1, -2.5, 2 ** -24]);
      assert.deepEqual([...(await st.load('f')).data], [0.5, -7]);
      await rejectsWith(st.load('nope'), 'tensor "nope"', 'hand.safetensors');
    } finally {
      await st.close();
    }
  });

  it('reads tensors in chunks equal to load(), F32/F16/BF16, also after a pass stopped early', async () => {
    const file = path.join(dir, 'chunks.safetensors');
    const values = Float32Array.from({ length: 1000 }, (_, i) => (i % 37) - 18.5);
    await writeSafetensors(file, {
      f32: { dtype: 'F32', shape: [10, 100], data: values },
      f16: { dtype: 'F16', shape: [1000], data: values },
      bf16: { dtype: 'BF16', shape: [1000], data: values },
    });
    const st = await openSafetensors(file);
    try {
      const first = st.chunks('f32', 7)[Symbol.asyncIterator]();
      assert.deepEqual([...(await first.next()).value!], [...values.subarray(0, 7)]);
      await first.return!(undefined); // stopped with the next read in flight
      for (const name of ['f32', 'f16', 'bf16']) {
        const sizes: number[] = [];
        const got: number[] = [];
        for await (const chunk of st.chunks(name, 7)) {
          sizes.push(chunk.length);
          got.push(...chunk);
        }
        assert.deepEqual(got, [...(await st.load(name)).data], name);
        assert.deepEqual(got, [...values], name); // every value is exact in f16 and bf16
        assert.deepEqual([sizes.length, sizes.at(-1)], [143, 6], name);
      }
    } finally {
      await st.close();
    }
  });

  it('aligns the header so data starts on an 8-byte boundary', async () => {
    const file = path.join(dir, 'align.safetensors');
    await writeSafetensors(file, { x: { dtype: 'F32', shape: [1], data: Float32Array.from([2]) } });
    const st = await openSafetensors(file);
    assert.equal(st.entries.get('x')!.begin % 8, 0);
    await st.close();
  });
});

describe('corrupt and unsupported safetensors', () => {
  const write = async (name: string, bytes: Uint8Array) => {
    const file = path.join(dir, name);
    await writeFile(file, bytes);
    return file;
  };
  const one = (entry: object, dataBytes: number) => rawSafetensors({ w: entry }, new Uint8Array(dataBytes));

  it('rejects a file shorter than the length prefix', async () => {
    await rejectsWith(readSafetensors(await write('short.safetensors', new Uint8Array(5))), 'too short', 'short.safetensors');
  });

  it('rejects a header length past the end of the file or over 100 MB', async () => {
    const f1 = await write('hlen.safetensors', rawSafetensors({}, new Uint8Array(0), 1000n));
    await rejectsWith(readSafetensors(f1), 'header length 1000', 'file size', 'hlen.safetensors');
    const f2 = await write('hbig.safetensors', rawSafetensors({}, new Uint8Array(0), 2n ** 60n));
    await rejectsWith(readSafetensors(f2), 'exceeds', 'hbig.safetensors');
  });

  it('rejects a header that is not JSON', async () => {
    await rejectsWith(readSafetensors(await write('json.safetensors', rawSafetensors('{"w": {'))), 'not valid JSON', 'json.safetensors');
  });

  it('rejects a truncated file, naming the tensor', async () => {
    const file = path.join(dir, 'trunc.safetensors');
    await writeSafetensors(file, {
      first: { dtype: 'F32', shape: [4], data: new Float32Array(4) },
      last: { dtype: 'F32', shape: [4, 4], data: new Float32Array(16) },
    });
    await truncate(file, (await stat(file)).size - 20); // cuts into "last" only
    await rejectsWith(readSafetensors(file), 'tensor "last"', 'truncated', 'trunc.safetensors');
  });

  it('rejects offsets out of range or reversed, and overlapping tensors', async () => {
    const f1 = await write('oob.safetensors', one({ dtype: 'F32', shape: [4], data_offsets: [0, 16] }, 8));
    await rejectsWith(readSafetensors(f1), 'tensor "w"', 'data_offsets [0, 16]', '8 bytes', 'oob.safetensors');
    const f2 = await write('rev.safetensors', one({ dtype: 'F32', shape: [1], data_offsets: [4, 0] }, 8));
    await rejectsWith(readSafetensors(f2), 'tensor "w"', 'data_offsets', 'rev.safetensors');
    const overlap = rawSafetensors({
      a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
      b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] },
    }, new Uint8Array(12));
    await rejectsWith(readSafetensors(await write('overlap.safetensors', overlap)), 'overlaps', 'overlap.safetensors');
  });

  it('rejects a shape whose size disagrees with the offsets', async () => {
    const f = await write('shape.safetensors', one({ dtype: 'F16', shape: [3, 2], data_offsets: [0, 8] }, 8));
    await rejectsWith(readSafetensors(f), 'tensor "w"', 'shape [3, 2]', 'needs 12 bytes', 'spanning 8', 'shape.safetensors');
    const f2 = await write('shape2.safetensors', one({ dtype: 'F32', shape: [-1, 2], data_offsets: [0, 8] }, 8));
    await rejectsWith(readSafetensors(f2), 'tensor "w"', 'non-negative integers', 'shape2.safetensors');
  });

  it('rejects absurd shapes instantly, without allocating', async () => {
    const f = await write('huge.safetensors', one({ dtype: 'F32', shape: [1e6, 1e6, 1e6], data_offsets: [0, 8] }, 8));
    const { largestBytes } = await countAllocations(() => rejectsWith(readSafetensors(f), 'tensor "w"', 'shape [1000000, 1000000, 1000000]', 'elements', 'huge.safetensors'));
    assert.ok(largestBytes < 2 ** 20, `largest allocation ${largestBytes} bytes: the tensor was allocated`);
  });

  it('lists but refuses to load F64 and other dtypes', async () => {
    const data = Buffer.alloc(16);
    data.writeDoubleLE(1.5, 0);
    data.writeDoubleLE(-1, 8);
    const f = await write('f64.safetensors', rawSafetensors({ d: { dtype: 'F64', shape: [2], data_offsets: [0, 16] } }, data));
    const st = await openSafetensors(f);
    assert.equal(st.entries.get('d')!.dtype, 'F64');
    await rejectsWith(st.load('d'), 'tensor "d"', 'F64', 'F32, F16, BF16', 'f64.safetensors');
    await st.close();
    await rejectsWith(readSafetensors(f), 'F64');
    const fi = await write('i8.safetensors', one({ dtype: 'I8', shape: [3], data_offsets: [0, 3] }, 3));
    await rejectsWith(readSafetensors(fi), 'tensor "w"', 'I8', 'i8.safetensors');
  });

  it('reports a missing file as a ModelLoadError', async () => {
    await rejectsWith(readSafetensors(path.join(dir, 'absent.safetensors')), 'cannot open', 'absent.safetensors');
  });
});
