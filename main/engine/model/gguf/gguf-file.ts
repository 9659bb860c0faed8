/**
 * A GGUF file (v2/v3) opened for import: metadata and tensor infos parsed by `@huggingface/gguf`
 * (it reads the header by byte ranges, never the whole file), tensor data read by offset, one
 * tensor at a time, and dequantized to float32 by `quants.ts`.
 *
 * Shapes: GGUF lists dimensions innermost first (ne0 = row length); `GgufTensor.shape` is the
 * row-major order used everywhere else in Ropewalk (outermost first), so a Linear weight of
 * `[ne0 = in, ne1 = out]` is `[out, in]`, as Hugging Face stores it, with the same bytes.
 */
import { gguf, type MetadataValue } from '@huggingface/gguf';
import { open, stat } from 'node:fs/promises';
import { ModelLoadError, UnsupportedTensorTypeError } from '../../errors.ts';
import { dequantize, ggmlType, ggmlTypeName, SUPPORTED_GGML_TYPES, type GgmlType } from './quants.ts';

/** One tensor's info: name, ggml type id, row-major shape, absolute byte range in the file. */
export interface GgufTensor {
  name: string;
  typeId: number;
  /** Row-major (outermost first). */
  shape: number[];
  /** Absolute offset of its data in the file. */
  offset: number;
  /** Bytes of its data; 0 when its type is unsupported (unknown size). */
  byteLength: number;
}

/** An open GGUF file. Close it when done. */
export interface GgufFile {
  file: string;
  version: number;
  metadata: Record<string, MetadataValue>;
  tensors: Map<string, GgufTensor>;
  /** The tensor's supported type. @throws UnsupportedTensorTypeError naming tensor and type. */
  typeOf(t: GgufTensor): GgmlType;
  /** Its raw stored bytes (blocks as in the file). @throws as `typeOf`, ModelLoadError on a short read. */
  readRaw(t: GgufTensor): Promise<Uint8Array>;
  /** Its values as float32 (exact dequantization). @throws as `readRaw`. */
  readFloat32(t: GgufTensor): Promise<Float32Array>;
  /**
   * Its values as float32 in consecutive chunks of `elements` (the last one shorter), each read
   * and dequantized on demand (the blocks that hold the chunk, one read each), so memory holds a
   * chunk, not the tensor; a chunk is valid until the next is asked for. @throws as `readRaw`.
   */
  float32Chunks(t: GgufTensor, elements: number): AsyncIterable<Float32Array>;
  close(): Promise<void>;
}

/**
 * Opens and validates a GGUF file: the header parses, every tensor's data lies inside the file,
 * and element counts are whole blocks of supported types (unsupported types are reported only
 * when such a tensor is read, so a file may carry tensors the model does not use).
 * @throws ModelLoadError for an unreadable, truncated or malformed file: shorter than the fixed
 *   header ("the file is N bytes, shorter than…"), ending inside its header (where: metadata,
 *   tensor list or padding, quoting only byte numbers the file really holds), a header the parser
 *   refuses ("the GGUF header is damaged: " and what is implausible), or tensor data past the end.
 */
export async function openGguf(file: string): Promise<GgufFile> {
  const size = (await stat(file).catch(() => null))?.size;
  if (size === undefined) throw new ModelLoadError('cannot read the GGUF file', file);
  const fixed = await readFixedHeader(file, size);
  let parsed: Awaited<ReturnType<typeof gguf>>;
  try {
    parsed = await gguf(file, { allowLocalFile: true });
  } catch (e) {
    const m = (e as Error).message;
    // Bad magic or version is not damage but another kind of file (or a GGUF version we do not read).
    const what = /^not a valid gguf file/.test(m) || (e as NodeJS.ErrnoException).code !== undefined
      ? `not a readable GGUF file: ${m}`
      : `the GGUF header is damaged: ${headerDamage(m, size, fixed)}`;
    throw new ModelLoadError(what, file, { cause: e });
  }
  const dataStart = Number(parsed.tensorDataOffset);
  if (dataStart > size) throw new ModelLoadError(cutInHeader(parsed, size), file);
  const tensors = new Map<string, GgufTensor>();
  for (const info of parsed.tensorInfos) {
    const shape = info.shape.map(Number).reverse();
    const elements = shape.reduce((a, b) => a * b, 1);
    const type = ggmlType(info.dtype);
    const t: GgufTensor = { name: info.name, typeId: info.dtype, shape, offset: dataStart + Number(info.offset), byteLength: 0 };
    if (type) {
      if (elements % type.blockSize !== 0) {
        throw new ModelLoadError(`tensor ${info.name} has ${elements} elements, not a whole number of ${type.name} blocks of ${type.blockSize}`, file);
      }
      t.byteLength = (elements / type.blockSize) * type.blockBytes;
      if (t.offset + t.byteLength > size) {
        throw new ModelLoadError(`tensor ${info.name} ends at byte ${t.offset + t.byteLength}, past the end of the ${size}-byte file (truncated?)`, file);
      }
    }
    tensors.set(info.name, t);
  }
  const fh = await open(file, 'r');
  const typeOf = (t: GgufTensor): GgmlType => {
    const type = ggmlType(t.typeId);
    if (!type) throw new UnsupportedTensorTypeError(t.name, ggmlTypeName(t.typeId), SUPPORTED_GGML_TYPES, file);
    return type;
  };
  const readRaw = async (t: GgufTensor): Promise<Uint8Array> => {
    typeOf(t);
    const buf = new Uint8Array(t.byteLength);
    const { bytesRead } = await fh.read(buf, 0, t.byteLength, t.offset);
    if (bytesRead !== t.byteLength) throw new ModelLoadError(`tensor ${t.name}: read ${bytesRead} of ${t.byteLength} bytes`, file);
    return buf;
  };
  return {
    file,
    version: Number(parsed.metadata.version),
    metadata: parsed.metadata as unknown as Record<string, MetadataValue>,
    tensors,
    typeOf,
    readRaw,
    async readFloat32(t) {
      const type = typeOf(t);
      return dequantize(type, await readRaw(t), t.shape.reduce((a, b) => a * b, 1));
    },
    async *float32Chunks(t, elements) {
      const type = typeOf(t);
      const total = t.shape.reduce((a, b) => a * b, 1);
      const step = Math.max(1, Math.floor(elements));
      // Whole blocks around each chunk: ⌈step / blockSize⌉ + 1 of them at most.
      const buf = new Uint8Array((Math.ceil(step / type.blockSize) + 1) * type.blockBytes);
      for (let start = 0; start < total; start += step) {
        const end = Math.min(total, start + step);
        const b0 = Math.floor(start / type.blockSize);
        const b1 = Math.ceil(end / type.blockSize);
        const bytes = (b1 - b0) * type.blockBytes;
        const { bytesRead } = await fh.read(buf, 0, bytes, t.offset + b0 * type.blockBytes);
        if (bytesRead !== bytes) throw new ModelLoadError(`tensor ${t.name}: read ${bytesRead} of ${bytes} bytes at element ${start}`, file);
        const values = dequantize(type, buf.subarray(0, bytes), (b1 - b0) * type.blockSize);
        yield values.subarray(start - b0 * type.blockSize, end - b0 * type.blockSize);
      }
    },
    close: () => fh.close(),
  };
}

/** Bytes of the fixed GGUF v2/v3 header: magic 4 + version 4 + tensor count 8 + metadata count 8. */
const FIXED_HEADER_BYTES = 24;
const MAGIC = [0x47, 0x47, 0x55, 0x46]; // "GGUF"

/** Whether a file begins with GGUF's magic ("GGUF", the format's first four bytes). Unreadable: false. */
export async function startsWithGgufMagic(file: string): Promise<boolean> {
  const fh = await open(file, 'r').catch(() => null);
  if (!fh) return false;
  try {
    const head = new Uint8Array(MAGIC.length);
    const { bytesRead } = await fh.read(head, 0, MAGIC.length, 0);
    return bytesRead === MAGIC.length && MAGIC.every((b, i) => head[i] === b);
  } catch {
    return false;
  } finally {
    await fh.close();
  }
}

/** The fixed header's counts (v2/v3, little-endian), or null for another version or byte order. */
interface FixedHeader {
  tensors: bigint;
  entries: bigint;
}

/**
 * Reads the fixed header. @throws ModelLoadError when the file starts with (a prefix of) the
 * magic but is shorter than the fixed header: truncated by definition (the parser would read
 * zeros past the end and call it version 0). A short file without the magic is left to the parser.
 */
async function readFixedHeader(file: string, size: number): Promise<FixedHeader | null> {
  const head = new Uint8Array(FIXED_HEADER_BYTES);
  const fh = await open(file, 'r').catch((e: unknown) => {
    throw new ModelLoadError(`cannot read the GGUF file: ${(e as Error).message}`, file, { cause: e });
  });
  try {
    await fh.read(head, 0, Math.min(size, FIXED_HEADER_BYTES), 0);
  } finally {
    await fh.close();
  }
  if (size < FIXED_HEADER_BYTES) {
    if (MAGIC.slice(0, size).every((b, i) => head[i] === b)) {
      throw new ModelLoadError(
        `the file is ${size} bytes, shorter than the ${FIXED_HEADER_BYTES}-byte fixed GGUF header (magic, version, tensor count, metadata count): it is truncated`,
        file,
      );
    }
    return null;
  }
  const view = new DataView(head.buffer);
  const version = view.getUint32(4, true);
  if (version !== 2 && version !== 3) return null;
  return { tensors: view.getBigUint64(8, true), entries: view.getBigUint64(16, true) };
}

/** Fewest bytes a v2/v3 tensor info takes: name length 8 + n_dims 4 + type 4 + offset 8 (no name, no dims). */
const MIN_TENSOR_INFO_BYTES = 24n;
/** Fewest bytes a metadata entry takes: key length 8 + value type 4 + a one-byte value. */
const MIN_ENTRY_BYTES = 13n;

/**
 * What is implausible in a header the parser refused: a declared count that cannot fit in the
 * file, else what the parser's message names (@huggingface/gguf 0.4's wording; an unknown one is
 * quoted as is), with "more than the whole file" where a length exceeds the file's size.
 * e.g. "String length 12494444469795422208 exceeds maximum allowed (10000000)" in a 370,752-byte
 * file → "a key or tensor name claims to be 12494444469795422208 bytes long, more than the whole
 * 370752-byte file".
 */
function headerDamage(parserMessage: string, size: number, fixed: FixedHeader | null): string {
  const beyond = (n: string) => (BigInt(n) > BigInt(size) ? `, more than the whole ${size}-byte file` : '');
  // The counts come before everything else: say which one cannot fit (also when the parser
  // stumbled later, e.g. reading tensor data as metadata after a damaged metadata count).
  if (fixed) {
    const room = BigInt(size - FIXED_HEADER_BYTES);
    if (fixed.entries * MIN_ENTRY_BYTES > room) return `it declares ${fixed.entries} metadata entries, more than a ${size}-byte file can hold`;
    if (fixed.tensors * MIN_TENSOR_INFO_BYTES > room) return `it declares ${fixed.tensors} tensors, more than a ${size}-byte file can list`;
  }
  let m: RegExpExecArray | null;
  if ((m = /^String length (\d+) exceeds/.exec(parserMessage))) return `a key or tensor name claims to be ${m[1]} bytes long${beyond(m[1])}`;
  if ((m = /^Metadata array length (\d+) exceeds/.exec(parserMessage))) return `a metadata array claims ${m[1]} values${beyond(m[1])}`;
  if ((m = /^Unsupported metadata type: (\d+)/.exec(parserMessage))) return `a metadata value has type ${m[1]}, not a GGUF type (0 to 12)`;
  if ((m = /^Unsupported array element type: (\d+)/.exec(parserMessage))) return `a metadata array has elements of type ${m[1]}, not a GGUF type (0 to 12)`;
  if ((m = /^Tensor n_dims (\d+) exceeds/.exec(parserMessage))) return `a tensor claims ${m[1]} dimensions (GGUF allows at most 8)`;
  if ((m = /^Tensor "(.*)" dimension (\d+) is (\d+)/.exec(parserMessage))) return `tensor "${m[1]}" claims ${m[3]} elements along dimension ${m[2]}`;
  return parserMessage;
}

/**
 * Where a file that ends inside its header ends, from what the parser read (it reads zeros past
 * the end, so its offsets past the file's size are made up and never quoted): inside the metadata
 * when the tensor list would start past the end, inside the tensor list when that would end past
 * it (the metadata's end is then real), else in the padding before the tensor data (whose start
 * is then real). A length damaged to beyond the file's end reads the same as a cut, hence "or".
 */
function cutInHeader(parsed: Awaited<ReturnType<typeof gguf>>, size: number): string {
  const [listStart, listEnd] = parsed.tensorInfoByteRange;
  const entries = Number(parsed.metadata.kv_count);
  const tensors = Number(parsed.metadata.tensor_count);
  const cut = 'it is truncated (or a length in its header is damaged)';
  if (listStart > size) return `the ${size}-byte file ends inside its GGUF header, in the metadata (${entries} entries, then ${tensors} tensors): ${cut}`;
  if (listEnd > size) return `the ${size}-byte file ends inside its GGUF header, in the list of its ${tensors} tensors (after the metadata, which ends at byte ${listStart}): ${cut}`;
  return `the ${size}-byte file ends after its GGUF header, before its tensor data, which starts at byte ${parsed.tensorDataOffset}: it is truncated`;
}
