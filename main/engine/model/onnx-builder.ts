/**
 * A thin builder over the ONNX protobuf (`onnx-proto`): nodes, initializers, graph inputs and
 * outputs, and weights (float32, float16, or uint8 blocks for MatMulNBits) stored as ONNX external data (one data file beside the model,
 * each tensor at a 4 KiB-aligned offset). It knows nothing about transformers; see
 * `decoder-graph.ts` for the graph itself.
 *
 * The graph is built from shapes: a weight's place in the data file follows from its dims, and
 * its bytes come, when `writeExternalData` writes the file, from memory, from a loader called
 * then, or as chunks produced then (read from a source file into a reused buffer, converted or
 * quantized on the way), so a model is written with at most one tensor in memory, and with only
 * a chunk when its weights stream.
 */
import { open, type FileHandle } from 'node:fs/promises';
import onnxProto from 'onnx-proto';
import { ModelLoadError } from '../errors.ts';
import { floatsToHalves } from './gguf/quants.ts';

const { onnx } = onnxProto;
type AttrValue = number | number[] | string | { int: number } | { float: number } | { graph: InstanceType<typeof onnx.GraphProto> };

/** Bytes per element of the external tensor types. */
const ELEMENT_BYTES: Record<number, number> = {
  [onnx.TensorProto.DataType.FLOAT]: 4,
  [onnx.TensorProto.DataType.FLOAT16]: 2,
  [onnx.TensorProto.DataType.UINT8]: 1,
};

/** Alignment of each tensor in the external data file (bytes), so ONNX Runtime can mmap it. */
const EXTERNAL_ALIGN = 4096;

/** A dimension: a fixed size or a symbolic name such as 'T'. */
export type Dim = number | string;

export const DataType = {
  FLOAT: onnx.TensorProto.DataType.FLOAT,
  FLOAT16: onnx.TensorProto.DataType.FLOAT16,
  UINT8: onnx.TensorProto.DataType.UINT8,
  INT32: onnx.TensorProto.DataType.INT32,
  INT64: onnx.TensorProto.DataType.INT64,
} as const;

/**
 * A weight's little-endian bytes for the external data file: in memory, a loader called when the
 * file is written, or `chunks`, consecutive parts produced when it is written (each at most
 * `maxBytes`, valid until the next is asked for), which is how weights stream.
 */
export type SegmentData =
  | ArrayBufferView
  | (() => ArrayBufferView | Promise<ArrayBufferView>)
  | { chunks: (maxBytes: number) => AsyncIterable<ArrayBufferView> };

/** Where one weight's bytes go in the external data file, and how to get them. */
export interface WeightSegment {
  name: string;
  /** Byte offset in the data file (4 KiB-aligned). */
  offset: number;
  /** Byte length (elements × element size). */
  bytes: number;
  /** The weight's stored bytes (for `weight`: float32 values, row-major in its dims). */
  data: SegmentData;
}

export interface BuiltModel {
  /** Serialized ModelProto. */
  model: Uint8Array;
  /** The external data file's weights, in file order; the gaps between them are zeros. */
  segments: WeightSegment[];
  /** Total bytes of the external data file. */
  dataBytes: number;
}

/**
 * float32 weight data (`SegmentData` of float32 values) as float16 bits, converted when the data
 * file is written (`floatsToHalves`: round to nearest even), chunk by chunk for streamed data, so
 * it is never held in memory as both.
 */
export function asFloat16(data: SegmentData): SegmentData {
  const half = (v: ArrayBufferView) => floatsToHalves(v as Float32Array);
  if (ArrayBuffer.isView(data)) return () => half(data);
  if (typeof data === 'function') return async () => half(await data());
  return {
    async *chunks(maxBytes) {
      let out = new Uint16Array(0);
      for await (const part of data.chunks(maxBytes * 2)) {
        const values = part as Float32Array;
        if (out.length < values.length) out = new Uint16Array(values.length);
        yield floatsToHalves(values, out.subarray(0, values.length));
      }
    },
  };
}

/** Progress of `writeExternalData`: weight bytes written so far, of all the weights' bytes. */
export type WriteProgress = (p: { bytes: number; totalBytes: number }) => void;

/**
 * Bytes per write when a weight streams: a few hundred calls for a 2.2 GB model, so their
 * overhead is negligible next to the copying itself, and two or three such buffers are all the
 * weight memory an import holds.
 */
export const WRITE_CHUNK_BYTES = 8 * 1024 * 1024;

/**
 * Writes the external data file of a built model one weight at a time, each in the chunks its
 * data yields (see `SegmentData`), at its offset, so memory holds at most one tensor, and only a
 * chunk of it when weights stream. Progress is reported after every chunk.
 * @param signal checked before each chunk; an abort stops with its reason (the caller deletes
 *   the partial file).
 * @throws ModelLoadError when a weight's data is not exactly its byte length; what the loaders,
 *   the file system or the abort throw.
 */
export async function writeExternalData(file: string, built: BuiltModel, onProgress?: WriteProgress, signal?: AbortSignal): Promise<void> {
  const fh = await open(file, 'w');
  try {
    const totalBytes = built.segments.reduce((a, seg) => a + seg.bytes, 0);
    let done = 0;
    for (const seg of built.segments) {
      signal?.throwIfAborted();
      let at = 0;
      for await (const part of segmentChunks(seg.data)) {
        signal?.throwIfAborted();
        if (at + part.byteLength > seg.bytes) throw new ModelLoadError(`weight ${seg.name}: expected ${seg.bytes} bytes, its data gave more`, file);
        await writeAll(fh, new Uint8Array(part.buffer, part.byteOffset, part.byteLength), seg.offset + at);
        at += part.byteLength;
        done += part.byteLength;
        if (part.byteLength > 0) onProgress?.({ bytes: done, totalBytes });
      }
      if (at !== seg.bytes) throw new ModelLoadError(`weight ${seg.name}: expected ${seg.bytes} bytes, its data gave ${at}`, file);
    }
    await fh.truncate(built.dataBytes);
  } finally {
    await fh.close();
  }
}

/** A segment's data as consecutive parts. */
async function* segmentChunks(data: SegmentData): AsyncIterable<ArrayBufferView> {
  if (ArrayBuffer.isView(data)) yield data;
  else if (typeof data === 'function') yield await data();
  else yield* data.chunks(WRITE_CHUNK_BYTES);
}

/** Writes all of `bytes` at `position` (a write may take only part of them). */
async function writeAll(fh: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let at = 0; at < bytes.length; ) {
    const { bytesWritten } = await fh.write(bytes, at, bytes.length - at, position + at);
    at += bytesWritten;
  }
}

/** Accumulates one ONNX graph. Names passed in must be unique; `tmp()` makes fresh ones. */
export class OnnxGraphBuilder {
  private readonly nodes: InstanceType<typeof onnx.NodeProto>[] = [];
  private readonly initializers: InstanceType<typeof onnx.TensorProto>[] = [];
  private readonly inputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  private readonly outputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  private readonly segments: WeightSegment[] = [];
  private dataBytes = 0;
  private counter = 0;
  /** Initializers of the graphs enclosing the subgraph being built (`subgraph`), innermost last. */
  private readonly outer: InstanceType<typeof onnx.TensorProto>[][] = [];

  /** @param dataFile file name (relative to the model) of the external weight data. */
  constructor(private readonly dataFile: string) {}

  /**
   * Renames value `from`, a node's output, to `to` in its producer and in every node that reads it
   * so far: a graph output can be a value the graph also uses, without an Identity node to copy it
   * out (one node fewer per output at every run). Returns `to`.
   * @throws ModelLoadError when no node produces `from`, or a node already produces `to`.
   */
  rename(from: string, to: string): string {
    const producer = this.nodes.find((n) => n.output.includes(from));
    if (!producer) throw new ModelLoadError(`graph value ${JSON.stringify(from)} cannot be renamed: no node produces it`);
    if (this.nodes.some((n) => n.output.includes(to))) throw new ModelLoadError(`graph value ${JSON.stringify(to)} exists already`);
    for (const n of this.nodes) {
      n.output = n.output.map((o) => (o === from ? to : o));
      n.input = n.input.map((x) => (x === from ? to : x));
    }
    return to;
  }

  /** True when an initializer of this name exists already. */
  has(name: string): boolean {
    return [this.initializers, ...this.outer].some((list) => list.some((t) => t.name === name));
  }

  /** A fresh value name with the given prefix. */
  tmp(prefix: string): string {
    return `${prefix}_${this.counter++}`;
  }

  /** Declares a graph input of the given element type and shape. */
  input(name: string, elemType: number, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /** Declares a graph output of the given element type and shape. */
  output(name: string, elemType: number, dims: Dim[]): string {
    this.outputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /**
   * Adds a node and returns its output names. `outputs` is a count (fresh names) or explicit
   * names. Attributes: integer / float / list of ints / string, inferred from the JS value;
   * wrap in `{ float: x }` to force a float for an integral value.
   */
  node(
    opType: string,
    inputs: string[],
    outputs: number | string[] = 1,
    attrs: Record<string, AttrValue> = {},
    domain = '',
  ): string[] {
    const outNames =
      typeof outputs === 'number' ? Array.from({ length: outputs }, () => this.tmp(opType.toLowerCase())) : outputs;
    const attribute = Object.entries(attrs).map(([name, v]) => attributeProto(name, v));
    this.nodes.push(onnx.NodeProto.create({ opType, input: inputs, output: outNames, attribute, domain, name: this.tmp(`n_${opType}`) }));
    return outNames;
  }

  /** Single-output node shorthand. */
  op(opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, domain = ''): string {
    return this.node(opType, inputs, 1, attrs, domain)[0];
  }

  /**
   * A float32 weight stored in the external data file: its values, a loader, or chunks produced
   * when the data file is written (`SegmentData`). Only `dims` is needed to build the graph.
   */
  weight(name: string, dims: number[], data: SegmentData): string {
    return this.externalTensor(name, dims, DataType.FLOAT, data);
  }

  /**
   * A weight of any element type (`DataType`: FLOAT, FLOAT16 or UINT8), its little-endian bytes stored in
   * the external data file (`SegmentData`: in memory, a loader, or chunks).
   */
  externalTensor(name: string, dims: number[], dataType: number, data: SegmentData): string {
    const bytes = ELEMENT_BYTES[dataType]! * dims.reduce((a, b) => a * b, 1);
    const pad = (EXTERNAL_ALIGN - (this.dataBytes % EXTERNAL_ALIGN)) % EXTERNAL_ALIGN;
    const offset = this.dataBytes + pad;
    this.segments.push({ name, offset, bytes, data });
    this.dataBytes = offset + bytes;
    this.initializers.push(
      onnx.TensorProto.create({
        name,
        dims,
        dataType,
        dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
        externalData: [
          { key: 'location', value: this.dataFile },
          { key: 'offset', value: String(offset) },
          { key: 'length', value: String(bytes) },
        ],
      }),
    );
    return name;
  }

  /** A small int64 constant stored inside the model (shapes, axes, indices). */
  int64(values: number[], dims: number[] = [values.length]): string {
    const name = this.tmp('const_i64');
    const raw = new BigInt64Array(values.map((v) => BigInt(v)));
    this.initializers.push(
      onnx.TensorProto.create({ name, dims, dataType: DataType.INT64, rawData: new Uint8Array(raw.buffer) }),
    );
    return name;
  }

  /** A small float32 constant stored inside the model (scalars of an elementwise formula). */
  float32(values: number[], dims: number[] = []): string {
    const name = this.tmp('const_f32');
    const raw = new Float32Array(values);
    this.initializers.push(
      onnx.TensorProto.create({ name, dims, dataType: DataType.FLOAT, rawData: new Uint8Array(raw.buffer) }),
    );
    return name;
  }

  /**
   * A subgraph (an `If` branch's `then_branch` / `else_branch` graph attribute, `{ graph }`):
   * the nodes `body` adds go into it, not into the main graph, and its outputs are the names
   * `body` returns, each declared with `elemType` (shapes left to inference). Initializers and
   * constants made meanwhile go into the subgraph too (ONNX Runtime prepacks a subgraph's own
   * initializers, e.g. MatMulNBits blocks, as it does the main graph's); values and initializers
   * of the enclosing graphs are read by name (outer scope; `has` sees them).
   */
  subgraph(name: string, elemType: number, body: () => string[]): { graph: InstanceType<typeof onnx.GraphProto> } {
    const saved = { nodes: this.nodes.splice(0), initializers: this.initializers.splice(0) };
    this.outer.push(saved.initializers);
    let outs: string[];
    try {
      outs = body();
    } catch (e) {
      this.nodes.splice(0, this.nodes.length, ...saved.nodes);
      this.initializers.splice(0, this.initializers.length, ...saved.initializers);
      throw e;
    } finally {
      this.outer.pop();
    }
    const graph = onnx.GraphProto.create({
      name,
      node: this.nodes.splice(0, this.nodes.length, ...saved.nodes),
      initializer: this.initializers.splice(0, this.initializers.length, ...saved.initializers),
      output: outs.map((o) => onnx.ValueInfoProto.create({ name: o, type: { tensorType: { elemType } } })),
    });
    return { graph };
  }

  /** Serializes the model with the given opset imports ({ '': 17, 'com.microsoft': 1 }). */
  build(graphName: string, opsets: Record<string, number>, docString: string): BuiltModel {
    const graph = onnx.GraphProto.create({
      name: graphName,
      node: this.nodes,
      initializer: this.initializers,
      input: this.inputs,
      output: this.outputs,
    });
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: 'ropewalk',
      producerVersion: '0.1.0',
      docString,
      graph,
      opsetImport: Object.entries(opsets).map(([domain, version]) => ({ domain, version })),
    });
    return { model: onnx.ModelProto.encode(model).finish(), segments: this.segments, dataBytes: this.dataBytes };
  }
}

function valueInfo(name: string, elemType: number, dims: Dim[]): InstanceType<typeof onnx.ValueInfoProto> {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  });
}

function attributeProto(name: string, v: AttrValue): InstanceType<typeof onnx.AttributeProto> {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof v === 'string') return onnx.AttributeProto.create({ name, type: T.STRING, s: new TextEncoder().encode(v) });
  if (Array.isArray(v)) return onnx.AttributeProto.create({ name, type: T.INTS, ints: v });
  if (typeof v === 'object' && 'graph' in v) return onnx.AttributeProto.create({ name, type: T.GRAPH, g: v.graph });
  if (typeof v === 'object' && 'float' in v) return onnx.AttributeProto.create({ name, type: T.FLOAT, f: v.float });
  if (typeof v === 'object') return onnx.AttributeProto.create({ name, type: T.INT, i: v.int });
  if (Number.isInteger(v)) return onnx.AttributeProto.create({ name, type: T.INT, i: v });
  return onnx.AttributeProto.create({ name, type: T.FLOAT, f: v });
}
