/**
 * gpt-oss's clamped SwiGLU as the graph step the FFN and the MoE experts call
 * (block-variants.ts `applyGatedActivation` with `GPT_OSS_SWIGLU`), run by ONNX Runtime's CPU EP
 * on gate / up values on both sides of the clamps (−∞-ward gates are not clamped, gates above 7
 * are; up is clamped to ±7), against gpt-oss's `swiglu` written out in
 * test/helpers/reference-activations.ts; and the silu / gelu-tanh kinds against theirs.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import ort from 'onnxruntime-node';
import { applyGatedActivation, GPT_OSS_SWIGLU, type GatedActivationKind } from '../../main/engine/model/block-variants.ts';
import { DataType, OnnxGraphBuilder } from '../../main/engine/model/onnx-builder.ts';
import { clampedSwigluReference, geluTanh, silu } from '../helpers/reference-activations.ts';

const GATE = [-20, -7.5, -7, -1, 0, 0.5, 3, 6.99, 7, 7.01, 12, 100];
const UP = [-100, -7.01, -7, -3, 0, 1, 2.5, 6.99, 7, 7.01, -12, 50];

/** The activation's graph over [1, n] gate / up inputs, run once on the CPU EP. */
async function run(act: GatedActivationKind): Promise<Float32Array> {
  const g = new OnnxGraphBuilder('unused.data');
  g.input('gate', DataType.FLOAT, [1, GATE.length]);
  g.input('up', DataType.FLOAT, [1, UP.length]);
  g.node('Identity', [applyGatedActivation(g, 'gate', 'up', act, (v) => g.float32([v]))], ['y']);
  g.output('y', DataType.FLOAT, [1, GATE.length]);
  const session = await ort.InferenceSession.create(g.build('act', { '': 18 }, 'activation probe').model);
  try {
    const t = (v: number[]) => new ort.Tensor('float32', Float32Array.from(v), [1, v.length]);
    const out = await session.run({ gate: t(GATE), up: t(UP) });
    return out.y.data as Float32Array;
  } finally {
    await session.release();
  }
}

// ONNX Runtime's CPU Sigmoid (MLAS's logistic approximation) is within ~3e-6 absolute where σ is
// tiny (σ(−20) comes out 0): an absolute 1e-5 plus float32 rounding of the larger values.
const near = (a: number, b: number) => Math.abs(a - b) <= 1e-5 + 2e-6 * Math.abs(b);

test("clamped SwiGLU (α 1.702, limit 7) equals gpt-oss's swiglu on both sides of the clamps", async () => {
  const y = await run({ kind: 'swiglu-clamped', ...GPT_OSS_SWIGLU });
  GATE.forEach((gate, i) => {
    const want = clampedSwigluReference(Math.fround(gate), Math.fround(UP[i]), 1.702, 7);
    assert.ok(near(y[i], want), `gate ${gate}, up ${UP[i]}: graph ${y[i]}, gpt-oss ${want}`);
  });
  // The clamps engage: gate 100 acts as 7, up 50 as 7; gate −20 is not clamped (σ drives it to ~0).
  assert.ok(near(y[11], 7 / (1 + Math.exp(-1.702 * 7)) * 8));
  assert.ok(Math.abs(y[0]) < 1e-5);
});

test('silu and gelu-tanh kinds equal their formulas', async () => {
  const s = await run({ kind: 'silu' });
  const gl = await run({ kind: 'gelu-tanh' });
  GATE.forEach((gate, i) => {
    const [x, u] = [Math.fround(gate), Math.fround(UP[i])];
    assert.ok(near(s[i], silu(x) * u), `silu ${gate}: ${s[i]} vs ${silu(x) * u}`);
    assert.ok(near(gl[i], geluTanh(x) * u), `gelu ${gate}: ${gl[i]} vs ${geluTanh(x) * u}`);
  });
});
