/**
 * The premise of test/helpers/cuda-arithmetic.ts, on ONNX Runtime's CPU EP: a float16 graph's
 * chain of ops without CPU float16 kernels runs in float32 with no float16 rounding between them
 * (so the plain float16 graph measures less rounding than CUDA does), and the rewritten graph
 * rounds every float16 value once, as CUDA's kernels store them (and, with `withFloat32Ops`, not
 * between two nodes promoted to float32 together). The input: y = (x + c) − x with
 * x = 1 and c = 2⁻¹¹ in float16, where x + c rounds to 1 (a tie, to even).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { withCudaArithmetic, withFloat32Ops } from '../helpers/cuda-arithmetic.ts';

const { onnx } = onnxProto;
const F16 = onnx.TensorProto.DataType.FLOAT16;
const ONE = 0x3c00; // 1.0 in float16
const TWO_POW_M11 = 0x1000; // 2^-11 in float16

function model(): Uint8Array {
  const vi = (name: string) => onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType: F16, shape: { dim: [{ dimValue: 1 }] } } } });
  const node = (opType: string, input: string[], output: string) => onnx.NodeProto.create({ opType, input, output: [output], name: output });
  const graph = onnx.GraphProto.create({ name: 'g', node: [node('Add', ['x', 'c'], 't'), node('Sub', ['t', 'x'], 'y')], input: [vi('x'), vi('c')], output: [vi('y')] });
  return onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 18 }], graph })).finish();
}

async function run(bytes: Uint8Array): Promise<number> {
  const session = await ort.InferenceSession.create(bytes);
  try {
    const feeds = { x: new ort.Tensor('float16', new Uint16Array([ONE]), [1]), c: new ort.Tensor('float16', new Uint16Array([TWO_POW_M11]), [1]) };
    const { y } = await session.run(feeds);
    assert.equal(y.type, 'float16');
    return (y.data as Uint16Array)[0];
  } finally {
    await session.release();
  }
}

test('the CPU EP runs a float16 Add → Sub chain in float32 unrounded; with CUDA arithmetic x + c is rounded to float16 first', async () => {
  assert.equal(await run(model()), TWO_POW_M11, 'plain float16 graph on the CPU EP: (1 + 2^-11) − 1 kept in float32');
  assert.equal(await run(withCudaArithmetic(model())), 0, 'CUDA arithmetic: fp16(1 + 2^-11) = 1, so (x + c) − x = 0');
});

test('withFloat32Ops: Add and Sub computed in float32 together leave x + c unrounded under CUDA arithmetic; Add alone rounds its output', async () => {
  assert.equal(await run(withCudaArithmetic(withFloat32Ops(model(), new Set(['Add', 'Sub'])))), TWO_POW_M11);
  assert.equal(await run(withCudaArithmetic(withFloat32Ops(model(), new Set(['Add'])))), 0);
});
