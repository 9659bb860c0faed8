/**
 * Linears that read one input as ONE stacked MatMulNBits (`QuantizedMatMul.applyStacked`: q/k/v
 * and gate/up of the CPU graph, one activation quantization instead of three and two), on real
 * ONNX Runtime: each output equals the output of its own MatMulNBits exactly, with llama.cpp's
 * half-scale activations (format Q8_0 / Q4_0) and without (round-to-nearest `rtn`), from weights
 * in memory and quantized while written; weights of different layouts stay separate matmuls.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { quantizeRtn, quantizeRtnLazy } from '../../main/engine/model/gguf/quantized-weights.ts';
import type { QuantizedWeight } from '../../main/engine/model/manifest.ts';
import { DataType, OnnxGraphBuilder, writeExternalData } from '../../main/engine/model/onnx-builder.ts';
import { QuantizedMatMul } from '../../main/engine/model/quantized-matmul.ts';
import { mulberry32 } from '../helpers/prng.ts';

const K = 128;
const M = 3;
const rand = mulberry32(11);
const values = (n: number) => Float32Array.from({ length: n }, () => (rand() - 0.5) * 2);

/**
 * Runs y_i = x · W_iᵀ, stacked or one matmul each (x's rank told to the graph or not); returns the
 * outputs and the graph's node count per op type.
 */
async function run(ws: QuantizedWeight[], x: Float32Array, stacked: boolean, rank?: 2): Promise<{ ys: Float32Array[]; matmuls: number; ops: Map<string, number> }> {
  const g = new OnnxGraphBuilder('model.onnx.data');
  g.input('x', DataType.FLOAT, [M, K]);
  const mm = new QuantizedMatMul(g);
  const parts = ws.map((w, i) => ({ name: `w${i}`, w }));
  const ys = stacked ? mm.applyStacked('x', 'w_stacked', parts, rank) : parts.map((p) => mm.apply('x', p.name, p.w, rank));
  ys.forEach((y, i) => {
    g.node('Identity', [y], [`y${i}`]);
    g.output(`y${i}`, DataType.FLOAT, [M, ws[i].shape[0]]);
  });
  const built = g.build('stacked', { '': 18, 'com.microsoft': 1 }, 'stacked MatMulNBits probe');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-stacked-'));
  try {
    writeFileSync(path.join(dir, 'model.onnx'), built.model);
    await writeExternalData(path.join(dir, 'model.onnx.data'), built);
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
    const out = await session.run({ x: new ort.Tensor('float32', x, [M, K]) });
    await session.release();
    const ops = new Map<string, number>();
    for (const n of onnxProto.onnx.ModelProto.decode(built.model).graph!.node!) ops.set(n.opType!, (ops.get(n.opType!) ?? 0) + 1);
    return { ys: ws.map((_, i) => out[`y${i}`].data as Float32Array), matmuls: ops.get('MatMulNBits') ?? 0, ops };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const [format, bits] of [['rtn', 8], ['Q8_0', 8], ['rtn', 4], ['Q4_0', 4]] as const) {
  test(`${format} (${bits} bits): a stacked MatMulNBits gives each weight's own output exactly, in memory and lazily quantized`, async () => {
    const shapes = [256, 64, 64];
    const floats = shapes.map((n) => ({ shape: [n, K], data: values(n * K) }));
    const inMemory = floats.map((f) => ({ ...quantizeRtn(f, bits)!, format }));
    const lazy = floats.map((f) => ({ ...quantizeRtnLazy(f, bits)!, format }));
    const x = values(M * K);
    const separate = await run(inMemory, x, false);
    for (const ws of [inMemory, lazy]) {
      const stacked = await run(ws, x, true);
      assert.equal(stacked.matmuls, 1);
      for (let i = 0; i < shapes.length; i++) assert.deepEqual(stacked.ys[i], separate.ys[i], `output ${i}`);
    }
    assert.equal(separate.matmuls, 3);
  });
}

test('weights of different layouts (bits) are not stacked: one MatMulNBits each, same outputs', async () => {
  const floats = [256, 64].map((n) => ({ shape: [n, K], data: values(n * K) }));
  const ws = [quantizeRtn(floats[0], 8)!, quantizeRtn(floats[1], 4)!];
  const x = values(M * K);
  const a = await run(ws, x, true);
  const b = await run(ws, x, false);
  assert.equal(a.matmuls, 2);
  for (let i = 0; i < ws.length; i++) assert.deepEqual(a.ys[i], b.ys[i]);
});

test('Q4_0 with the input\'s rank known: the half-scale rescaling restores its shape from a constant (10 nodes, no Shape), same outputs', async () => {
  const floats = [256, 64].map((n) => ({ shape: [n, K], data: values(n * K) }));
  const ws = floats.map((f) => ({ ...quantizeRtn(f, 4)!, format: 'Q4_0' }));
  const x = values(M * K);
  const unknown = await run(ws, x, true);
  const known = await run(ws, x, true, 2);
  assert.equal(unknown.ops.get('Shape'), 1);
  assert.equal(known.ops.get('Shape'), undefined);
  const count = (ops: Map<string, number>) => [...ops.values()].reduce((a, b) => a + b, 0);
  // Reshape, Abs, ReduceMax, Div, Cast, Cast, Max, Div, Mul, Reshape; then MatMulNBits, Split, 2 Identity.
  assert.equal(count(known.ops), 10 + 4);
  assert.equal(count(unknown.ops), 11 + 4);
  for (let i = 0; i < ws.length; i++) assert.deepEqual(known.ys[i], unknown.ys[i], `output ${i}`);
});

/** `quantizeRtn` blocks relabelled as a GGUF format with per-block offsets (Q4_K's mins) or zero points (Q6_K's 32, Q3_K's 4). */
function withExtras(n: number, bits: 4 | 8, format: string, extras: { offsets?: boolean; zeroPoints?: boolean }): QuantizedWeight {
  const w = { ...quantizeRtn({ shape: [n, K], data: values(n * K) }, bits)!, format };
  const kBlocks = K / w.blockSize;
  if (extras.offsets) w.blockOffsets = values(n * kBlocks).map((v) => v * 0.1);
  // 8-bit: one zero point a block; 4-bit: two a byte, packed per row (MatMulNBits' layout).
  if (extras.zeroPoints) w.zeroPoints = Uint8Array.from({ length: n * (bits === 8 ? kBlocks : Math.ceil(kBlocks / 2)) }, () => Math.floor(rand() * 256));
  return w;
}

test('Q4_K_M\'s layouts stack too: block offsets (Q4_K) and zero points (8- and 4-bit) are concatenated; each output equals its own MatMulNBits\'', async () => {
  for (const [label, bits, format, extras] of [
    ['4-bit with block offsets', 4, 'Q4_K', { offsets: true }],
    ['8-bit with zero points', 8, 'Q6_K', { zeroPoints: true }],
    ['4-bit with packed zero points', 4, 'Q3_K', { zeroPoints: true }],
  ] as const) {
    const ws = [256, 64, 64].map((n) => withExtras(n, bits, format, extras));
    const x = values(M * K);
    const stacked = await run(ws, x, true);
    const separate = await run(ws, x, false);
    assert.equal(stacked.matmuls, 1, label);
    assert.equal(separate.matmuls, 3, label);
    // With offsets: one offsets MatMul [M, K/32] · [K/32, ΣN] instead of three.
    if ('offsets' in extras) assert.deepEqual([stacked.ops.get('MatMul'), separate.ops.get('MatMul')], [1, 3], label);
    for (let i = 0; i < ws.length; i++) assert.deepEqual(stacked.ys[i], separate.ys[i], `${label}: output ${i}`);
  }
});

test('Q4_K_M\'s q/k/v where v is Q6_K: q and k stack, v runs alone; outputs in order, equal to one MatMulNBits each', async () => {
  const ws = [withExtras(256, 4, 'Q4_K', { offsets: true }), withExtras(64, 4, 'Q4_K', { offsets: true }), withExtras(64, 8, 'Q6_K', { zeroPoints: true })];
  const x = values(M * K);
  const stacked = await run(ws, x, true);
  const separate = await run(ws, x, false);
  assert.equal(stacked.matmuls, 2);
  for (let i = 0; i < ws.length; i++) assert.deepEqual(stacked.ys[i], separate.ys[i], `output ${i}`);
});
