/**
 * Test helper: the gated FFN activations of the reference forward (reference-forward.ts), float64,
 * from their papers and reference code, not from the graph builder:
 *   silu(x) = x·σ(x)                                          (Shazeer 2020, "GLU Variants": SwiGLU)
 *   gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))       (Hendrycks & Gimpel 2016, §2)
 *   gpt-oss's clamped SwiGLU (gpt-oss `torch/model.py` `swiglu`):
 *     x_glu = min(gate, limit); x_linear = clamp(up, −limit, limit);
 *     out = x_glu·σ(α·x_glu)·(x_linear + 1)
 * `gatedReference(gate, up, config)` is the activation combined with up for one element.
 */
import type { ModelConfig } from '../../main/engine/model/manifest.ts';

export function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
}

/** gpt-oss's swiglu for one (gate, up) pair. */
export function clampedSwigluReference(gate: number, up: number, alpha: number, limit: number): number {
  const xGlu = Math.min(gate, limit);
  const xLinear = Math.min(Math.max(up, -limit), limit);
  return (xGlu / (1 + Math.exp(-alpha * xGlu))) * (xLinear + 1);
}

/** The config's FFN activation of `gate` times `up` (Gemma: GELU-tanh; clampedSwiglu; else SiLU). */
export function gatedReference(gate: number, up: number, c: Pick<ModelConfig, 'gemma' | 'clampedSwiglu'>): number {
  if (c.gemma) return geluTanh(gate) * up;
  if (c.clampedSwiglu) return clampedSwigluReference(gate, up, c.clampedSwiglu.alpha, c.clampedSwiglu.limit);
  return silu(gate) * up;
}
