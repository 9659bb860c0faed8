/**
 * config.json → ModelConfig: every RoPE scaling variant (both `rope_type` and legacy `type`, and
 * transformers 5's `rope_parameters`), partial rotary, per-family bias/q-k-norm rules, defaults,
 * and rejections, checked against hand-written expectations. No weights are read except in the
 * last test, which runs one variant through the whole import.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { expectedWeights, HF_LIMITS, importHuggingFace, parseHfConfig } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, RopeConfig } from '../../main/engine/model/manifest.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const FILE = '/models/x/config.json';
const llama = {
  model_type: 'llama', hidden_size: 64, intermediate_size: 172, num_hidden_layers: 3, num_attention_heads: 8,
  num_key_value_heads: 2, vocab_size: 1000, rms_norm_eps: 1e-5, max_position_embeddings: 4096, rope_theta: 10000,
};
const rope = (c: Record<string, unknown>): RopeConfig => parseHfConfig({ ...llama, ...c }, FILE).rope;

function throwsWith(fn: () => unknown, ...parts: string[]): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ModelLoadError, `expected ModelLoadError, got ${String(e)}`);
    for (const s of parts) assert.ok(e.message.includes(s), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(s)}`);
    return true;
  });
}

describe('parseHfConfig: what a refusal tells the user to do', () => {
  it('a config.json that lacks a field says to download the files again, not to fix the tokenizer', () => {
    const { vocab_size: _v, ...noVocab } = llama;
    throwsWith(() => parseHfConfig(noVocab, FILE), 'invalid config.json', 'vocab_size', "The model's config.json is incomplete or not of a supported model: download the model's files again.");
    assert.throws(() => parseHfConfig(noVocab, FILE), (e: Error) => !e.message.includes('tokenizer that came with'));
  });
});

describe('parseHfConfig: sizes and family rules', () => {
  it('maps a Llama config, defaulting head_dim to hidden/heads', () => {
    const expected: ModelConfig = {
      architecture: 'llama', hiddenSize: 64, intermediateSize: 172, numLayers: 3, numHeads: 8, numKvHeads: 2, headDim: 8,
      vocabSize: 1000, rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: false, qkNorm: false,
      rope: { theta: 10000, rotaryDim: 8, layout: 'half' }, trainedContext: 4096,
    };
    assert.deepEqual(parseHfConfig(llama, FILE), expected);
  });

  it('applies transformers defaults for omitted fields', () => {
    const { num_key_value_heads: _a, rms_norm_eps: _b, max_position_embeddings: _c, rope_theta: _d, ...bare } = llama;
    const c = parseHfConfig(bare, FILE);
    assert.equal(c.numKvHeads, 8);
    assert.equal(c.rmsNormEps, 1e-6);
    assert.equal(c.trainedContext, 2048);
    assert.equal(c.rope.theta, 10000);
    assert.equal(c.tiedEmbeddings, false);
    assert.equal(parseHfConfig({ ...bare, model_type: 'qwen2' }, FILE).trainedContext, 32768);
    assert.equal(parseHfConfig({ ...llama, head_dim: null, num_key_value_heads: null }, FILE).headDim, 8);
  });

  it('sets attention bias and q/k norm per family', () => {
    const f = (c: Record<string, unknown>) => {
      const m = parseHfConfig({ ...llama, ...c }, FILE);
      return [m.attentionBias, m.qkNorm];
    };
    assert.deepEqual(f({ model_type: 'qwen2' }), [true, false]); // Qwen2: always q/k/v bias
    assert.deepEqual(f({ model_type: 'qwen2', attention_bias: false }), [true, false]);
    assert.deepEqual(f({ model_type: 'qwen3' }), [false, true]);
    assert.deepEqual(f({ model_type: 'qwen3', attention_bias: true }), [true, true]);
    assert.deepEqual(f({ model_type: 'llama', attention_bias: true }), [true, false]);
    assert.deepEqual(f({ model_type: 'mistral', attention_bias: true }), [false, false]); // Mistral has no bias
  });

  it("gives o_proj the bias where transformers does (Llama, Qwen3, Gemma with attention_bias; never Qwen2's o_proj)", () => {
    const o = (c: Record<string, unknown>) => parseHfConfig({ ...llama, ...c }, FILE).outputBias ?? false;
    assert.equal(o({ model_type: 'llama', attention_bias: true }), true);
    assert.equal(o({ model_type: 'qwen3', attention_bias: true }), true);
    assert.equal(o({ model_type: 'llama' }), false);
    assert.equal(o({ model_type: 'qwen2' }), false);
    assert.equal(o({ model_type: 'qwen2', attention_bias: true }), false);
    assert.equal(o({ model_type: 'mistral', attention_bias: true }), false);
    const biased = expectedWeights(parseHfConfig({ ...llama, attention_bias: true }, FILE));
    assert.deepEqual(biased.get('model.layers.0.self_attn.o_proj.bias'), [llama.hidden_size]);
  });

  it('keeps an explicit head_dim that differs from hidden/heads (Qwen3)', () => {
    const c = parseHfConfig({ ...llama, model_type: 'qwen3', head_dim: 32, tie_word_embeddings: true }, FILE);
    assert.equal(c.headDim, 32);
    assert.equal(c.rope.rotaryDim, 32);
    assert.equal(c.tiedEmbeddings, true);
  });

  it('rejects inconsistent or unsupported configs, naming the file', () => {
    throwsWith(() => parseHfConfig({ ...llama, model_type: 'phi' }, FILE), 'unsupported model_type "phi"; supported: llama, mistral, qwen2, qwen3, qwen3_moe, gemma2, gemma3_text, phi3', FILE);
    throwsWith(() => parseHfConfig({ ...llama, model_type: undefined }, FILE), 'unsupported model_type undefined');
    throwsWith(() => parseHfConfig(null, FILE), 'unsupported model_type');
    throwsWith(() => parseHfConfig({ ...llama, num_key_value_heads: 3 }, FILE), 'num_attention_heads 8 is not a multiple of num_key_value_heads 3');
    throwsWith(() => parseHfConfig({ ...llama, hidden_size: 60 }, FILE), 'hidden_size 60 is not divisible');
    throwsWith(() => parseHfConfig({ ...llama, hidden_act: 'gelu' }, FILE), 'hidden_act gelu');
    throwsWith(() => parseHfConfig({ ...llama, mlp_bias: true }, FILE), 'mlp_bias');
    throwsWith(() => parseHfConfig({ ...llama, num_hidden_layers: 0 }, FILE), 'num_hidden_layers', FILE);
    throwsWith(() => parseHfConfig({ ...llama, rms_norm_eps: 'small' }, FILE), 'rms_norm_eps');
  });

  it('rejects sizes over HF_LIMITS before anything is allocated', () => {
    throwsWith(() => parseHfConfig({ ...llama, hidden_size: 1e9 }, FILE), `hidden_size 1000000000 exceeds the supported limit ${HF_LIMITS.hiddenSize}`, FILE);
    throwsWith(() => parseHfConfig({ ...llama, vocab_size: 2 ** 30 }, FILE), 'vocab_size');
    throwsWith(() => parseHfConfig({ ...llama, num_hidden_layers: 1e6 }, FILE), 'num_hidden_layers');
    throwsWith(() => parseHfConfig({ ...llama, head_dim: 4096 }, FILE), 'head_dim 4096');
    throwsWith(() => parseHfConfig({ ...llama, max_position_embeddings: 2 ** 30 }, FILE), 'max_position_embeddings');
    throwsWith(() => parseHfConfig({ ...llama, hidden_size: 65536, num_attention_heads: 512, vocab_size: 4e6 }, FILE), 'model.embed_tokens.weight', 'elements');
  });
});

describe('parseHfConfig: RoPE', () => {
  it('reads every rope_scaling variant', () => {
    assert.deepEqual(rope({ rope_scaling: { rope_type: 'linear', factor: 4 } }), {
      theta: 10000, rotaryDim: 8, layout: 'half', scaling: { type: 'linear', factor: 4 },
    });
    assert.deepEqual(rope({ rope_theta: 500000, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 } }), {
      theta: 500000, rotaryDim: 8, layout: 'half',
      scaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    });
    assert.deepEqual(rope({ rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32768 } }).scaling, {
      type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1,
    });
    assert.deepEqual(rope({ rope_scaling: { type: 'yarn', factor: 2, beta_fast: 16, beta_slow: 2, attention_factor: 1.2 } }).scaling, {
      type: 'yarn', factor: 2, originalMaxPositionEmbeddings: 4096, betaFast: 16, betaSlow: 2, attentionFactor: 1.2,
    });
    assert.deepEqual(rope({ rope_scaling: { type: 'dynamic', factor: 2 } }).scaling, { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 4096 });
    assert.deepEqual(rope({ rope_scaling: { rope_type: 'dynamic', factor: 3, original_max_position_embeddings: 2048 } }).scaling, {
      type: 'dynamic', factor: 3, originalMaxPositionEmbeddings: 2048,
    });
    assert.equal(rope({ rope_scaling: null }).scaling, undefined);
    assert.equal(rope({ rope_scaling: { rope_type: 'default' } }).scaling, undefined);
  });

  it('reads transformers 5 rope_parameters, theta included', () => {
    const { rope_theta: _, ...noTheta } = llama;
    const r = parseHfConfig({ ...noTheta, rope_parameters: { rope_type: 'default', rope_theta: 1e6 } }, FILE).rope;
    assert.deepEqual(r, { theta: 1e6, rotaryDim: 8, layout: 'half' });
    const y = parseHfConfig({ ...noTheta, rope_parameters: { rope_type: 'yarn', rope_theta: 1e6, factor: 4, original_max_position_embeddings: 1024 } }, FILE).rope;
    assert.deepEqual(y.scaling, { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 1024, betaFast: 32, betaSlow: 1 });
    assert.equal(y.theta, 1e6);
  });

  it('computes the partial rotary dim as floor(headDim × factor), which must be even', () => {
    const q = { ...llama, model_type: 'qwen3', head_dim: 16 };
    assert.equal(parseHfConfig({ ...q, partial_rotary_factor: 0.5 }, FILE).rope.rotaryDim, 8);
    assert.equal(parseHfConfig({ ...q, partial_rotary_factor: 0.3 }, FILE).rope.rotaryDim, 4); // floor(4.8)
    assert.equal(parseHfConfig({ ...q, rope_parameters: { rope_type: 'default', partial_rotary_factor: 0.25 } }, FILE).rope.rotaryDim, 4);
    throwsWith(() => parseHfConfig({ ...q, partial_rotary_factor: 0.3125 }, FILE), 'partial_rotary_factor 0.3125 gives rotary dim 5', FILE);
    throwsWith(() => parseHfConfig({ ...q, partial_rotary_factor: 0.01 }, FILE), 'rotary dim 0');
    throwsWith(() => parseHfConfig({ ...q, partial_rotary_factor: 1.5 }, FILE), 'partial_rotary_factor');
  });

  it('rejects unknown RoPE types and missing scaling fields', () => {
    throwsWith(() => rope({ rope_scaling: { rope_type: 'mrope', factor: 4 } }), 'unsupported rope_scaling type "mrope"', FILE);
    throwsWith(() => rope({ rope_scaling: { rope_type: 'longrope', factor: 4 } }), 'rope_scaling.short_factor must hold 4 numbers (rotary dim / 2), found none', FILE);
    throwsWith(() => rope({ rope_scaling: { rope_type: 'llama3', factor: 8, high_freq_factor: 4, original_max_position_embeddings: 8192 } }), 'llama3 needs low_freq_factor');
    throwsWith(() => rope({ rope_scaling: { type: 'linear' } }), 'linear needs factor');
    throwsWith(() => rope({ rope_scaling: { type: 'linear', factor: -1 } }), 'factor');
  });
});

describe('importHuggingFace: RoPE variants end to end', () => {
  it('imports a Qwen3 checkpoint with yarn scaling and partial rotary', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ropewalk-hfcfg-'));
    try {
      await writeSyntheticCheckpoint(dir, {
        family: 'qwen3', dtype: 'BF16', tied: true, partialRotary: 0.5, maxPositionEmbeddings: 131072,
        ropeScaling: { rope_type: 'yarn', factor: 4.0, original_max_position_embeddings: 32768 },
      });
      const m = await importHuggingFace(dir);
      assert.deepEqual(m.manifest.config.rope, {
        theta: 1e6, rotaryDim: 8, layout: 'half',
        scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1 },
      });
      assert.equal(m.manifest.config.trainedContext, 131072);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
