/**
 * RoPE inverse frequencies, float64. Contract: `inverseFrequencies(rope, maxContext)` returns
 * `invFreq` [R/2] (radians per position for rotary pair i, R = rope.rotaryDim) and
 * `attentionScale` (a multiplier the RoPE cache applies to both cos and sin). It is a pure
 * function of the manifest's RopeConfig and the configured max context, evaluated once per
 * loaded model; nothing here depends on the current position, so a warm decode step does no
 * frequency work. Pair layout (`interleaved` vs `half`) does not change the frequencies, only
 * which elements the graph pairs up, so it is ignored here.
 *
 * Formula sources (read, re-derived; no code copied):
 *   plain    Su et al. 2021, "RoFormer" eq. 15: θ_i = θ^(-2i/R), i = 0 … R/2−1.
 *   linear   kaiokendev / Chen et al. 2023 "Position Interpolation": θ_i / factor
 *            (transformers `_compute_linear_scaling_rope_parameters`).
 *   llama3   Meta Llama 3.1 `apply_scaling` (transformers `_compute_llama3_parameters`).
 *   yarn     Peng et al. 2023, "YaRN" (arXiv 2309.00071) §3.2 NTK-by-parts + eq. 22
 *            (transformers `_compute_yarn_parameters`, `get_mscale`).
 *   dynamic  bloc97 / emozilla "Dynamic NTK" (transformers `_compute_dynamic_ntk_parameters`).
 *   factors  GGUF `rope_freqs.weight`: llama.cpp's rope divides θ_i by freq_factors[i] (ggml
 *            `rope_yarn` input `theta_extrap / freq_factor`), after any scaling variant.
 * transformers computes these in float32; we compute in float64, so values agree to float32
 * rounding, not bit for bit.
 */
import { InvalidOptionError } from '../errors.ts';
import type { RopeConfig } from '../model/manifest.ts';

/** Output of `inverseFrequencies`. */
export interface InverseFrequencies {
  /** [R/2] float64, radians per position of rotary pair i. */
  invFreq: Float64Array;
  /** Multiplies cos and sin (YaRN's attention factor; 1 for every other variant). */
  attentionScale: number;
}

/**
 * Computes RoPE's per-pair inverse frequencies with the model's scaling variant.
 *
 * - plain:   invFreq[i] = 1 / θ^(2i/R)
 * - linear:  plain / factor
 * - llama3:  with wavelength λ_i = 2π / invFreq[i], lowλ = orig/lowFreqFactor,
 *            highλ = orig/highFreqFactor: λ_i < highλ → unchanged; λ_i > lowλ → /factor;
 *            otherwise s = (orig/λ_i − lowFreqFactor)/(highFreqFactor − lowFreqFactor) and
 *            invFreq = (1−s)·invFreq/factor + s·invFreq.
 * - yarn:    d(r) = R·ln(orig/(2π·r)) / (2·ln θ); low = max(floor(d(betaFast)), 0),
 *            high = min(ceil(d(betaSlow)), R−1) (high += 0.001 if equal); without the floor and
 *            ceil when `truncate` is false (transformers' `truncate`, gpt-oss's config; gpt-oss's
 *            own `_compute_concentration_and_inv_freq` never rounds);
 *            ramp_i = clamp((i − low)/(high − low), 0, 1), e_i = 1 − ramp_i;
 *            invFreq = (1/(factor·θ^(2i/R)))·(1 − e_i) + (1/θ^(2i/R))·e_i.
 *            attentionScale = attentionFactor ?? (factor ≤ 1 ? 1 : 0.1·ln(factor) + 1).
 * - dynamic: θ' = θ·((factor·L/orig) − (factor − 1))^(R/(R−2)), invFreq = 1/θ'^(2i/R).
 *            transformers re-evaluates this with L = the current sequence length whenever the
 *            sequence grows past the cached length. A warm step must do zero work here, so we
 *            evaluate it ONCE with L = maxContext when maxContext > orig, and use plain θ when
 *            maxContext ≤ orig (transformers' value for any sequence ≤ orig). Consequence:
 *            with maxContext > orig, every position (short sequences included) uses the
 *            frequencies transformers would use for a maxContext-long sequence, so outputs match
 *            transformers exactly only once a sequence reaches maxContext; the cache never has to
 *            be recomputed when the sequence grows.
 *
 * - longrope (Ding et al. 2024, "LongRoPE"; transformers `_compute_longrope_parameters`):
 *            invFreq = 1/(ext_i·θ^(2i/R)), ext = longFactor when maxContext > orig, else
 *            shortFactor (transformers switches by the current length, llama.cpp by its context
 *            size; we choose once, by maxContext, as llama.cpp does); attentionScale =
 *            attentionFactor.
 * - frequencyFactors (any variant): invFreq[i] /= frequencyFactors[i] afterwards.
 *
 * @param rope  the manifest's RoPE parameters; R = rope.rotaryDim (even, > 0), θ = rope.theta.
 * @param maxContext  configured max context in positions (positive integer); only `dynamic` reads it.
 * @returns invFreq [R/2] float64 (radians/position) and attentionScale (dimensionless).
 * @throws InvalidOptionError quoting the bad value when θ ≤ 1, R is not an even positive integer,
 *   maxContext is not a positive integer, a scaling parameter is out of range, or the frequency
 *   factors are not R/2 finite numbers > 0.
 */
export function inverseFrequencies(rope: RopeConfig, maxContext: number): InverseFrequencies {
  const out = scaledInverseFrequencies(rope, maxContext);
  const factors = rope.frequencyFactors;
  if (factors === undefined) return out;
  if (factors.length !== out.invFreq.length) {
    throw new InvalidOptionError('rope.frequencyFactors', `expected ${out.invFreq.length} factors (rotaryDim / 2), got ${factors.length}`);
  }
  factors.forEach((f, i) => {
    positive(`rope.frequencyFactors[${i}]`, f);
    out.invFreq[i] /= f;
  });
  return out;
}

/** `inverseFrequencies` before the frequency factors. */
function scaledInverseFrequencies(rope: RopeConfig, maxContext: number): InverseFrequencies {
  const R = rope.rotaryDim;
  const theta = rope.theta;
  if (!Number.isInteger(R) || R <= 0 || R % 2 !== 0) {
    throw new InvalidOptionError('rope.rotaryDim', `expected an even positive integer, got ${R}`);
  }
  if (!Number.isFinite(theta) || theta <= 1) {
    throw new InvalidOptionError('rope.theta', `expected a finite number > 1, got ${theta}`);
  }
  if (!Number.isInteger(maxContext) || maxContext <= 0) {
    throw new InvalidOptionError('maxContext', `expected a positive integer, got ${maxContext}`);
  }
  const half = R / 2;
  const s = rope.scaling;
  const invFreq = new Float64Array(half);
  if (s === undefined) {
    fillPlain(invFreq, theta, R);
    return { invFreq, attentionScale: 1 };
  }
  switch (s.type) {
    case 'linear': {
      positive('rope.scaling.factor', s.factor);
      fillPlain(invFreq, theta, R);
      for (let i = 0; i < half; i++) invFreq[i] /= s.factor;
      return { invFreq, attentionScale: 1 };
    }
    case 'llama3': {
      positive('rope.scaling.factor', s.factor);
      positive('rope.scaling.lowFreqFactor', s.lowFreqFactor);
      positive('rope.scaling.highFreqFactor', s.highFreqFactor);
      positiveInt('rope.scaling.originalMaxPositionEmbeddings', s.originalMaxPositionEmbeddings);
      if (!(s.highFreqFactor > s.lowFreqFactor)) {
        throw new InvalidOptionError(
          'rope.scaling.highFreqFactor',
          `must exceed lowFreqFactor (${s.lowFreqFactor}), got ${s.highFreqFactor}`,
        );
      }
      const orig = s.originalMaxPositionEmbeddings;
      const lowFreqWavelen = orig / s.lowFreqFactor;
      const highFreqWavelen = orig / s.highFreqFactor;
      fillPlain(invFreq, theta, R);
      for (let i = 0; i < half; i++) {
        const f = invFreq[i];
        const wavelen = (2 * Math.PI) / f;
        if (wavelen < highFreqWavelen) continue; // high frequency: kept
        if (wavelen > lowFreqWavelen) {
          invFreq[i] = f / s.factor; // low frequency: interpolated fully
        } else {
          const smooth = (orig / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
          invFreq[i] = ((1 - smooth) * f) / s.factor + smooth * f;
        }
      }
      return { invFreq, attentionScale: 1 };
    }
    case 'yarn': {
      positive('rope.scaling.factor', s.factor);
      positiveInt('rope.scaling.originalMaxPositionEmbeddings', s.originalMaxPositionEmbeddings);
      positive('rope.scaling.betaFast', s.betaFast);
      positive('rope.scaling.betaSlow', s.betaSlow);
      if (s.attentionFactor !== undefined) positive('rope.scaling.attentionFactor', s.attentionFactor);
      const orig = s.originalMaxPositionEmbeddings;
      // Dimension index (in [0, R)) at which a pair makes `rotations` turns over `orig` positions.
      const correctionDim = (rotations: number): number =>
        (R * Math.log(orig / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
      const truncate = s.truncate ?? true;
      const low = Math.max(truncate ? Math.floor(correctionDim(s.betaFast)) : correctionDim(s.betaFast), 0);
      let high = Math.min(truncate ? Math.ceil(correctionDim(s.betaSlow)) : correctionDim(s.betaSlow), R - 1);
      if (low === high) high += 0.001; // as transformers: avoid a zero-width ramp
      for (let i = 0; i < half; i++) {
        const posFreq = Math.pow(theta, (2 * i) / R);
        const extrapolation = 1 / posFreq;
        const interpolation = 1 / (s.factor * posFreq);
        const ramp = Math.min(Math.max((i - low) / (high - low), 0), 1);
        const extrapolationWeight = 1 - ramp;
        invFreq[i] = interpolation * (1 - extrapolationWeight) + extrapolation * extrapolationWeight;
      }
      const attentionScale = s.attentionFactor ?? (s.factor <= 1 ? 1 : 0.1 * Math.log(s.factor) + 1);
      return { invFreq, attentionScale };
    }
    case 'dynamic': {
      positive('rope.scaling.factor', s.factor);
      positiveInt('rope.scaling.originalMaxPositionEmbeddings', s.originalMaxPositionEmbeddings);
      if (R <= 2) {
        throw new InvalidOptionError('rope.rotaryDim', `dynamic NTK needs rotaryDim > 2, got ${R}`);
      }
      const orig = s.originalMaxPositionEmbeddings;
      let base = theta;
      if (maxContext > orig) {
        base = theta * Math.pow((s.factor * maxContext) / orig - (s.factor - 1), R / (R - 2));
      }
      fillPlain(invFreq, base, R);
      return { invFreq, attentionScale: 1 };
    }
    case 'longrope': {
      positiveInt('rope.scaling.originalMaxPositionEmbeddings', s.originalMaxPositionEmbeddings);
      positive('rope.scaling.attentionFactor', s.attentionFactor);
      const factors = maxContext > s.originalMaxPositionEmbeddings ? s.longFactor : s.shortFactor;
      if (factors.length !== half) {
        throw new InvalidOptionError('rope.scaling', `LongRoPE needs ${half} factors (rotaryDim / 2), got ${factors.length}`);
      }
      fillPlain(invFreq, theta, R);
      factors.forEach((f, i) => {
        positive(`rope.scaling factor ${i}`, f);
        invFreq[i] /= f;
      });
      return { invFreq, attentionScale: s.attentionFactor };
    }
    default: {
      const unknown: { type?: unknown } = s;
      throw new InvalidOptionError('rope.scaling.type', `unsupported RoPE scaling ${String(unknown.type)}`);
    }
  }
}

/** invFreq[i] = 1 / base^(2i/R), float64 (RoFormer eq. 15). */
function fillPlain(out: Float64Array, base: number, R: number): void {
  for (let i = 0; i < out.length; i++) out[i] = 1 / Math.pow(base, (2 * i) / R);
}

function positive(option: string, v: number): void {
  if (!Number.isFinite(v) || v <= 0) {
    throw new InvalidOptionError(option, `expected a finite number > 0, got ${v}`);
  }
}

function positiveInt(option: string, v: number): void {
  if (!Number.isInteger(v) || v <= 0) {
    throw new InvalidOptionError(option, `expected a positive integer, got ${v}`);
  }
}
