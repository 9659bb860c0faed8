/**
 * GGUF reading and dequantization against gguf-py: every tensor type in
 * ../shared/models/gguf/quant-blocks.gguf equals its `.ref` (gguf-py's float32 dequantization)
 * bit for bit; an unsupported type fails naming the tensor and its type.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UnsupportedTensorTypeError } from '../../main/engine/errors.ts';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
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
