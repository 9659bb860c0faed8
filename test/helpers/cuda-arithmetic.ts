/**
 * A float16 graph rewritten so that ONNX Runtime's CPU EP computes it with CUDA's arithmetic:
 * every node in float32, every float16 value a node makes rounded to float16 once, as CUDA's
 * float16 kernels store their outputs (they compute in float32 inside: GroupQueryAttention,
 * MatMulNBits, SimplifiedLayerNormalization, Gemm; an elementwise op's one rounding is the same).
 *
 * Why the float16 graph itself is no stand-in on the CPU EP: ONNX Runtime 1.30's CPU EP has no
 * float16 kernel for Add, Mul, Sub, Sigmoid, SimplifiedLayerNormalization, Gemm, …, so its
 * InsertCastTransformer wraps each such node in Casts it names `InsertedPrecisionFreeCast_`, and
 * its RemoveDuplicateCastTransformer then removes every float32 → float16 → float32 pair between
 * two of them (and a user's float32 → float16 Cast followed by one of its own), as "precision
 * free" (onnxruntime/core/optimizer/insert_cast_transformer.cc, `UnsafeCast`). A chain of such
 * nodes (the residual stream, norms, RoPE, the MLP's activation) then runs in float32 with no
 * float16 rounding at all, which CUDA does not do: measured on stories260K's CUDA graph before its
 * float32 spine, |Δ log p| 1.65e-2 on the plain graph against 3.05e-2 rewritten
 * (test/integration/graph-float16.test.ts). A pair of the user's own Casts (float32 → float16 →
 * float32, neither named so) is kept: that is how each value is rounded here.
 *
 * Graph inputs and outputs keep their names and dtypes (float16 KV in and out), so a session on
 * the rewritten model binds as the original does.
 */
import onnxProto from 'onnx-proto';
import { nodeTypes } from './graph-kernels.ts';

const { onnx } = onnxProto;
const FLOAT = onnx.TensorProto.DataType.FLOAT;
const FLOAT16 = onnx.TensorProto.DataType.FLOAT16;

type Node = onnxProto.onnx.INodeProto;

function cast(from: string, to: string, type: number, name: string): Node {
  return onnx.NodeProto.create({ opType: 'Cast', input: [from], output: [to], attribute: [onnx.AttributeProto.create({ name: 'to', type: onnx.AttributeProto.AttributeType.INT, i: type })], name });
}

/**
 * The model (serialized ONNX) with CUDA's float16 arithmetic for the CPU EP (see the file
 * comment): float16 inputs and initializers cast to float32 where read, float16 Casts made float32
 * ones, and each node's float16 output `o` computed as `o__f32`, rounded to `o` (float16, the
 * original name) and read back as `o__r`.
 * @returns the rewritten model; its external data stay where the original's point.
 */
export function withCudaArithmetic(model: Uint8Array): Uint8Array {
  const m = onnx.ModelProto.decode(model);
  const g = m.graph!;
  const types = nodeTypes(model).values; // element type names: 'float16', 'float', …
  const asFloat = new Map<string, string>();
  const nodes: Node[] = [];
  let k = 0;
  for (const n of g.node ?? []) {
    n.input = (n.input ?? []).map((v) => {
      if (v === '' || types.get(v) !== 'float16') return v;
      if (!asFloat.has(v)) {
        asFloat.set(v, `${v}__r`);
        nodes.push(cast(v, `${v}__r`, FLOAT, `cuda_arith_${k++}`));
      }
      return asFloat.get(v)!;
    });
    if (n.opType === 'Cast') for (const a of n.attribute ?? []) if (a.name === 'to' && Number(a.i) === FLOAT16) a.i = FLOAT;
    const rounding: Node[] = [];
    n.output = (n.output ?? []).map((o) => {
      if (types.get(o) !== 'float16') return o;
      rounding.push(cast(`${o}__f32`, o, FLOAT16, `cuda_arith_${k++}`), cast(o, `${o}__r`, FLOAT, `cuda_arith_${k++}`));
      asFloat.set(o, `${o}__r`);
      return `${o}__f32`;
    });
    nodes.push(n, ...rounding);
  }
  g.node = nodes;
  return onnx.ModelProto.encode(m).finish();
}

/**
 * The float16 model with the nodes of `ops` (op types) computed in float32, for measuring what a
 * part of the graph costs in float16 (test/bench/float16-parts.ts): their float16 inputs cast to
 * float32 where read (shared), their float16 Casts made float32 ones, their float16 outputs
 * float32, read as they are by other nodes of `ops` and cast back to float16 (under the original
 * name) for the rest. Applied before `withCudaArithmetic`, the values between two such nodes are
 * not rounded; float16 weights stay float16 values.
 */
export function withFloat32Ops(model: Uint8Array, ops: ReadonlySet<string>): Uint8Array {
  const m = onnx.ModelProto.decode(model);
  const g = m.graph!;
  const types = nodeTypes(model).values;
  const asFloat = new Map<string, string>();
  const promoted = new Map<string, string>();
  const nodes: Node[] = [];
  let k = 0;
  for (const n of g.node ?? []) {
    if (!ops.has(n.opType ?? '')) {
      nodes.push(n);
      continue;
    }
    n.input = (n.input ?? []).map((v) => {
      if (v === '' || types.get(v) !== 'float16') return v;
      if (promoted.has(v)) return promoted.get(v)!;
      if (!asFloat.has(v)) {
        asFloat.set(v, `${v}__p`);
        nodes.push(cast(v, `${v}__p`, FLOAT, `float32_ops_${k++}`));
      }
      return asFloat.get(v)!;
    });
    if (n.opType === 'Cast') for (const a of n.attribute ?? []) if (a.name === 'to' && Number(a.i) === FLOAT16) a.i = FLOAT;
    const back: Node[] = [];
    n.output = (n.output ?? []).map((o) => {
      if (types.get(o) !== 'float16') return o;
      promoted.set(o, `${o}__p32`);
      back.push(cast(`${o}__p32`, o, FLOAT16, `float32_ops_${k++}`));
      return `${o}__p32`;
    });
    nodes.push(n, ...back);
  }
  g.node = nodes;
  return onnx.ModelProto.encode(m).finish();
}
