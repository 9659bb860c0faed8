/**
 * Random weights for the benches' big synthetic models: values cut from one 4M-value pool
 * (generating 600M fresh ones would take minutes); shapes decide speed, not values. Norm weights
 * are 1. Deterministic (seeded).
 */
import { mulberry32 } from '../helpers/prng.ts';

/** A `weightOf(name, shape)` for `writeModelGguf`: float32 values in [−0.02, 0.02), norms 1. */
export function poolWeights(): (name: string, shape: number[]) => Float32Array {
  const rand = mulberry32(7);
  const pool = Float32Array.from({ length: 1 << 22 }, () => (rand() - 0.5) * 0.04);
  let start = 0;
  return (name, shape) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const out = new Float32Array(n);
    if (/norm\.weight$/.test(name)) return out.fill(1);
    for (let i = 0; i < n; i += pool.length) out.set(pool.subarray(0, Math.min(pool.length, n - i)), i);
    start = (start + 7919) % pool.length;
    out.copyWithin(0, start % n);
    return out;
  };
}
