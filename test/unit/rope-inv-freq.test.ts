/**
 * inverseFrequencies: anchor values of each Hugging Face variant that follow from the formulas
 * without re-deriving them (bands that must be untouched or fully divided, the YaRN default
 * attention factor, the dynamic-NTK base), and validation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inverseFrequencies } from '../../main/engine/cache/inv-freq.ts';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import type { RopeConfig } from '../../main/engine/model/manifest.ts';

const close = (a: number, b: number, rel = 1e-12): boolean => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b));

describe('inverseFrequencies', () => {
  it('plain: θ^(-2i/R), attention scale 1, independent of maxContext', () => {
    const { invFreq, attentionScale } = inverseFrequencies({ theta: 10000, rotaryDim: 8, layout: 'half' }, 16);
    assert.equal(invFreq.length, 4);
    assert.deepEqual([...invFreq].map((f) => +f.toPrecision(12)), [1, 0.1, 0.01, 0.001]);
    assert.equal(attentionScale, 1);
  });

  it('linear divides every frequency by the factor', () => {
    const base = inverseFrequencies({ theta: 10000, rotaryDim: 64, layout: 'half' }, 16).invFreq;
    const { invFreq } = inverseFrequencies(
      { theta: 10000, rotaryDim: 64, layout: 'half', scaling: { type: 'linear', factor: 4 } },
      16,
    );
    for (let i = 0; i < 32; i++) assert.equal(invFreq[i], base[i] / 4);
  });

  it('llama3 (Llama 3.1 8B config): high frequencies kept, low divided by 8, a smooth band between', () => {
    const rope: RopeConfig = {
      theta: 500000,
      rotaryDim: 128,
      layout: 'half',
      scaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    };
    const base = inverseFrequencies({ ...rope, scaling: undefined }, 131072).invFreq;
    const { invFreq, attentionScale } = inverseFrequencies(rope, 131072);
    assert.equal(attentionScale, 1);
    let kept = 0;
    let divided = 0;
    let smooth = 0;
    for (let i = 0; i < 64; i++) {
      const wavelen = (2 * Math.PI) / base[i];
      if (wavelen < 8192 / 4) {
        assert.equal(invFreq[i], base[i]);
        kept++;
      } else if (wavelen > 8192) {
        assert.equal(invFreq[i], base[i] / 8);
        divided++;
      } else {
        assert.ok(invFreq[i] < base[i] && invFreq[i] > base[i] / 8, `pair ${i} not between`);
        smooth++;
      }
    }
    assert.ok(kept > 0 && divided > 0 && smooth > 0, `bands ${kept}/${smooth}/${divided}`);
    // Monotone: scaling never reorders frequencies.
    for (let i = 1; i < 64; i++) assert.ok(invFreq[i] < invFreq[i - 1]);
  });

  it('yarn (Qwen-style, factor 4, original 32768): ramp over pair indices 23 … 40', () => {
    const rope: RopeConfig = {
      theta: 1000000,
      rotaryDim: 128,
      layout: 'half',
      scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1 },
    };
    const base = inverseFrequencies({ ...rope, scaling: undefined }, 131072).invFreq;
    const { invFreq, attentionScale } = inverseFrequencies(rope, 131072);
    // low = floor(128·ln(32768/(2π·32))/(2·ln 1e6)) = 23, high = ceil(…(2π·1)…) = 40
    for (let i = 0; i <= 23; i++) assert.ok(close(invFreq[i], base[i]), `pair ${i} should be unscaled`);
    for (let i = 40; i < 64; i++) assert.ok(close(invFreq[i], base[i] / 4), `pair ${i} should be divided by 4`);
    for (let i = 24; i < 40; i++) assert.ok(invFreq[i] < base[i] && invFreq[i] > base[i] / 4, `pair ${i} ramp`);
    assert.equal(attentionScale, 0.1 * Math.log(4) + 1);
    const explicit = inverseFrequencies(
      { ...rope, scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1, attentionFactor: 1.25 } },
      131072,
    );
    assert.equal(explicit.attentionScale, 1.25);
    const noScale = inverseFrequencies(
      { ...rope, scaling: { type: 'yarn', factor: 1, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1 } },
      131072,
    );
    assert.equal(noScale.attentionScale, 1, 'get_mscale(factor ≤ 1) = 1');
  });

  it('dynamic: plain up to the original context; base θ·(2·4096/1024 − 1)^(R/(R−2)) at maxContext 4096', () => {
    const scaling = { type: 'dynamic' as const, factor: 2, originalMaxPositionEmbeddings: 1024 };
    const rope: RopeConfig = { theta: 10000, rotaryDim: 64, layout: 'half', scaling };
    const base = inverseFrequencies({ ...rope, scaling: undefined }, 1024).invFreq;
    assert.deepEqual(inverseFrequencies(rope, 1024).invFreq, base);
    assert.deepEqual(inverseFrequencies(rope, 512).invFreq, base);
    const { invFreq } = inverseFrequencies(rope, 4096);
    const scaledBase = 10000 * Math.pow(7, 64 / 62);
    for (let i = 0; i < 32; i++) assert.ok(close(invFreq[i], Math.pow(scaledBase, (-2 * i) / 64)), `pair ${i}`);
    assert.equal(invFreq[0], 1);
  });

  it('frequency factors (GGUF rope_freqs.weight) divide each pair, after the scaling variant', () => {
    const plain: RopeConfig = { theta: 10000, rotaryDim: 8, layout: 'interleaved' };
    const { invFreq } = inverseFrequencies({ ...plain, frequencyFactors: [1, 2, 4, 0.5] }, 16);
    assert.deepEqual([...invFreq].map((f) => +f.toPrecision(12)), [1, 0.05, 0.0025, 0.002]);
    const linear = inverseFrequencies({ ...plain, scaling: { type: 'linear', factor: 4 }, frequencyFactors: [1, 2, 4, 0.5] }, 16).invFreq;
    assert.deepEqual([...linear].map((f) => +f.toPrecision(12)), [0.25, 0.0125, 0.000625, 0.0005]);
  });

  it('partial rotary: the exponent uses R, not headDim', () => {
    const { invFreq } = inverseFrequencies({ theta: 10000, rotaryDim: 32, layout: 'half' }, 16);
    assert.equal(invFreq.length, 16);
    assert.ok(close(invFreq[8], 0.01));
  });

  it('rejects bad parameters with InvalidOptionError quoting the value', () => {
    const ok: RopeConfig = { theta: 10000, rotaryDim: 64, layout: 'half' };
    const bad: Array<[RopeConfig, number, RegExp]> = [
      [{ ...ok, theta: 1 }, 16, /theta.*1/],
      [{ ...ok, theta: NaN }, 16, /theta.*NaN/],
      [{ ...ok, rotaryDim: 6.5 }, 16, /rotaryDim.*6\.5/],
      [ok, 0, /maxContext.*0/],
      [{ ...ok, scaling: { type: 'linear', factor: -2 } }, 16, /factor.*-2/],
      [
        { ...ok, scaling: { type: 'llama3', factor: 8, lowFreqFactor: 4, highFreqFactor: 1, originalMaxPositionEmbeddings: 8192 } },
        16,
        /highFreqFactor/,
      ],
      [{ ...ok, scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 0, betaFast: 32, betaSlow: 1 } }, 16, /originalMax/],
      [{ ...ok, rotaryDim: 2, scaling: { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 8 } }, 16, /rotaryDim > 2/],
      [{ ...ok, scaling: { type: 'ntk' } as unknown as RopeConfig['scaling'] }, 16, /unsupported.*ntk/],
      [{ ...ok, frequencyFactors: [1, 2] }, 16, /frequencyFactors.*32 factors.*got 2/],
      [{ ...ok, frequencyFactors: Array.from({ length: 32 }, (_, i) => (i === 5 ? 0 : 1)) }, 16, /frequencyFactors\[5\].*got 0/],
    ];
    for (const [rope, max, re] of bad) {
      assert.throws(() => inverseFrequencies(rope, max), (e: unknown) => e instanceof InvalidOptionError && re.test(e.message));
    }
  });
});
