/**
 * The native addon's copy graph: how it moves KV rows that live in an execution provider's
 * memory (WebGPU buffers, CUDA device memory) without a host round trip. ONNX Runtime 1.21's C
 * API, the headers the addon is built with, has no tensor copy of its own (`CopyTensors` came in
 * 1.23, and it copies whole buffers: a WebGPU buffer handle cannot be offset to one head's rows),
 * so the addon runs this two-node graph on the same EP, with IoBinding:
 *
 *   in  src  [1, H, S, D]  (the KV dtype)   a KV tensor of capacity S, or a compact host copy
 *   in  ends int64 [1]                      rows to keep: n, 1 ≤ n ≤ S
 *   in  pads int64 [8]                      [0,0,0,0, 0,0,C−n,0]: zero rows up to the capacity C
 *   out dst  [1, H, C, D]                   = Pad(Slice(src, rows [0, n) of axis 2))
 *
 * One graph serves a growth (device → device), saving a conversation's rows (device → host: dst
 * bound to host memory, C = n) and restoring them (host → device). `ends` and `pads` are CPU
 * inputs of the Slice and Pad kernels on every EP, so only the rows themselves move.
 */
import type { GraphDtype } from './graph-target.ts';
import { DataType, OnnxGraphBuilder } from './onnx-builder.ts';

/** Input and output names of the copy graph (native/src/kv_copier.cc binds them). */
export const KV_COPY_IO = { src: 'src', ends: 'ends', pads: 'pads', dst: 'dst' } as const;

/**
 * The serialized copy graph (opset 18) for KV tensors of `dtype`.
 * @returns a ModelProto's bytes (no external data), a few hundred bytes.
 */
export function buildKvCopyGraph(dtype: GraphDtype): Uint8Array {
  const g = new OnnxGraphBuilder('unused.data');
  const T = dtype === 'float16' ? DataType.FLOAT16 : DataType.FLOAT;
  const src = g.input(KV_COPY_IO.src, T, [1, 'H', 'S', 'D']);
  const ends = g.input(KV_COPY_IO.ends, DataType.INT64, [1]);
  const pads = g.input(KV_COPY_IO.pads, DataType.INT64, [8]);
  const kept = g.op('Slice', [src, g.int64([0]), ends, g.int64([2])]);
  g.node('Pad', [kept, pads], [KV_COPY_IO.dst], { mode: 'constant' });
  g.output(KV_COPY_IO.dst, T, [1, 'H', 'C', 'D']);
  return g.build('ropewalk_kv_copy', { '': 18 }, 'Ropewalk KV rows copy (Slice + Pad)').model;
}
