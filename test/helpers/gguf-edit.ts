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
