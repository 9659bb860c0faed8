/**
 * Seeded fuzzing of a small safetensors file built here (F32, F16 and BF16 tensors and a
 * `__metadata__` entry): 4,000 mutated copies — bit flips in the header and anywhere,
 * truncations, a huge or off-by-some header length, header JSON with wrong dtypes, huge,
 * negative, fractional or non-numeric shapes, data offsets past the end, reversed, overlapping
 * or missing, extra and non-object entries, and NaN/Inf data — each read whole
 * (`readSafetensors`: header validation, then every tensor). Every case ends within 5 s in a
 * typed error or a read, never an untyped exception, a hang, or resident memory growing by more
 * than 128 MB (the file is under 1 KB).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { readSafetensors, writeSafetensors } from '../../main/engine/model/safetensors.ts';
import { FuzzTally, runCase } from '../helpers/fuzz.ts';
import { mulberry32 } from '../helpers/prng.ts';

const SEED = 20261202;
const CASES = 4000;
const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-fuzz-st-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, n: number) => Math.floor(r() * n);

const BAD_DTYPES = ['F64', 'I8', 'U8', 'BOOL', 'F8_E4M3', '', 'f32', 5, null, ['F32'], { dtype: 'F32' }];
const BAD_SHAPES = [[2 ** 31, 2 ** 31], [2 ** 53], [-1], [1.5], ['x'], null, 'x', [], [0], [1e308], [2 ** 32, 0]];
const BAD_OFFSETS = (size: number) => [[0, 2 ** 53], [0, size * 2], [size, size + 4], [8, 0], [-8, 0], [0.5, 4.5], ['0', '4'], [0], null, [0, 0], [2 ** 64, 2 ** 64 + 4]];

/** Header JSON and data of `b` (a sound file). */
function split(b: Buffer): { header: Record<string, unknown>; data: Buffer } {
  const n = Number(b.readBigUInt64LE(0));
  return { header: JSON.parse(b.toString('utf8', 8, 8 + n)), data: b.subarray(8 + n) };
}
function join(header: unknown, data: Buffer, lengthDelta = 0): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Math.max(0, json.length + lengthDelta)));
  return Buffer.concat([len, json, data]);
}

type Mutator = (b: Buffer, r: Rand) => Buffer;
const entryOf = (h: Record<string, unknown>, r: Rand) => pick(r, Object.keys(h).filter((k) => k !== '__metadata__'));
const MUTATORS: Record<string, Mutator> = {
  'bit flips in the header': (b, r) => flip(b, r, 8 + Number(b.readBigUInt64LE(0))),
  'bit flips anywhere': (b, r) => flip(b, r, b.length),
  truncation: (b, r) => b.subarray(0, int(r, b.length)),
  'header length': (b, r) => {
    const c = Buffer.from(b);
    c.writeBigUInt64LE(pick(r, [2n ** 63n, 2n ** 64n - 1n, BigInt(b.length), BigInt(b.length - 7), 0n, 1n, 100n * 2n ** 20n]), 0);
    return c;
  },
  'wrong dtype': (b, r) => edit(b, r, (e) => void (e.dtype = pick(r, BAD_DTYPES))),
  'bad shape': (b, r) => edit(b, r, (e) => void (e.shape = pick(r, BAD_SHAPES))),
  'bad data offsets': (b, r) => edit(b, r, (e) => void (e.data_offsets = pick(r, BAD_OFFSETS(b.length)))),
  'overlapping tensors': (b, r) => {
    const { header, data } = split(b);
    const names = Object.keys(header).filter((k) => k !== '__metadata__');
    const [a, c] = [pick(r, names), pick(r, names)];
    (header[a] as { data_offsets: number[] }).data_offsets = [...(header[c] as { data_offsets: number[] }).data_offsets];
    return join(header, data);
  },
  'odd entries': (b, r) => {
    const { header, data } = split(b);
    const odd = pick(r, [['x', 5], ['x', null], ['x', []], ['__metadata__', 7], ['__metadata__', { a: 1 }], ['y', { dtype: 'F32' }], ['', { dtype: 'F32', shape: [1], data_offsets: [0, 4] }]] as const);
    return join({ ...header, [odd[0]]: odd[1] }, data);
  },
  'NaN/Inf data': (b, r) => {
    const c = Buffer.from(b);
    const start = 8 + Number(b.readBigUInt64LE(0));
    for (let i = 0; i < 1 + int(r, 6); i++) {
      const at = start + 2 * int(r, (b.length - start) / 2 - 1);
      if (r() < 0.5) c.writeUInt16LE(pick(r, [0x7c00, 0xfc00, 0x7e00, 0x7f80, 0x7fc0]), at);
      else if (at + 4 <= c.length) c.writeFloatLE(pick(r, [NaN, Infinity, -Infinity]), at);
    }
    return c;
  },
};

function flip(b: Buffer, r: Rand, within: number): Buffer {
  const c = Buffer.from(b);
  for (let i = 0; i < 1 + int(r, 6); i++) c[int(r, within)] ^= 1 << int(r, 8);
  return c;
}
function edit(b: Buffer, r: Rand, f: (entry: Record<string, unknown>) => void): Buffer {
  const { header, data } = split(b);
  f(header[entryOf(header, r)] as Record<string, unknown>);
  return join(header, data, r() < 0.2 ? pick(r, [-1, 1, 8]) : 0);
}

describe('fuzzing safetensors files', () => {
  it(`${CASES} seeded mutations end in a typed error or a read`, { timeout: 300_000 }, async () => {
    const sound = path.join(dir, 'sound.safetensors');
    const values = (n: number) => Float32Array.from({ length: n }, (_, i) => (i - n / 2) / 7);
    await writeSafetensors(sound, {
      'a.weight': { dtype: 'F32', shape: [4, 8], data: values(32) },
      'b.weight': { dtype: 'F16', shape: [16], data: values(16) },
      'c.weight': { dtype: 'BF16', shape: [2, 3, 4], data: values(24) },
    }, { format: 'pt' });
    const src = readFileSync(sound);
    assert.equal((await readSafetensors(sound)).size, 3);
    const r = mulberry32(SEED);
    const names = Object.keys(MUTATORS);
    const tally = new FuzzTally();
    const t0 = performance.now();
    for (let i = 0; i < CASES; i++) {
      const name = names[i % names.length];
      const file = path.join(dir, `case-${i}.safetensors`);
      writeFileSync(file, MUTATORS[name](src, r));
      tally.add(`seed ${SEED} case ${i} (${name})`, await runCase(() => readSafetensors(file), 5000, 128 * 2 ** 20));
      rmSync(file);
    }
    console.log(`# safetensors fuzz: ${tally.total} cases in ${Math.round(performance.now() - t0)} ms: ${tally.summary()}`);
    assert.deepEqual(tally.findings, []);
  });
});
