/**
 * The sampler's seeded pseudo-random generator: xoshiro128** (Blackman & Vigna 2018,
 * "Scrambled linear pseudorandom number generators", https://prng.di.unimi.it/), 128-bit
 * state, period 2^128 − 1. Contract: the same seed gives the same sequence on every platform
 * (only 32-bit integer arithmetic via Math.imul and shifts); `nextFloat()` is uniform in [0, 1)
 * with 53 random bits. Not cryptographic.
 */

/** Murmur3's 32-bit finalizer (fmix32): a bijection on uint32 that spreads every input bit. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const GOLDEN = 0x9e3779b9; // 2^32 / φ, the Weyl increment of SplitMix

const rotl = (x: number, k: number): number => (x << k) | (x >>> (32 - k));

/** xoshiro128** generator. */
export class Xoshiro128 {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /**
   * Seeds the 128-bit state from a safe integer (SplitMix-style: fmix32 of Weyl-sequence values
   * built from the low and the high 32 bits, each word mixing both halves), so distinct seeds
   * give distinct states and the state is never all zero.
   * @param seed  any safe integer (negative allowed); callers validate.
   */
  constructor(seed: number) {
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 0x1_0000_0000) >>> 0;
    // s0 determines lo (fmix32 is a bijection); given lo, s1 determines hi: distinct seeds, distinct states.
    const h = fmix32((hi + GOLDEN) >>> 0);
    this.s0 = fmix32((lo + GOLDEN) >>> 0);
    this.s1 = fmix32(((lo + 2 * GOLDEN) ^ h) >>> 0);
    this.s2 = fmix32(((hi + 2 * GOLDEN) ^ this.s0) >>> 0);
    this.s3 = fmix32((this.s1 + this.s2 + GOLDEN) >>> 0);
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1; // the all-zero state is a fixed point
  }

  /** A generator with an exact state (uint32 words, not all zero); for reference-vector tests. */
  static fromState(state: readonly [number, number, number, number]): Xoshiro128 {
    const g = new Xoshiro128(0);
    [g.s0, g.s1, g.s2, g.s3] = state.map((w) => w >>> 0) as [number, number, number, number];
    if ((g.s0 | g.s1 | g.s2 | g.s3) === 0) g.s0 = 1; // the all-zero state is a fixed point
    return g;
  }

  /** Next uint32 in [0, 2^32). */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform float in [0, 1) with 53 random bits (two draws). */
  nextFloat(): number {
    const a = this.nextUint32() >>> 5; // 27 bits
    const b = this.nextUint32() >>> 6; // 26 bits
    return (a * 67108864 + b) / 9007199254740992; // (a·2^26 + b) / 2^53
  }
}
