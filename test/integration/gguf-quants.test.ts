/**
 * GGUF reading and dequantization against gguf-py: every tensor type in
 * ../shared/models/gguf/quant-blocks.gguf equals its `.ref` (gguf-py's float32 dequantization)
 * bit for bit; an unsupported type fails naming the tensor and its type; the memory estimate read
 * from a header counts every quantized type as its MatMulNBits conversion really stores it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UnsupportedTensorTypeError } from '../../main/engine/errors.ts';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { matMulNBitsBytes, quantizedFromGguf } from '../../main/engine/model/gguf/quantized-weights.ts';
import { quantizedBytes } from '../../main/engine/model/manifest.ts';
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
