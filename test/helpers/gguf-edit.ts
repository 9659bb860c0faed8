/**
 * Test helper: edits GGUF v3 bytes in memory (the layout of ggml's docs/gguf.md: magic, version,
 * tensor count u64, metadata count u64, then the key/values). `withStringMetadata` inserts one
 * string key/value right after the header, padded with trailing spaces to a multiple of the
 * 32-byte alignment, so the tensor data keeps its alignment and its offsets.
 */

const KV_COUNT_OFFSET = 16;
const HEADER_BYTES = 24;
const ALIGN = 32;
const GGUF_STRING = 8;

/** `gguf` with the metadata `key` = `value` (+ up to 31 spaces) added first. Assumes alignment 32. */
export function withStringMetadata(gguf: Buffer, key: string, value: string): Buffer {
  const k = Buffer.from(key, 'utf8');
  let v = Buffer.from(value, 'utf8');
  const size = (vb: Buffer) => 8 + k.length + 4 + 8 + vb.length;
  const pad = (ALIGN - (size(v) % ALIGN)) % ALIGN;
  v = Buffer.concat([v, Buffer.alloc(pad, 0x20)]);
  const kv = Buffer.alloc(size(v));
  let o = kv.writeBigUInt64LE(BigInt(k.length), 0);
  o += k.copy(kv, o);
  o = kv.writeUInt32LE(GGUF_STRING, o);
  o = kv.writeBigUInt64LE(BigInt(v.length), o);
  v.copy(kv, o);
  const header = Buffer.from(gguf.subarray(0, HEADER_BYTES));
  header.writeBigUInt64LE(header.readBigUInt64LE(KV_COUNT_OFFSET) + 1n, KV_COUNT_OFFSET);
  return Buffer.concat([header, kv, gguf.subarray(HEADER_BYTES)]);
}

/** Where a GGUF's fields lie (byte offsets), for tests that damage them on purpose. */
export interface GgufLayout {
  /** u64 tensor count and metadata count. */
  tensorCountAt: number;
  kvCountAt: number;
  /** Per key/value: the u64 key length, u32 value type, and (strings, arrays) the u64 length or count. */
  kvs: Array<{ key: string; keyLenAt: number; typeAt: number; lengthAt: number | null }>;
  /** Per tensor info: u64 name length, u32 dimension count, u64 dimensions, u32 type, u64 offset. */
  tensors: Array<{ name: string; nameLenAt: number; nDimsAt: number; dimsAt: number[]; typeAt: number; offsetAt: number; offset: bigint }>;
  /** Where the tensor data begins (aligned to 32). */
  dataStart: number;
}

/** Fixed sizes of GGUF's scalar value types (type id → bytes). */
const SCALAR_BYTES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/** Walks a sound GGUF v3 (ggml docs/gguf.md) and returns where its fields are. @throws Error on an unknown type. */
export function ggufLayout(b: Buffer): GgufLayout {
  let o = HEADER_BYTES;
  const str = (): string => {
    const n = Number(b.readBigUInt64LE(o));
    const s = b.toString('utf8', o + 8, o + 8 + n);
    o += 8 + n;
    return s;
  };
  const skipValue = (type: number): void => {
    if (type in SCALAR_BYTES) o += SCALAR_BYTES[type];
    else if (type === GGUF_STRING) str();
    else if (type === 9) {
      const elem = b.readUInt32LE(o);
      const count = Number(b.readBigUInt64LE(o + 4));
      o += 12;
      for (let i = 0; i < count; i++) skipValue(elem);
    } else throw new Error(`unknown GGUF value type ${type} at byte ${o}`);
  };
  const kvs: GgufLayout['kvs'] = [];
  for (let i = 0, n = Number(b.readBigUInt64LE(KV_COUNT_OFFSET)); i < n; i++) {
    const keyLenAt = o;
    const key = str();
    const typeAt = o;
    const type = b.readUInt32LE(o);
    o += 4;
    const lengthAt = type === GGUF_STRING ? o : type === 9 ? o + 4 : null;
    skipValue(type);
    kvs.push({ key, keyLenAt, typeAt, lengthAt });
  }
  const tensors: GgufLayout['tensors'] = [];
  for (let i = 0, n = Number(b.readBigUInt64LE(8)); i < n; i++) {
    const nameLenAt = o;
    const name = str();
    const nDimsAt = o;
    const nDims = b.readUInt32LE(o);
    o += 4;
    const dimsAt = Array.from({ length: nDims }, (_, d) => o + 8 * d);
    o += 8 * nDims;
    const typeAt = o;
    const offsetAt = o + 4;
    const offset = b.readBigUInt64LE(offsetAt);
    o += 12;
    tensors.push({ name, nameLenAt, nDimsAt, dimsAt, typeAt, offsetAt, offset });
  }
  return { tensorCountAt: 8, kvCountAt: KV_COUNT_OFFSET, kvs, tensors, dataStart: Math.ceil(o / ALIGN) * ALIGN };
}
