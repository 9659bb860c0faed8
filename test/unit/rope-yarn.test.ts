/**
 * YaRN RoPE scaling (Peng et al. 2023, "YaRN", §3.2 NTK-by-parts, eq. 22 attention factor) as
 * the configs people download write it:
 *   - gpt-oss (theta 150,000, head 64, factor 32, original 4,096, `truncate: false`): the
 *     inverse frequencies and the attention factor equal gpt-oss's own formula
 *     (`RotaryEmbedding._compute_concentration_and_inv_freq` in gpt-oss's `torch/model.py`, re-
 *     implemented below from its description: fractional ramp ends, never rounded), and differ
 *     from the rounded (truncated) ramp;
 *   - the default (`truncate` absent, and every GGUF file, as llama.cpp's corr dims): ramp ends
 *     rounded to whole dims;
 *   - Hugging Face configs: gpt-oss's `truncate`, DeepSeek's `mscale` / `mscale_all_dim` (the
 *     attention factor their ratio of get_mscale: equal values give 1, which before was
 *     0.1·ln(40) + 1 = 1.37 on every cos/sin), Qwen3's 128K yarn (factor 4 over 32,768);
 *   - GGUF metadata: `rope.scaling.attn_factor` multiplies get_mscale as llama.cpp does; a partial
 *     ramp (`yarn_ext_factor` ≠ 1) or DeepSeek-2's `yarn_log_multiplier` is refused, quoted;
 *   - the RoPE cache with gpt-oss's YaRN keeps its contract: lazy power-of-two growth, rows equal
 *     the formula's cos/sin × the attention factor, zero work on a warm step.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inverseFrequencies } from '../../main/engine/cache/inv-freq.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { ggufConfig } from '../../main/engine/model/gguf/gguf-config.ts';
import { parseHfConfig } from '../../main/engine/model/import-hf.ts';
import type { RopeConfig } from '../../main/engine/model/manifest.ts';

const GPT_OSS: RopeConfig = {
  theta: 150000, rotaryDim: 64, layout: 'half',
  scaling: { type: 'yarn', factor: 32, originalMaxPositionEmbeddings: 4096, betaFast: 32, betaSlow: 1, truncate: false },
};

/**
 * gpt-oss's reference YaRN: concentration 0.1·ln(s) + 1; with d_half = R/2,
 * low = d_half·ln(L/(β_fast·2π))/ln(θ), high = d_half·ln(L/(β_slow·2π))/ln(θ);
 * freq_i = θ^(2i/R); mask_i = 1 − clamp((i − low)/(high − low), 0, 1);
 * invFreq_i = (1/(s·freq_i))·(1 − mask_i) + (1/freq_i)·mask_i.
 */
function gptOssReference(theta: number, R: number, s: number, L: number, betaFast: number, betaSlow: number) {
  const dHalf = R / 2;
  const low = (dHalf * Math.log(L / (betaFast * 2 * Math.PI))) / Math.log(theta);
  const high = (dHalf * Math.log(L / (betaSlow * 2 * Math.PI))) / Math.log(theta);
  const invFreq = Array.from({ length: dHalf }, (_, i) => {
    const freq = theta ** ((2 * i) / R);
    const mask = 1 - Math.min(Math.max((i - low) / (high - low), 0), 1);
    return (1 / (s * freq)) * (1 - mask) + (1 / freq) * mask;
  });
  return { invFreq, concentration: 0.1 * Math.log(s) + 1, low, high };
}

const close = (a: number, b: number, rel = 1e-12) => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b));

describe('YaRN inverse frequencies', () => {
  it("gpt-oss's YaRN (truncate false) equals gpt-oss's own formula; rounding the ends would change pairs 9 … 17", () => {
    const want = gptOssReference(150000, 64, 32, 4096, 32, 1);
    assert.ok(want.low > 8 && want.low < 9 && want.high > 17 && want.high < 18, `ramp ${want.low} … ${want.high}`);
    const { invFreq, attentionScale } = inverseFrequencies(GPT_OSS, 131072);
    assert.ok(close(attentionScale, want.concentration), `${attentionScale} vs ${want.concentration}`);
    assert.ok(close(attentionScale, 1.3465735902799727));
    want.invFreq.forEach((f, i) => assert.ok(close(invFreq[i], f), `pair ${i}: ${invFreq[i]} vs ${f}`));
    const rounded = inverseFrequencies({ ...GPT_OSS, scaling: { ...GPT_OSS.scaling!, truncate: undefined } as never }, 131072).invFreq;
    const changed = [...rounded.keys()].filter((i) => !close(rounded[i], invFreq[i]));
    assert.deepEqual(changed, [9, 10, 11, 12, 13, 14, 15, 16, 17]);
  });

  it('the default rounds the ramp to whole dims: pairs ≤ floor(low) unscaled, ≥ ceil(high) divided by the factor', () => {
    const rope = { ...GPT_OSS, scaling: { ...GPT_OSS.scaling!, truncate: true } } as RopeConfig;
    const { invFreq } = inverseFrequencies(rope, 4096);
    const plain = inverseFrequencies({ ...rope, scaling: undefined }, 4096).invFreq;
    for (let i = 0; i <= 8; i++) assert.ok(close(invFreq[i], plain[i]), `pair ${i}`);
    for (let i = 18; i < 32; i++) assert.ok(close(invFreq[i], plain[i] / 32), `pair ${i}`);
    for (let i = 9; i < 18; i++) assert.ok(invFreq[i] < plain[i] && invFreq[i] > plain[i] / 32, `pair ${i} in the ramp`);
  });
});

const FILE = '/models/config.json';
const qwen = {
  model_type: 'qwen2', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
  vocab_size: 512, rms_norm_eps: 1e-6, rope_theta: 1e6, max_position_embeddings: 131072,
};
const hfScaling = (rope_scaling: Record<string, unknown>) => parseHfConfig({ ...qwen, rope_scaling }, FILE).rope.scaling;

describe('YaRN from Hugging Face configs', () => {
  it("reads gpt-oss's rope_scaling with truncate false", () => {
    const s = hfScaling({ beta_fast: 32.0, beta_slow: 1.0, factor: 32.0, original_max_position_embeddings: 4096, rope_type: 'yarn', truncate: false });
    assert.deepEqual(s, { type: 'yarn', factor: 32, originalMaxPositionEmbeddings: 4096, betaFast: 32, betaSlow: 1, truncate: false });
  });

  it("DeepSeek's mscale / mscale_all_dim: the attention factor is get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)", () => {
    const same = hfScaling({ type: 'yarn', factor: 40, mscale: 1.0, mscale_all_dim: 1.0, original_max_position_embeddings: 4096, beta_fast: 32, beta_slow: 1 });
    assert.equal(same?.type === 'yarn' && same.attentionFactor, 1);
    const rope = { theta: 1e6, rotaryDim: 16, layout: 'half' as const, scaling: same! };
    assert.equal(inverseFrequencies(rope, 4096).attentionScale, 1, 'cos/sin are not scaled by 0.1·ln(40) + 1');
    const ratio = hfScaling({ type: 'yarn', factor: 40, mscale: 0.707, mscale_all_dim: 1.0, original_max_position_embeddings: 4096 });
    assert.ok(ratio?.type === 'yarn' && close(ratio.attentionFactor!, (0.0707 * Math.log(40) + 1) / (0.1 * Math.log(40) + 1)));
    // attention_factor given wins; mscale alone (no mscale_all_dim) leaves the default.
    assert.equal((hfScaling({ type: 'yarn', factor: 40, mscale: 2, mscale_all_dim: 1, attention_factor: 1.1 }) as { attentionFactor: number }).attentionFactor, 1.1);
    assert.equal((hfScaling({ type: 'yarn', factor: 40, mscale: 2 }) as { attentionFactor?: number }).attentionFactor, undefined);
  });

  it("Qwen3's 128K YaRN (factor 4 over 32,768) loads and scales cos/sin by 0.1·ln 4 + 1", () => {
    const s = hfScaling({ rope_type: 'yarn', factor: 4.0, original_max_position_embeddings: 32768 });
    assert.deepEqual(s, { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1 });
    assert.ok(close(inverseFrequencies({ theta: 1e6, rotaryDim: 16, layout: 'half', scaling: s }, 131072).attentionScale, 0.1 * Math.log(4) + 1));
  });
});

/** A GGUF header as ggufConfig reads it (qwen3, yarn, `extra` metadata). */
function gguf(extra: Record<string, unknown>) {
  return {
    file: '/models/q.gguf',
    tensors: new Map([['token_embd.weight', { shape: [512, 64] }]]) as never,
    metadata: {
      'general.architecture': 'qwen3', 'qwen3.context_length': 131072, 'qwen3.embedding_length': 64, 'qwen3.feed_forward_length': 128,
      'qwen3.block_count': 2, 'qwen3.attention.head_count': 4, 'qwen3.attention.head_count_kv': 2, 'qwen3.attention.key_length': 16,
      'qwen3.attention.layer_norm_rms_epsilon': 1e-6, 'qwen3.rope.freq_base': 1e6, 'qwen3.rope.scaling.type': 'yarn',
      'qwen3.rope.scaling.factor': 4, 'qwen3.rope.scaling.original_context_length': 32768, ...extra,
    },
  };
}

describe('YaRN from GGUF metadata', () => {
  it('reads rope.scaling.* as llama.cpp does: rounded ramp, β 32 / 1, attn_factor times get_mscale', () => {
    assert.deepEqual(ggufConfig(gguf({})).rope.scaling, { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1 });
    const s = ggufConfig(gguf({ 'qwen3.rope.scaling.attn_factor': 0.5, 'qwen3.rope.scaling.yarn_beta_fast': 16 })).rope.scaling;
    assert.ok(s?.type === 'yarn' && s.betaFast === 16 && close(s.attentionFactor!, 0.5 * (0.1 * Math.log(4) + 1)));
    assert.equal(ggufConfig(gguf({ 'qwen3.rope.scaling.yarn_ext_factor': 1, 'qwen3.rope.scaling.yarn_log_multiplier': 0 })).rope.scaling?.type, 'yarn');
  });

  it('refuses a partial ramp and a log multiplier, quoting the value', () => {
    const refuses = (extra: Record<string, unknown>, re: RegExp) =>
      assert.throws(() => ggufConfig(gguf(extra)), (e: unknown) => e instanceof ModelLoadError && re.test(e.message));
    refuses({ 'qwen3.rope.scaling.yarn_ext_factor': 0.5 }, /qwen3\.rope\.scaling\.yarn_ext_factor = 0\.5 is not supported/);
    refuses({ 'qwen3.rope.scaling.yarn_log_multiplier': 0.0707 }, /qwen3\.rope\.scaling\.yarn_log_multiplier = 0\.0707 is not supported/);
  });
});

describe("the RoPE cache with gpt-oss's YaRN", () => {
  it('grows lazily to powers of two, rows = formula × attention factor, a warm step computes nothing', () => {
    const cache = new RopeCache(GPT_OSS, 131072);
    const want = gptOssReference(150000, 64, 32, 4096, 32, 1);
    cache.ensure(5000);
    assert.equal(cache.capacity, 8192);
    for (const p of [0, 1, 4095, 4999]) {
      const { cos, sin } = cache.rows(p, 1);
      for (let i = 0; i < 32; i++) {
        assert.ok(Math.abs(cos[i] - Math.cos(p * want.invFreq[i]) * want.concentration) < 1e-6, `cos(${p}, ${i})`);
        assert.ok(Math.abs(sin[i] - Math.sin(p * want.invFreq[i]) * want.concentration) < 1e-6, `sin(${p}, ${i})`);
      }
    }
    const before = cache.stats;
    cache.ensure(5001);
    cache.rows(5000, 1);
    assert.deepEqual(cache.stats, before, 'a warm step computes and allocates nothing');
  });
});
