/**
 * The native addon's ropewalk.QkNormRope (native/src/qk_norm_rope.h): its work on one head row
 * (RMS norm, then RoPE) against the definitions computed in float64 here on the same float32
 * inputs (RMSNorm, Zhang & Sennrich 2019; RoPE, Su et al. 2021: both pair layouts, head sizes 8,
 * 64 and 128, angles of positions up to 40,000), and its typed refusal of sizes that disagree.
 * The op inside a graph is compared with ONNX Runtime's own nodes by decode-attention.test.ts: the
 * Qwen3-shaped model's native graph (QkNormRope, DecodeAttention) against the CPU graph's
 * (SimplifiedLayerNormalization, RotaryEmbedding, GroupQueryAttention), two prefill chunks and 40
 * decode steps of logits.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';

const status = loadNativeAddon();
const addon = status.available ? status.addon : null;
const skip = addon?.qkNormRopeRow ? false : `native addon without qkNormRopeRow (${status.available ? 'an older build' : status.reason})`;

/** Values of varied sign and scale, deterministic. */
const values = (n: number, seed: number, amp = 1) => Float32Array.from({ length: n }, (_, i) => amp * Math.sin(i * 0.731 + seed) * (1 + (i % 5)));

/** The definition in float64: y = x / √(mean(x²) + eps) · w, then each pair (a, b) → (a·cos − b·sin, b·cos + a·sin). */
function reference(x: Float32Array, w: Float32Array, cos: Float32Array, sin: Float32Array, interleaved: boolean, eps: number): Float64Array {
  const hd = x.length;
  const rms = Math.sqrt(x.reduce((a, v) => a + v * v, 0) / hd + eps);
  const n = Float64Array.from(x, (v, i) => (v / rms) * w[i]);
  const y = new Float64Array(hd);
  for (let p = 0; p < hd / 2; p++) {
    const [i, j] = interleaved ? [2 * p, 2 * p + 1] : [p, p + hd / 2];
    y[i] = n[i] * cos[p] - n[j] * sin[p];
    y[j] = n[j] * cos[p] + n[i] * sin[p];
  }
  return y;
}

test('ropewalk.QkNormRope\'s row equals RMS norm then RoPE in float64 within float32 rounding, both pair layouts', { skip }, (t) => {
  let worst = 0;
  for (const hd of [8, 64, 128]) {
    for (const interleaved of [false, true]) {
      for (const [position, amp] of [[0, 1], [17, 3], [40_000, 0.01]] as const) {
        const x = values(hd, hd + position, amp);
        const w = values(hd, 7, 0.5);
        // The RoPE row of `position` at θ = 1e6 (Qwen3's), as the RoPE cache stores it (float32).
        const angles = Array.from({ length: hd / 2 }, (_, i) => position * 1e6 ** (-(2 * i) / hd));
        const cos = Float32Array.from(angles, Math.cos);
        const sin = Float32Array.from(angles, Math.sin);
        const got = addon!.qkNormRopeRow!(x, w, cos, sin, interleaved, 1e-6);
        const want = reference(x, w, cos, sin, interleaved, 1e-6);
        const scale = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
        const err = got.reduce((a, v, i) => Math.max(a, Math.abs(v - want[i])), 0) / scale;
        worst = Math.max(worst, err);
        // A few float32 roundings (the sum of squares, the division, the weight, the rotation): ~2^-21.
        assert.ok(err < 1e-6, `hd ${hd}, interleaved ${interleaved}, position ${position}: off by ${err} of max |y|`);
      }
    }
  }
  t.diagnostic(`worst |Δ| / max |y|: ${worst.toExponential(1)}`);
});

test('ropewalk.QkNormRope\'s row refuses sizes that disagree, an odd head size, a non-positive eps and other arrays, naming them', { skip }, () => {
  const f = (n: number) => new Float32Array(n);
  const isArg = (re: RegExp) => (e: Error & { code?: string }) => e.code === 'ORT_ARG' && re.test(e.message);
  assert.throws(() => addon!.qkNormRopeRow!(f(7), f(7), f(3), f(3), false, 1e-6), isArg(/x of 7 values \(even\)/));
  assert.throws(() => addon!.qkNormRopeRow!(f(8), f(8), f(4), f(3), false, 1e-6), isArg(/sin of 3 \(half of x's\)/));
  assert.throws(() => addon!.qkNormRopeRow!(f(8), f(6), f(4), f(4), false, 1e-6), isArg(/w of 6/));
  assert.throws(() => addon!.qkNormRopeRow!(f(8), f(8), f(4), f(4), false, 0), isArg(/eps 0\.0+ \(> 0\)/));
  assert.throws(() => addon!.qkNormRopeRow!(new Uint16Array(8) as never, f(8), f(4), f(4), false, 1e-6), isArg(/must be Float32Arrays/));
});
