/**
 * The reference forward's RoPE (reference-forward.ts re-exports it): inverse frequencies with every
 * scaling variant, cos/sin rows and the rotation of one head, in float64 by straightforward loops,
 * written from the formulas listed in reference-forward.ts's header, never from the engine's
 * RoPE cache.
 */
import type { RopeConfig } from '../../main/engine/model/manifest.ts';

/**
 * The RoPE base actually used: θ, or for `dynamic` NTK scaling
 * θ·((factor·L/orig) − (factor − 1))^(R/(R−2)) with L = maxContext when L > orig.
 */
export function referenceRopeBase(rope: RopeConfig, maxContext: number): number {
  const s = rope.scaling;
  if (s?.type === 'dynamic' && maxContext > s.originalMaxPositionEmbeddings) {
    const R = rope.rotaryDim;
    const L = maxContext;
    return rope.theta * ((s.factor * L) / s.originalMaxPositionEmbeddings - (s.factor - 1)) ** (R / (R - 2));
  }
  return rope.theta;
}

/** The multiplier on cos and sin: YaRN's attention factor, 1 for every other variant. */
export function referenceRopeAttentionFactor(rope: RopeConfig): number {
  const s = rope.scaling;
  if (s?.type === 'longrope') return s.attentionFactor;
  if (s?.type !== 'yarn') return 1;
  if (s.attentionFactor !== undefined) return s.attentionFactor;
  return s.factor <= 1 ? 1 : 0.1 * Math.log(s.factor) + 1;
}

/**
 * Inverse frequencies invFreq[i], i in [0, R/2), of a RoPE configuration, with its scaling applied
 * (see the module docstring). `maxContext` only matters for `dynamic` scaling.
 */
export function referenceInvFreq(rope: RopeConfig, maxContext: number): Float64Array {
  const R = rope.rotaryDim;
  if (!Number.isInteger(R) || R <= 0 || R % 2 !== 0) throw new Error(`rotaryDim must be a positive even integer, got ${R}`);
  const half = R / 2;
  const base = referenceRopeBase(rope, maxContext);
  const plain = new Float64Array(half);
  for (let i = 0; i < half; i++) plain[i] = 1 / base ** ((2 * i) / R);

  const s = rope.scaling;
  if (!s || s.type === 'dynamic') return plain;
  const out = new Float64Array(half);
  switch (s.type) {
    case 'linear':
      for (let i = 0; i < half; i++) out[i] = plain[i] / s.factor;
      return out;
    case 'llama3': {
      const orig = s.originalMaxPositionEmbeddings;
      const lowFreqWavelen = orig / s.lowFreqFactor;
      const highFreqWavelen = orig / s.highFreqFactor;
      for (let i = 0; i < half; i++) {
        const f = plain[i];
        const wavelen = (2 * Math.PI) / f;
        if (wavelen > lowFreqWavelen) out[i] = f / s.factor;
        else if (wavelen < highFreqWavelen) out[i] = f;
        else {
          const smooth = (orig / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
          out[i] = ((1 - smooth) * f) / s.factor + smooth * f;
        }
      }
      return out;
    }
    case 'longrope': {
      const ext = maxContext > s.originalMaxPositionEmbeddings ? s.longFactor : s.shortFactor;
      for (let i = 0; i < half; i++) out[i] = 1 / (ext[i] * base ** ((2 * i) / R));
      return out;
    }
    case 'yarn': {
      const orig = s.originalMaxPositionEmbeddings;
      const corr = (numRotations: number) =>
        (R * Math.log(orig / (numRotations * 2 * Math.PI))) / (2 * Math.log(base));
      // transformers' `truncate` (default true) rounds the ends to whole dims; gpt-oss's config turns it off.
      const round = s.truncate === false ? (x: number) => x : null;
      const low = Math.max((round ?? Math.floor)(corr(s.betaFast)), 0);
      let high = Math.min((round ?? Math.ceil)(corr(s.betaSlow)), R - 1);
      if (low === high) high += 0.001;
      for (let i = 0; i < half; i++) {
        const ramp = Math.min(Math.max((i - low) / (high - low), 0), 1);
        const extrapFactor = 1 - ramp;
        const extrapolation = plain[i];
        const interpolation = plain[i] / s.factor;
        out[i] = interpolation * (1 - extrapFactor) + extrapolation * extrapFactor;
      }
      return out;
    }
  }
}

/**
 * cos and sin (each [R/2]) of the angles position·invFreq[i], times the attention factor
 * (YaRN); the rows a RoPE cache should hold for `position`.
 */
export function referenceRopeCosSin(
  rope: RopeConfig,
  position: number,
  maxContext: number,
  invFreq: Float64Array = referenceInvFreq(rope, maxContext),
): { cos: Float64Array; sin: Float64Array } {
  const m = referenceRopeAttentionFactor(rope);
  const cos = new Float64Array(invFreq.length);
  const sin = new Float64Array(invFreq.length);
  for (let i = 0; i < invFreq.length; i++) {
    const angle = position * invFreq[i];
    cos[i] = Math.cos(angle) * m;
    sin[i] = Math.sin(angle) * m;
  }
  return { cos, sin };
}

/**
 * Rotates one head in place: `buf[offset .. offset+headDim)`, of which the first `rotaryDim`
 * dims rotate (pairs per `layout`) and the rest pass through.
 */
export function rotateHeadInPlace(
  buf: Float64Array,
  offset: number,
  cos: ArrayLike<number>,
  sin: ArrayLike<number>,
  layout: RopeConfig['layout'],
): void {
  const half = cos.length;
  for (let i = 0; i < half; i++) {
    const ia = layout === 'interleaved' ? offset + 2 * i : offset + i;
    const ib = layout === 'interleaved' ? offset + 2 * i + 1 : offset + i + half;
    const a = buf[ia];
    const b = buf[ib];
    buf[ia] = a * cos[i] - b * sin[i];
    buf[ib] = a * sin[i] + b * cos[i];
  }
}

/**
 * RoPE applied to one head vector `vec` (length headDim ≥ rotaryDim) at `position`; returns a new
 * array. `maxContext` (default: `rope.scaling`'s original context, else 4096) only matters for
 * `dynamic` scaling.
 */
export function applyRopeReference(
  vec: ArrayLike<number>,
  position: number,
  rope: RopeConfig,
  maxContext?: number,
): Float64Array {
  if (vec.length < rope.rotaryDim) throw new Error(`head of ${vec.length} dims < rotaryDim ${rope.rotaryDim}`);
  const L =
    maxContext ??
    (rope.scaling && 'originalMaxPositionEmbeddings' in rope.scaling ? rope.scaling.originalMaxPositionEmbeddings : 4096);
  const out = Float64Array.from(vec);
  const { cos, sin } = referenceRopeCosSin(rope, position, L);
  rotateHeadInPlace(out, 0, cos, sin, rope.layout);
  return out;
}
