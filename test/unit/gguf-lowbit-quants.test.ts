/**
 * Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 against llama.cpp: test/fixtures/lowbit-blocks.gguf's
 * random blocks dequantize bit for bit to what llama.cpp's `llama-quantize … F32` wrote for them
 * (lowbit-blocks.f32.gguf, made by test/fixtures/make-lowbit-blocks.ts); and a few hand-made
 * blocks whose values follow from the format's definition alone (so a shared misreading of the
 * layout by both would show).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { dequantize, e8m0Half, ggmlType, GGML, KVALUES_IQ4NL } from '../../main/engine/model/gguf/quants.ts';
import { COLS, LOWBIT_BLOCKS, LOWBIT_BLOCKS_F32, LOWBIT_TYPES, ROWS } from '../fixtures/make-lowbit-blocks.ts';
import { floatToHalf } from '../helpers/gguf-writer.ts';

test('every low-bit type in lowbit-blocks.gguf dequantizes bit for bit as llama.cpp does', async () => {
  const q = await openGguf(LOWBIT_BLOCKS);
  const ref = await openGguf(LOWBIT_BLOCKS_F32);
  try {
    for (const name of Object.keys(LOWBIT_TYPES)) {
      const t = q.tensors.get(`blocks.${name}.weight`)!;
      const r = ref.tensors.get(`blocks.${name}.weight`)!;
      assert.equal(q.typeOf(t).name.toLowerCase(), name);
      assert.equal(ref.typeOf(r).name, 'F32');
      assert.deepEqual(t.shape, [ROWS, COLS]);
      const got = new Uint32Array((await q.readFloat32(t)).buffer);
      const want = await ref.readFloat32(r);
      const wantBits = new Uint32Array(want.buffer);
      const bad = got.findIndex((b, i) => b !== wantBits[i]);
      assert.equal(bad, -1, `${name}: element ${bad} is ${new Float32Array(got.buffer)[bad]}, llama.cpp says ${want[bad]}`);
      assert.ok(new Set(want).size > 100, `${name}: the reference has many distinct values`);
    }
  } finally {
    await q.close();
    await ref.close();
  }
});

test('hand-made blocks: IQ4_NL levels times d, MXFP4 E2M1 times 2^(e−127), Q3_K/Q2_K sub-block 0', () => {
  const nl = new Uint8Array(18);
  new DataView(nl.buffer).setUint16(0, floatToHalf(0.5), true);
  for (let j = 0; j < 16; j++) nl[2 + j] = j | ((15 - j) << 4);
  const y = dequantize(ggmlType(GGML.IQ4_NL)!, nl, 32);
  for (let j = 0; j < 16; j++) {
    assert.equal(y[j], 0.5 * KVALUES_IQ4NL[j]);
    assert.equal(y[j + 16], 0.5 * KVALUES_IQ4NL[15 - j]);
  }
  // MXFP4: e = 127 is scale 1, so nibble 0b0111 is E2M1 6.0 and 0b1011 is −1.5 (OCP MX spec).
  const mx = new Uint8Array(17);
  mx[0] = 127;
  mx[1] = 0x7 | (0xb << 4);
  const m = dequantize(ggmlType(GGML.MXFP4)!, mx, 32);
  assert.equal(m[0], 6);
  assert.equal(m[16], -1.5);
  assert.equal(e8m0Half(0), 2 ** -128);
  // Q3_K: all low bits 3, no high bits set (→ −4), scale byte 0 low nibble 1 and high bits 0: sc = 1 − 32.
  const q3 = new Uint8Array(110);
  q3.fill(0xff, 32, 96);
  q3[96] = 1;
  new DataView(q3.buffer).setUint16(108, floatToHalf(2), true);
  assert.equal(dequantize(ggmlType(GGML.Q3_K)!, q3, 256)[0], 2 * (1 - 32) * (3 - 4));
  // Q2_K: sub-block 0 scale 3, min 5; q = 2 → 0.25·3·2 − 0.5·5.
  const q2 = new Uint8Array(84);
  q2[0] = 3 | (5 << 4);
  q2[16] = 2;
  new DataView(q2.buffer).setUint16(80, floatToHalf(0.25), true);
  new DataView(q2.buffer).setUint16(82, floatToHalf(0.5), true);
  assert.equal(dequantize(ggmlType(GGML.Q2_K)!, q2, 256)[0], 0.25 * 3 * 2 - 0.5 * 5);
});
