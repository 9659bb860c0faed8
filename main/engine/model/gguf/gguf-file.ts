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
 * @throws ModelLoadError for an unreadable, truncated or malformed file.
 */
export async function openGguf(file: string): Promise<GgufFile> {
  const size = (await stat(file).catch(() => null))?.size;
  if (size === undefined) throw new ModelLoadError('cannot read the GGUF file', file);
  let parsed: Awaited<ReturnType<typeof gguf>>;
  try {
    parsed = await gguf(file, { allowLocalFile: true });
  } catch (e) {
    throw new ModelLoadError(`not a readable GGUF file: ${(e as Error).message}`, file, { cause: e });
  }
  const dataStart = Number(parsed.tensorDataOffset);
  // The parser reads past a short file's end as zeros: a header that does not fit is truncation.
  if (dataStart > size) {
    throw new ModelLoadError(`the GGUF header (metadata and tensor list) ends at byte ${dataStart}, past the end of the ${size}-byte file (truncated?)`, file);
  }
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
