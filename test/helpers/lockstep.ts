/**
 * Greedy decoding of an ONNX Runtime graph (`OnnxRunner`) in lockstep with the independent float64
 * reference forward (`ReferenceModel`): each step feeds the reference's argmax to both, so the two
 * see the same tokens even where a near tie would part their own greedy choices. The KV-cache
 * tests (sliding window, context shift, save / restore) run to a length, do their operation on
 * both, then check the steps after it with `decodeInLockstep`.
 */
import assert from 'node:assert/strict';
import { argmax, maxAbsDiff, type OnnxRunner } from './onnx-runner.ts';
import type { ReferenceModel } from './reference-forward.ts';

/**
 * Steps both until the runner's KV cache holds `length` positions; `expected`: the reference's
 * logits [V] for the last position so far. @returns the reference's logits for the new last position.
 */
export async function advanceInLockstep(runner: OnnxRunner, ref: ReferenceModel, expected: Float64Array, length: number): Promise<Float64Array> {
  while (runner.kv.length < length) {
    const next = argmax(expected);
    await runner.forward([next]);
    expected = ref.forward([next]);
  }
  return expected;
}

/**
 * `steps` steps on from `expected`, asserting at each that the runner's logits are within
 * 1e-5 · max(1, scale) of the reference's (scale: the reference's max |logit|) and pick the same
 * token; `what` names the state in the failure message ("after the shift").
 * @returns the worst |onnx − ref| / max(1, scale) over the steps.
 */
export async function decodeInLockstep(runner: OnnxRunner, ref: ReferenceModel, expected: Float64Array, steps: number, what: string): Promise<number> {
  let worst = 0;
  for (let step = 0; step < steps; step++) {
    const next = argmax(expected);
    const onnx = await runner.forward([next]);
    expected = ref.forward([next]);
    const { diff, scale } = maxAbsDiff(onnx, expected);
    worst = Math.max(worst, diff / Math.max(1, scale));
    assert.ok(diff <= 1e-5 * Math.max(1, scale), `step ${step} ${what}: max |onnx − ref| = ${diff}, scale ${scale}`);
    assert.equal(argmax(onnx), argmax(expected), `step ${step} ${what}: greedy token differs`);
  }
  return worst;
}
