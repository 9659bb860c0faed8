/**
 * Safetensors files (Hugging Face's weight format) in and out, as float32.
 *
 * Layout: u64 little-endian N | N bytes of JSON header | data. The header maps each tensor name to
 * `{ dtype, shape, data_offsets: [begin, end] }`, offsets in bytes relative to the data start;
 * an optional `__metadata__` entry holds string pairs and is ignored here.
 *
 * Reading is lazy: `openSafetensors` reads and validates only the header (nothing is allocated
 * for tensor data until `load(name)`), and `load` streams the tensor's bytes in bounded chunks
 * straight into one Float32Array, so peak memory is the float32 tensor plus one chunk.
 * `chunks(name, n)` reads a tensor as consecutive float32 chunks of n values through buffers
 * reused from chunk to chunk, so memory holds one chunk, not the tensor (import streams with it).
 * F32, F16 and BF16 load; any other dtype is listed but `load` rejects it. Every structural
 * problem is a `ModelLoadError` that names the file and the tensor and quotes expected vs found,
 * raised before any tensor-sized allocation.
 *
 * Writing (`writeSafetensors`) exists for synthetic checkpoints in tests and for tools; it rounds
 * float32 to F16/BF16 to nearest, ties to even.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { InvalidOptionError, ModelLoadError } from '../errors.ts';
import type { Tensor32 } from './manifest.ts';

/** A header larger than this is treated as corrupt (the real ones are well under 1 MB). */
export const MAX_HEADER_BYTES = 100 * 1024 * 1024;
/** Largest tensor accepted, in elements: 2^31 (8 GiB as float32), above any real checkpoint's. */
export const MAX_TENSOR_ELEMENTS = 2 ** 31;
/** Bytes read per `read` call while loading a tensor. */
const CHUNK_BYTES = 16 * 1024 * 1024;

/** Bytes per element of the dtypes the safetensors format defines. */
const DTYPE_BYTES: Record<string, number> = {
  BOOL: 1, U8: 1, I8: 1, F8_E4M3: 1, F8_E5M2: 1,
  U16: 2, I16: 2, F16: 2, BF16: 2,
  U32: 4, I32: 4, F32: 4,
  U64: 8, I64: 8, F64: 8,
};
const LOADABLE = new Set(['F32', 'F16', 'BF16']);
/** Typed-array views are used for speed on little-endian hosts (all current ones). */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** The first `count` little-endian u16 values of `bytes` (a fresh, aligned buffer). */
function u16View(bytes: Uint8Array, count: number): Uint16Array {
  if (LITTLE_ENDIAN) return new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  const dv = new DataView(bytes.buffer, bytes.byteOffset);
  return Uint16Array.from({ length: count }, (_, i) => dv.getUint16(i * 2, true));
}

/** One tensor as the header describes it. `begin`/`end` are absolute byte offsets in the file. */
export interface SafetensorsEntry {
  name: string;
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

/** An open safetensors file: its validated header, and tensors loaded one at a time. */
export interface SafetensorsFile {
  file: string;
  /** Tensor entries by name, in header order (`__metadata__` excluded). */
  entries: Map<string, SafetensorsEntry>;
  /**
   * Reads tensor `name` as float32 in its stored shape (row-major).
   * @throws ModelLoadError when the name is absent, the dtype is not F32/F16/BF16, or the file
   *   ends early.
   */
  load(name: string): Promise<Tensor32>;
  /**
   * Tensor `name`'s values as float32 (row-major), in consecutive chunks of `elements` values
   * (the last one shorter). Each chunk is a view of a buffer reused for the next one: use it
   * before asking for the next. F32 chunks are the bytes as read (no copy on little-endian hosts).
   * @throws ModelLoadError as `load`.
   */
  chunks(name: string, elements: number): AsyncIterable<Float32Array>;
  /** Closes the file handle; `load` and `chunks` fail afterwards. */
  close(): Promise<void>;
}

function fmtShape(shape: readonly unknown[]): string {
  return `[${shape.join(', ')}]`;
}

/** Product of a validated shape; rejects absurd sizes before anything is allocated. */
function checkedElements(shape: number[], file: string, name: string): number {
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (n > MAX_TENSOR_ELEMENTS) {
      throw new ModelLoadError(
        `tensor "${name}" has shape ${fmtShape(shape)}, more than the ${MAX_TENSOR_ELEMENTS} elements allowed`,
        file,
      );
    }
  }
  return n;
}

/**
 * Opens a safetensors file and validates its header: length < file size and < 100 MB, JSON
 * object, every entry with a string dtype, a shape of non-negative integers no larger than
 * `MAX_TENSOR_ELEMENTS`, and `data_offsets` that lie inside the file, do not overlap, and span
 * exactly elements × dtype size bytes (for known dtypes).
 * @throws ModelLoadError naming the file (and tensor, when one is at fault).
 */
export async function openSafetensors(file: string): Promise<SafetensorsFile> {
  let fh: FileHandle;
  try {
    fh = await open(file, 'r');
  } catch (e) {
    throw new ModelLoadError(`cannot open safetensors file: ${(e as Error).message}`, file, { cause: e });
  }
  try {
    const entries = await readHeader(fh, file);
    openFiles++;
    let closed = false;
    return {
      file,
      entries,
      load: (name) => loadTensor(fh, file, entries, name),
      chunks: (name, elements) => tensorChunks(fh, file, entries, name, elements),
      close: async () => {
        if (!closed && --openFiles === 0) spareBuffers.length = 0;
        closed = true;
        await fh.close();
      },
    };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

async function readHeader(fh: FileHandle, file: string): Promise<Map<string, SafetensorsEntry>> {
  const size = (await fh.stat()).size;
  if (size < 8) throw new ModelLoadError(`file is ${size} bytes, too short for a safetensors header (8 bytes)`, file);
  const lenBuf = new Uint8Array(8);
  await fh.read(lenBuf, 0, 8, 0);
  const headerLen = Number(new DataView(lenBuf.buffer).getBigUint64(0, true));
  if (headerLen > MAX_HEADER_BYTES || headerLen > size - 8) {
    throw new ModelLoadError(
      `header length ${headerLen} bytes exceeds ${headerLen > MAX_HEADER_BYTES ? `the ${MAX_HEADER_BYTES}-byte limit` : `the file size (${size} bytes)`}`,
      file,
    );
  }
  const headerBuf = new Uint8Array(headerLen);
  await fh.read(headerBuf, 0, headerLen, 8);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(headerBuf));
  } catch (e) {
    throw new ModelLoadError(`header is not valid JSON: ${(e as Error).message}`, file, { cause: e });
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new ModelLoadError('header is not a JSON object', file);
  }
  const dataStart = 8 + headerLen;
  const dataSize = size - dataStart;
  const entries = new Map<string, SafetensorsEntry>();
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') continue;
    entries.set(name, parseEntry(raw, name, file, dataStart, dataSize));
  }
  // Overlapping tensors mean a corrupt (or hostile) header.
  const sorted = [...entries.values()].sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!;
    const cur = sorted[i]!;
    if (cur.begin < prev.end) {
      throw new ModelLoadError(
        `tensor "${cur.name}" data [${cur.begin - dataStart}, ${cur.end - dataStart}) overlaps "${prev.name}" [${prev.begin - dataStart}, ${prev.end - dataStart})`,
        file,
      );
    }
  }
  return entries;
}

function parseEntry(raw: unknown, name: string, file: string, dataStart: number, dataSize: number): SafetensorsEntry {
  const bad = (what: string) => new ModelLoadError(`tensor "${name}": ${what}`, file);
  if (typeof raw !== 'object' || raw === null) throw bad('header entry is not an object');
  const { dtype, shape, data_offsets: offsets } = raw as Record<string, unknown>;
  if (typeof dtype !== 'string') throw bad(`dtype must be a string, found ${JSON.stringify(dtype)}`);
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw bad(`shape must be a list of non-negative integers, found ${JSON.stringify(shape)}`);
  }
  if (
    !Array.isArray(offsets) || offsets.length !== 2 ||
    !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1]
  ) {
    throw bad(`data_offsets must be [begin, end] with 0 <= begin <= end, found ${JSON.stringify(offsets)}`);
  }
  const [b, e] = offsets as [number, number];
  if (e > dataSize) {
    throw bad(`data_offsets [${b}, ${e}] end past the data section (${dataSize} bytes); the file is truncated or corrupt`);
  }
  const elements = checkedElements(shape as number[], file, name);
  const bytes = DTYPE_BYTES[dtype];
  if (bytes !== undefined && elements * bytes !== e - b) {
    throw bad(
      `shape ${fmtShape(shape)} × ${dtype} (${bytes} bytes) needs ${elements * bytes} bytes, found data_offsets spanning ${e - b}`,
    );
  }
  return { name, dtype, shape: [...(shape as number[])], begin: dataStart + b, end: dataStart + e };
}

/** The header entry of a loadable tensor. @throws ModelLoadError when absent or not F32/F16/BF16. */
function loadableEntry(file: string, entries: Map<string, SafetensorsEntry>, name: string): SafetensorsEntry {
  const entry = entries.get(name);
  if (!entry) throw new ModelLoadError(`tensor "${name}" is not in this file`, file);
  if (!LOADABLE.has(entry.dtype)) {
    throw new ModelLoadError(
      `tensor "${name}" has dtype ${entry.dtype}; supported: F32, F16, BF16`,
      file,
    );
  }
  return entry;
}

async function loadTensor(
  fh: FileHandle,
  file: string,
  entries: Map<string, SafetensorsEntry>,
  name: string,
): Promise<Tensor32> {
  const entry = loadableEntry(file, entries, name);
  const n = (entry.end - entry.begin) / DTYPE_BYTES[entry.dtype]!;
  const out = new Float32Array(n);
  if (entry.dtype === 'F32' && LITTLE_ENDIAN) {
    // Stored as we want it: read straight into the result, no staging copy.
    await readFully(fh, new Uint8Array(out.buffer), entry.begin, file, name);
    return { shape: [...entry.shape], data: out };
  }
  let at = 0;
  for await (const chunk of tensorChunks(fh, file, entries, name, Math.floor(CHUNK_BYTES / 4))) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return { shape: [...entry.shape], data: out };
}

/**
 * Tensor `name` as float32 chunks of `elements` values read at their offsets: F32 on a
 * little-endian host is read straight into the buffer it is yielded from; F16 / BF16 (and F32
 * elsewhere) are read into a staging buffer and converted into the yielded one. Both are
 * allocated once (a chunk's size) and reused.
 */
async function* tensorChunks(
  fh: FileHandle,
  file: string,
  entries: Map<string, SafetensorsEntry>,
  name: string,
  elements: number,
): AsyncGenerator<Float32Array> {
  const entry = loadableEntry(file, entries, name);
  if (!Number.isSafeInteger(elements) || elements < 1) throw new InvalidOptionError('elements', `${elements} is not a positive integer`);
  const bytesPer = DTYPE_BYTES[entry.dtype]!;
  const n = (entry.end - entry.begin) / bytesPer;
  const per = Math.min(n, elements);
  const direct = entry.dtype === 'F32' && LITTLE_ENDIAN;
  // Two read buffers, so the next chunk is read (in libuv's threads) while the caller uses this
  // one; converted dtypes decode into a third.
  const taken = direct ? [takeBuffer(per * 4), takeBuffer(per * 4)] : [takeBuffer(per * bytesPer), takeBuffer(per * bytesPer), takeBuffer(per * 4)];
  const raws = [new Uint8Array(taken[0]!, 0, per * bytesPer), new Uint8Array(taken[1]!, 0, per * bytesPer)];
  const read = (i0: number, into: Uint8Array) =>
    i0 < n ? readFully(fh, into.subarray(0, Math.min(per, n - i0) * bytesPer), entry.begin + i0 * bytesPer, file, name) : Promise.resolve();
  let pending = read(0, raws[0]!);
  try {
    for (let i0 = 0, b = 0; i0 < n; i0 += per, b ^= 1) {
      const count = Math.min(per, n - i0);
      await pending;
      pending = read(i0 + per, raws[b ^ 1]!);
      if (direct) {
        yield new Float32Array(taken[b]!, 0, count);
      } else {
        const out = new Float32Array(taken[2]!, 0, count);
        decodeInto(entry.dtype, raws[b]!, count, out);
        yield out;
      }
    }
  } finally {
    // A read still in flight (the caller stopped early) must land before its buffer is reused.
    await pending.catch(() => {});
    for (const buffer of taken) giveBack(buffer);
  }
}

/**
 * Chunk buffers of finished reads, kept for the next tensor while any file is open: a fresh
 * 8 MiB buffer per tensor costs its page faults and zeroing again (measured streaming 2.2 GB of
 * float32 into a bundle: 3.8 s of system time with fresh buffers, 2.1 s reused). Dropped when the
 * last file closes.
 */
const spareBuffers: ArrayBuffer[] = [];
let openFiles = 0;

/** A spare buffer of at least `bytes`, or a new one. */
function takeBuffer(bytes: number): ArrayBuffer {
  const i = spareBuffers.findIndex((b) => b.byteLength >= bytes);
  return i >= 0 ? spareBuffers.splice(i, 1)[0]! : new ArrayBuffer(bytes);
}

/** Keeps `b` for the next chunked read (at most three: two reads and a conversion). */
function giveBack(b: ArrayBuffer): void {
  if (openFiles === 0) return;
  spareBuffers.push(b);
  spareBuffers.sort((x, y) => y.byteLength - x.byteLength);
  spareBuffers.length = Math.min(spareBuffers.length, 3);
}

/** `count` little-endian values of `dtype` (F32, F16, BF16) from `raw` as float32 into `out[0…count)`. */
function decodeInto(dtype: string, raw: Uint8Array, count: number, out: Float32Array): void {
  if (dtype === 'F32') {
    const dv = new DataView(raw.buffer, raw.byteOffset);
    for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true);
    return;
  }
  const halves = u16View(raw, count);
  if (dtype === 'BF16') {
    // bf16 is the top half of an f32: shifting the bits keeps zeros, subnormals, inf and NaN.
    const outBits = new Uint32Array(out.buffer, out.byteOffset, count);
    for (let i = 0; i < count; i++) outBits[i] = halves[i]! << 16;
  } else {
    const table = f16Table();
    for (let i = 0; i < count; i++) out[i] = table[halves[i]!]!;
  }
}

/** Fills `into` from `position`, in reads of at most CHUNK_BYTES. @throws ModelLoadError if the file ends early. */
async function readFully(fh: FileHandle, into: Uint8Array, position: number, file: string, name: string): Promise<void> {
  for (let at = 0; at < into.length; ) {
    const len = Math.min(CHUNK_BYTES, into.length - at);
    const { bytesRead } = await fh.read(into, at, len, position + at);
    if (bytesRead !== len) {
      throw new ModelLoadError(`tensor "${name}": expected ${len} bytes at offset ${position + at}, read ${bytesRead}`, file);
    }
    at += len;
  }
}

/**
 * Reads every tensor of a safetensors file as float32. Convenient for small files and tests;
 * import uses `openSafetensors` to load tensor by tensor.
 * @throws ModelLoadError as `openSafetensors` and `load` do.
 */
export async function readSafetensors(file: string): Promise<Map<string, Tensor32>> {
  const st = await openSafetensors(file);
  try {
    const out = new Map<string, Tensor32>();
    for (const name of st.entries.keys()) out.set(name, await st.load(name));
    return out;
  } finally {
    await st.close();
  }
}

// ---- float conversions -------------------------------------------------------------------------

const cvtF32 = new Float32Array(1);
const cvtU32 = new Uint32Array(cvtF32.buffer);
let f16Cache: Float32Array | null = null;
/** All 65,536 half-precision values as float32, built once (256 KB). */
function f16Table(): Float32Array {
  if (!f16Cache) {
    f16Cache = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) f16Cache[h] = f16BitsToF32(h);
  }
  return f16Cache;
}

/** IEEE 754 binary16 bits → number: ±0, subnormals (m·2^-24), normals, ±Infinity, NaN. */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** bfloat16 bits → number (the bits are the upper 16 of a float32). */
export function bf16BitsToF32(b: number): number {
  cvtU32[0] = (b & 0xffff) << 16;
  return cvtF32[0]!;
}

/**
 * number → binary16 bits, rounding the float32 value to nearest, ties to even. Overflow gives
 * ±Infinity, underflow ±0 or a subnormal; NaN stays a (quiet) NaN.
 */
export function f32ToF16Bits(x: number): number {
  cvtF32[0] = x;
  const bits = cvtU32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half: value = m·2^-24 with m = significand >> (14 - e), rounded.
    if (e < -10) return sign;
    const sig = mant | 0x800000;
    const shift = 14 - e;
    let m = sig >>> shift;
    const rem = sig & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (m & 1))) m++;
    return sign | m; // m may carry into 0x400, the smallest normal: still the right bits
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++; // a carry may reach 0x7c00 = Infinity
  return sign | h;
}

/** number → bfloat16 bits: the float32 rounded to its upper 16 bits, ties to even; NaN stays NaN. */
export function f32ToBf16Bits(x: number): number {
  cvtF32[0] = x;
  const bits = cvtU32[0]!;
  if ((bits & 0x7f800000) === 0x7f800000 && bits & 0x7fffff) return (bits >>> 16) | 0x40;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

// ---- writing -----------------------------------------------------------------------------------

/** What `writeSafetensors` stores for one tensor: float32 data, converted to `dtype` on write. */
export interface TensorToWrite {
  dtype: 'F32' | 'F16' | 'BF16';
  shape: number[];
  data: Float32Array;
}

/**
 * Writes `tensors` as a safetensors file, in the given key order, header padded with spaces to a
 * multiple of 8 bytes so F32 data is aligned. F16/BF16 are rounded to nearest, ties to even.
 * `metadata`, when given, becomes the `__metadata__` entry.
 * @throws InvalidOptionError when a tensor's data length is not the product of its shape.
 */
export async function writeSafetensors(
  file: string,
  tensors: Record<string, TensorToWrite>,
  metadata?: Record<string, string>,
): Promise<void> {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) {
      throw new InvalidOptionError('tensors', `"${name}" has shape ${fmtShape(t.shape)} (${n} elements) but ${t.data.length} values`);
    }
    const bytes = n * DTYPE_BYTES[t.dtype]!;
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const headerBytes = Buffer.from(json, 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(headerBytes.length));
  const fh = await open(file, 'w');
  try {
    await fh.write(prefix);
    await fh.write(headerBytes);
    for (const t of Object.values(tensors)) await fh.write(encode(t));
  } finally {
    await fh.close();
  }
}

/** The tensor's little-endian bytes in its dtype. */
function encode(t: TensorToWrite): Uint8Array {
  const n = t.data.length;
  if (t.dtype === 'F32') {
    if (LITTLE_ENDIAN) return new Uint8Array(t.data.buffer, t.data.byteOffset, n * 4);
    const buf = Buffer.alloc(n * 4);
    for (let i = 0; i < n; i++) buf.writeFloatLE(t.data[i]!, i * 4);
    return buf;
  }
  const halves = new Uint16Array(n);
  const cvt = t.dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
  for (let i = 0; i < n; i++) halves[i] = cvt(t.data[i]!);
  const bytes = new Uint8Array(halves.buffer);
  if (!LITTLE_ENDIAN) for (let i = 0; i < bytes.length; i += 2) [bytes[i], bytes[i + 1]] = [bytes[i + 1]!, bytes[i]!];
  return bytes;
}
