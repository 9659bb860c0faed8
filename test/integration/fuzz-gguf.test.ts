/**
 * Seeded fuzzing of stories260K.gguf and its Q8_0 copy (read where they lie): 2,000 mutated copies — bit flips in
 * the header and anywhere, truncations, huge counts and lengths (tensor and metadata counts,
 * string and array lengths, dimensions), implausible dimension counts, offsets past the end,
 * overlapping and misaligned tensors, wrong tensor and value types, NaN/Inf weights and Q8_0
 * block scales — each opened as a model (header, config, tokenizer, tensor shapes; every fourth
 * also reads every tensor): every case ends within 10 s in a typed error or a working import,
 * never an untyped exception, a hang, or resident memory growing by more than 256 MB (the file
 * is 1.2 MB). 16 of the full imports that worked then go through Engine.load (bundle, graph,
 * ONNX Runtime session) and generate 4 tokens, or fail typed. Seed and case number are in every finding, so one reproduces.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import { importGguf, openGgufModel } from '../../main/engine/model/gguf/import-gguf.ts';
import { FuzzTally, runCase } from '../helpers/fuzz.ts';
import { ggufLayout, type GgufLayout } from '../helpers/gguf-edit.ts';
import { GGUF_DIR, STORIES_GGUF } from '../helpers/paths.ts';
import { mulberry32 } from '../helpers/prng.ts';

const SEED = 20261201;
const CASES = 2000;
const LOADS = 16;
/** Every FULL_EVERY-th case reads every tensor (importGguf); the others stop after the header, config, tokenizer and shapes. */
const FULL_EVERY = 4;
const BOUND_MS = 10_000;
const MAX_RSS_GROWTH = 256 * 2 ** 20;
// RAM-backed when there is one: thousands of 1.2 MB files.
const dir = mkdtempSync(path.join(process.platform === 'linux' ? '/dev/shm' : '/tmp', 'ropewalk-fuzz-gguf-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const HUGE = [2n ** 31n, 2n ** 32n + 1n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 10_000_000n];
const TYPES = [1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 30, 39, 40, 1000, 0xffffffff];
const F16_SPECIAL = [0x7c00, 0xfc00, 0x7e00]; // +Inf, -Inf, NaN

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, n: number) => Math.floor(r() * n);

/** One mutation: a name and the damaged copy of `b`. */
type Mutator = (b: Buffer, l: GgufLayout, r: Rand) => Buffer;

const MUTATORS: Record<string, Mutator> = {
  'bit flips in the header': (b, l, r) => flip(b, r, l.dataStart),
  'bit flips anywhere': (b, _l, r) => flip(b, r, b.length),
  truncation: (b, l, r) => b.subarray(0, r() < 0.7 ? int(r, l.dataStart + 64) : int(r, b.length)),
  'huge count or length': (b, l, r) => {
    const fields = [l.tensorCountAt, l.kvCountAt, ...l.kvs.flatMap((k) => [k.keyLenAt, ...(k.lengthAt === null ? [] : [k.lengthAt])]),
      ...l.tensors.flatMap((t) => [t.nameLenAt, ...t.dimsAt])];
    return u64(b, pick(r, fields), pick(r, HUGE));
  },
  'implausible dimension count': (b, l, r) => u32(b, pick(r, l.tensors).nDimsAt, pick(r, [0, 5, 64, 0xffff, 0xffffffff])),
  'offset past the end': (b, l, r) => u64(b, pick(r, l.tensors).offsetAt, pick(r, [BigInt(b.length), BigInt(b.length - l.dataStart + 1), 2n ** 40n, 2n ** 64n - 32n])),
  'overlapping or misaligned tensors': (b, l, r) => {
    const t = pick(r, l.tensors);
    return u64(b, t.offsetAt, r() < 0.5 ? pick(r, l.tensors).offset : t.offset + BigInt(1 + int(r, 31)));
  },
  'wrong tensor type': (b, l, r) => u32(b, pick(r, l.tensors).typeAt, pick(r, TYPES)),
  'wrong value type': (b, l, r) => u32(b, pick(r, l.kvs).typeAt, int(r, 14)),
  'NaN/Inf weights': (b, l, r) => {
    const c = Buffer.from(b);
    const t = pick(r, l.tensors);
    for (let i = 0; i < 1 + int(r, 8); i++) c.writeFloatLE(pick(r, [NaN, Infinity, -Infinity]), l.dataStart + Number(t.offset) + 4 * int(r, 32));
    return c;
  },
};

function flip(b: Buffer, r: Rand, within: number): Buffer {
  const c = Buffer.from(b);
  for (let i = 0; i < 1 + int(r, 8); i++) c[int(r, within)] ^= 1 << int(r, 8);
  return c;
}
function u64(b: Buffer, at: number, v: bigint): Buffer {
  const c = Buffer.from(b);
  c.writeBigUInt64LE(v, at);
  return c;
}
function u32(b: Buffer, at: number, v: number): Buffer {
  const c = Buffer.from(b);
  c.writeUInt32LE(v >>> 0, at);
  return c;
}

/** Q8_0 blocks (34 bytes: f16 scale, 32 int8) with NaN/Inf scales, in the Q8_0 stories260K. */
function q8ScaleCase(b: Buffer, l: GgufLayout, r: Rand): Buffer {
  const c = Buffer.from(b);
  const t = pick(r, l.tensors.filter((x) => c.readUInt32LE(x.typeAt) === 8));
  for (let i = 0; i < 1 + int(r, 4); i++) c.writeUInt16LE(pick(r, F16_SPECIAL), l.dataStart + Number(t.offset) + 34 * int(r, 16));
  return c;
}

describe('fuzzing GGUF files', () => {
  it(`${CASES} seeded mutations of stories260K end in a typed error or a working import, ${LOADS} through Engine.load`, { timeout: 600_000 }, async () => {
    const r = mulberry32(SEED);
    const f32 = readFileSync(STORIES_GGUF);
    const q8 = readFileSync(path.join(GGUF_DIR, 'stories260K-q8_0.gguf'));
    const layouts = { f32: ggufLayout(f32), q8: ggufLayout(q8) };
    const names = Object.keys(MUTATORS);
    const tally = new FuzzTally();
    const loadable: string[] = [];
    const t0 = performance.now();
    for (let i = 0; i < CASES; i++) {
      const useQ8 = i % 5 === 4;
      const [src, layout] = useQ8 ? [q8, layouts.q8] : [f32, layouts.f32];
      const name = useQ8 && i % 10 === 9 ? 'NaN/Inf Q8_0 scales' : names[i % names.length];
      const bytes = name === 'NaN/Inf Q8_0 scales' ? q8ScaleCase(src, layout, r) : MUTATORS[name](src, layout, r);
      const file = path.join(dir, `case-${i}.gguf`);
      writeFileSync(file, bytes);
      const label = `seed ${SEED} case ${i} (${name}${useQ8 ? ', Q8_0' : ''})`;
      const full = i % FULL_EVERY === 0;
      const end = await runCase(full ? () => importGguf(file, { sourceHash: 'fuzz' }) : async () => (await openGgufModel(file, { sourceHash: 'fuzz' })).close(), BOUND_MS, MAX_RSS_GROWTH);
      tally.add(label, end);
      if (end.kind === 'ok' && full && loadable.length < LOADS && i % 3 === 0) loadable.push(file);
      else rmSync(file);
    }
    const importMs = performance.now() - t0;
    const loads = new FuzzTally();
    for (const [k, file] of loadable.entries()) {
      const end = await runCase(async () => {
        const engine = await Engine.load(file, { cacheDir: path.join(dir, `cache-${k}`) });
        try {
          const sampler = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
          for await (const ev of engine.generate({ prompt: 'Once upon a time', maxTokens: 4, sampler })) void ev;
        } finally {
          await engine.dispose();
        }
      }, 60_000, 1024 * 2 ** 20);
      loads.add(`seed ${SEED} load ${k} (${path.basename(file)})`, end);
      rmSync(path.join(dir, `cache-${k}`), { recursive: true, force: true });
    }
    console.log(`# gguf fuzz: ${tally.total} imports in ${Math.round(importMs)} ms: ${tally.summary()}; ${loads.total} loads: ${loads.summary()}`);
    assert.equal(tally.total, CASES);
    assert.deepEqual([...tally.findings, ...loads.findings], []);
  });
});
