/**
 * Test helper: writes GGUF v3 files (llama.cpp's format, written from the spec in ggml's
 * `docs/gguf.md`) so tests and the bench can build models with real shapes and real tokenizers:
 * header, metadata key/values, tensor infos, then tensor data aligned to 32 bytes. Tensors are
 * F32, or quantized here to Q8_0 / Q4_0 as llama.cpp's reference quantizers do it
 * (`quantize_row_q8_0_ref`, `quantize_row_q4_0_ref`).
 */
import { closeSync, openSync, writeSync } from 'node:fs';

export type GgufValue =
  | { u32: number }
  | { i32: number }
  | { f32: number }
  | { bool: boolean }
  | { str: string }
  | { strs: string[] }
  | { f32s: ArrayLike<number> }
  | { i32s: ArrayLike<number> };

export interface GgufTensorSpec {
  name: string;
  /** Row-major shape (outermost first), e.g. [out, in]. */
  shape: number[];
  /** The values, or a function making them when the tensor is written (big models, one tensor in memory at a time). */
  data: Float32Array | (() => Float32Array);
  type: 'F32' | 'Q8_0' | 'Q4_0';
}

/** A tensor written as given bytes of any ggml type (`typeId` as ggml.h numbers it), e.g. blocks made elsewhere. */
export interface GgufRawTensorSpec {
  name: string;
  /** Row-major shape (outermost first). */
  shape: number[];
  typeId: number;
  bytes: Uint8Array;
}

const isRaw = (t: GgufTensorSpec | GgufRawTensorSpec): t is GgufRawTensorSpec => 'bytes' in t;

const ALIGN = 32;
const TYPE_ID = { F32: 0, Q4_0: 2, Q8_0: 8 } as const;

class Bytes {
  private chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  u32(v: number) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.push(b); }
  i32(v: number) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
  u64(v: number) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  f32(v: number) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
  str(s: string) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  concat(): Buffer { return Buffer.concat(this.chunks); }
}

function writeValue(out: Bytes, v: GgufValue): void {
  if ('u32' in v) { out.u32(4); out.u32(v.u32); }
  else if ('i32' in v) { out.u32(5); out.i32(v.i32); }
  else if ('f32' in v) { out.u32(6); out.f32(v.f32); }
  else if ('bool' in v) { out.u32(7); out.push(Buffer.from([v.bool ? 1 : 0])); }
  else if ('str' in v) { out.u32(8); out.str(v.str); }
  else if ('strs' in v) { out.u32(9); out.u32(8); out.u64(v.strs.length); for (const s of v.strs) out.str(s); }
  else if ('f32s' in v) { out.u32(9); out.u32(6); out.u64(v.f32s.length); for (let i = 0; i < v.f32s.length; i++) out.f32(v.f32s[i]); }
  else { out.u32(9); out.u32(5); out.u64(v.i32s.length); for (let i = 0; i < v.i32s.length; i++) out.i32(v.i32s[i]); }
}

/** float32 → IEEE half bits, round to nearest even (enough for scales in normal range). */
export function floatToHalf(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  let mant = u & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - exp;
    let h = mant >> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && h & 1)) h++;
    return sign | h;
  }
  if (exp >= 31) return sign | 0x7c00;
  let h = (exp << 10) | (mant >> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** A tensor's stored bytes in its GGUF type. */
export function encodeTensor(t: GgufTensorSpec): Buffer {
  const x = typeof t.data === 'function' ? t.data() : t.data;
  if (t.type === 'F32') return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  const blocks = x.length / 32;
  const out = Buffer.alloc(blocks * (t.type === 'Q8_0' ? 34 : 18));
  for (let b = 0; b < blocks; b++) {
    const row = x.subarray(b * 32, b * 32 + 32);
    if (t.type === 'Q8_0') {
      let amax = 0;
      for (const v of row) amax = Math.max(amax, Math.abs(v));
      const d = amax / 127;
      const id = d ? 1 / d : 0;
      out.writeUInt16LE(floatToHalf(d), b * 34);
      for (let j = 0; j < 32; j++) out.writeInt8(Math.round(row[j] * id), b * 34 + 2 + j);
    } else {
      let max = 0;
      for (const v of row) if (Math.abs(v) > Math.abs(max)) max = v;
      const d = max / -8;
      const id = d ? 1 / d : 0;
      out.writeUInt16LE(floatToHalf(d), b * 18);
      for (let j = 0; j < 16; j++) {
        const lo = Math.min(15, Math.trunc(row[j] * id + 8.5));
        const hi = Math.min(15, Math.trunc(row[j + 16] * id + 8.5));
        out[b * 18 + 2 + j] = lo | (hi << 4);
      }
    }
  }
  return out;
}

/** Writes a GGUF v3 file with these metadata and tensors (in order). */
export function writeGguf(file: string, metadata: Record<string, GgufValue>, tensors: (GgufTensorSpec | GgufRawTensorSpec)[]): void {
  const head = new Bytes();
  head.push(Buffer.from('GGUF', 'latin1'));
  head.u32(3);
  head.u64(tensors.length);
  head.u64(Object.keys(metadata).length);
  for (const [k, v] of Object.entries(metadata)) {
    head.str(k);
    writeValue(head, v);
  }
  const bytesOf = (t: GgufTensorSpec | GgufRawTensorSpec) => {
    if (isRaw(t)) return t.bytes.byteLength;
    const n = t.shape.reduce((a, b) => a * b, 1);
    return t.type === 'F32' ? n * 4 : (n / 32) * (t.type === 'Q8_0' ? 34 : 18);
  };
  let offset = 0;
  tensors.forEach((t) => {
    head.str(t.name);
    head.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) head.u64(d);
    head.u32(isRaw(t) ? t.typeId : TYPE_ID[t.type]);
    head.u64(offset);
    offset += Math.ceil(bytesOf(t) / ALIGN) * ALIGN;
  });
  const fd = openSync(file, 'w');
  try {
    const h = head.concat();
    writeSync(fd, h);
    writeSync(fd, Buffer.alloc((ALIGN - (h.length % ALIGN)) % ALIGN));
    for (const t of tensors) {
      const e = isRaw(t) ? t.bytes : encodeTensor(t);
      writeSync(fd, e);
      writeSync(fd, Buffer.alloc((ALIGN - (e.length % ALIGN)) % ALIGN));
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * GGUF tokenizer metadata (`tokenizer.ggml.*`, model `gpt2`) for a byte-level BPE
 * `tokenizer.json` such as Qwen's, as llama.cpp's converter writes it: tokens by id, types
 * (1 normal, 3 control for special added tokens, 4 user-defined for the others), merges as
 * "a b", and the named pre-tokenizer.
 */
export function gpt2TokenizerMetadata(tokenizerJson: any, pre: string, extra: Record<string, GgufValue> = {}, padTo = 0): Record<string, GgufValue> {
  const vocab = tokenizerJson.model.vocab as Record<string, number>;
  const added = tokenizerJson.added_tokens as { id: number; content: string; special: boolean }[];
  let n = padTo;
  for (const id of [...Object.values(vocab), ...added.map((a) => a.id)]) n = Math.max(n, id + 1);
  const tokens = new Array<string>(n).fill('');
  const types = new Array<number>(n).fill(1);
  for (const [t, id] of Object.entries(vocab)) tokens[id] = t;
  for (const a of added) {
    tokens[a.id] = a.content;
    types[a.id] = a.special ? 3 : 4;
  }
  tokens.forEach((t, i) => {
    if (t === '') { tokens[i] = `[PAD${i}]`; types[i] = 5; }
  });
  const merges = (tokenizerJson.model.merges as (string | [string, string])[]).map((m) => (Array.isArray(m) ? m.join(' ') : m));
  return {
    'tokenizer.ggml.model': { str: 'gpt2' },
    'tokenizer.ggml.pre': { str: pre },
    'tokenizer.ggml.tokens': { strs: tokens },
    'tokenizer.ggml.token_type': { i32s: types },
    'tokenizer.ggml.merges': { strs: merges },
    ...extra,
  };
}
