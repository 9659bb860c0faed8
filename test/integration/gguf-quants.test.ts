/**
 * GGUF reading and dequantization against gguf-py: every tensor type in
 * ../shared/models/gguf/quant-blocks.gguf equals its `.ref` (gguf-py's float32 dequantization)
 * bit for bit; an unsupported type fails naming the tensor and its type; the memory estimate read
 * from a header counts every quantized type as its MatMulNBits conversion really stores it; an
 * embedding's rows gathered from its blocks in the graph (GatherBlockQuantized, block offsets
 * added for the types that have them) are gguf-py's rows bit for bit.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';
import { UnsupportedTensorTypeError } from '../../main/engine/errors.ts';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { matMulNBitsBytes, quantizedFromGguf } from '../../main/engine/model/gguf/quantized-weights.ts';
import { quantizedBytes, type QuantizedTensor } from '../../main/engine/model/manifest.ts';
import { CPU_TARGET } from '../../main/engine/model/graph-target.ts';
import { DataType, OnnxGraphBuilder, writeExternalData } from '../../main/engine/model/onnx-builder.ts';
import { gatherBlockQuantized } from '../../main/engine/model/quantized-matmul.ts';
import { LOWBIT_BLOCKS } from '../fixtures/make-lowbit-blocks.ts';
import { GGUF_DIR } from '../helpers/paths.ts';
import path from 'node:path';

const TYPES = ['f16', 'bf16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];

test('every type in quant-blocks.gguf dequantizes exactly to its gguf-py reference', async () => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const t of TYPES) {
      const q = g.tensors.get(`blocks.${t}`);
      const ref = g.tensors.get(`blocks.${t}.ref`);
      assert.ok(q && ref, `blocks.${t} and its .ref are in the file`);
      assert.deepEqual(q.shape, [3, 512]);
      assert.equal(g.typeOf(q).name.toLowerCase(), t);
      const got = await g.readFloat32(q);
      const want = await g.readFloat32(ref);
      const gotBits = new Uint32Array(got.buffer);
      const wantBits = new Uint32Array(want.buffer);
      const bad = gotBits.findIndex((b, i) => b !== wantBits[i]);
      assert.equal(bad, -1, `${t}: element ${bad} is ${got[bad]}, gguf-py says ${want[bad]}`);
      assert.ok(want.some((x) => x !== 0), `${t}: reference is not all zeros`);
    }
  } finally {
    await g.close();
  }
});

test('a tensor of an unsupported type fails naming the tensor and the type', async () => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    const t = { ...g.tensors.get('blocks.q4_k')!, typeId: 16 };
    await assert.rejects(g.readFloat32(t), (e: unknown) => {
      assert.ok(e instanceof UnsupportedTensorTypeError);
      assert.match(e.message, /tensor blocks\.q4_k has type IQ2_XXS, which is not supported/);
      return true;
    });
  } finally {
    await g.close();
  }
});

// model-facts.ts estimates a GGUF's resident bytes from its header with `matMulNBitsBytes`; the
// bundle holds what `quantizedFromGguf` makes. Q2_K, Q3_K, IQ4_NL and IQ4_XS once had no entry in
// its layout table and were counted as float32.
test('the header estimate of every quantized tensor equals the bytes its MatMulNBits form really takes', async () => {
  const files = [
    { file: path.join(GGUF_DIR, 'quant-blocks.gguf'), names: TYPES.filter((t) => t.startsWith('q')).map((t) => `blocks.${t}`) },
    { file: LOWBIT_BLOCKS, names: ['q2_k', 'q3_k', 'iq4_nl', 'iq4_xs', 'mxfp4'].map((t) => `blocks.${t}.weight`) },
  ];
  for (const { file, names } of files) {
    const g = await openGguf(file);
    try {
      for (const name of names) {
        const t = g.tensors.get(name)!;
        const [n, k] = t.shape;
        const converted = quantizedFromGguf(g.typeOf(t), await g.readRaw(t), [n, k]);
        assert.ok(converted, `${name}: converted to MatMulNBits blocks`);
        const estimate = matMulNBitsBytes(t.typeId, n, k);
        assert.ok(estimate, `${name}: the header estimate knows the type`);
        assert.equal(estimate.bytes, quantizedBytes(converted), `${name}: estimate vs converted bytes`);
        assert.equal(estimate.offsets, converted.blockOffsets !== undefined, `${name}: block offsets`);
        assert.ok(estimate.bytes < n * k * 4, `${name}: fewer bytes than float32`);
      }
    } finally {
      await g.close();
    }
  }
});

/** Rows `ids` of a [V, D] quantized weight as the CPU graph gathers an embedding (ONNX Runtime CPU EP). */
async function gatherRows(w: QuantizedTensor, ids: number[]): Promise<Float32Array> {
  const g = new OnnxGraphBuilder('model.onnx.data');
  g.input('ids', DataType.INT64, [1, ids.length]);
  g.node('Identity', [gatherBlockQuantized(g, CPU_TARGET, 'ids', 'embed', w)], ['rows']);
  g.output('rows', DataType.FLOAT, [1, ids.length, w.shape[1]]);
  const built = g.build('gather', { '': 18, 'com.microsoft': 1 }, 'embedding gather probe');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-gather-'));
  try {
    writeFileSync(path.join(dir, 'model.onnx'), built.model);
    await writeExternalData(path.join(dir, 'model.onnx.data'), built);
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
    const out = await session.run({ ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]) });
    await session.release();
    return out.rows.data as Float32Array;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("every quantized type's rows gathered from its blocks (an embedding; Q4_1, Q5_1, Q4_K, Q5_K with their block offsets added) equal gguf-py's dequantization bit for bit", async () => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const t of TYPES.filter((x) => x.startsWith('q'))) {
      const q = g.tensors.get(`blocks.${t}`)!;
      const w = quantizedFromGguf(g.typeOf(q), await g.readRaw(q), q.shape)!;
      const ids = [2, 0, 1, 2];
      const got = new Uint32Array((await gatherRows(w, ids)).buffer);
      const ref = await g.readFloat32(g.tensors.get(`blocks.${t}.ref`)!);
      const D = q.shape[1];
      const want = new Uint32Array(Float32Array.from(ids.flatMap((r) => [...ref.subarray(r * D, (r + 1) * D)])).buffer);
      const bad = got.findIndex((b, i) => b !== want[i]);
      assert.equal(bad, -1, `${t}${w.blockOffsets ? ' (block offsets)' : ''}: gathered element ${bad} differs from gguf-py's`);
    }
  } finally {
    await g.close();
  }
});
