/**
 * The log-probability helpers on hand-written logits: log-sum-exp against a direct sum (and
 * with −∞ entries, as a constraint's mask leaves them), the top ids largest first with ties to
 * the lower id, and the request bound (0–20).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { logSumExp, topIds, validateTopLogprobs } from '../../main/engine/sampling/logprobs.ts';

describe('logprobs helpers', () => {
  it('logSumExp equals ln Σ e^l, skips −∞, and stays finite for large logits', () => {
    const l = Float32Array.of(1, 2, -Infinity, 0.5);
    assert.ok(Math.abs(logSumExp(l) - Math.log(Math.E + Math.E ** 2 + Math.E ** 0.5)) < 1e-6);
    assert.ok(Math.abs(logSumExp(Float32Array.of(1000, 1000)) - (1000 + Math.LN2)) < 1e-9);
    assert.equal(logSumExp(Float32Array.of(-Infinity)), -Infinity);
  });

  it('topIds: the k largest, largest first, ties to the lower id, −∞ and NaN never', () => {
    const l = Float32Array.of(0.1, 3, NaN, 3, -Infinity, 2, 5);
    assert.deepEqual(topIds(l, 3), [6, 1, 3]);
    assert.deepEqual(topIds(l, 0), []);
    assert.deepEqual(topIds(l, 10), [6, 1, 3, 5, 0]);
  });

  it('refuses more than 20 alternatives, quoting the value', () => {
    assert.equal(validateTopLogprobs(20), 20);
    for (const bad of [21, -1, 1.5]) assert.throws(() => validateTopLogprobs(bad), (e: unknown) => e instanceof InvalidOptionError && e.message.includes(String(bad)));
  });
});
