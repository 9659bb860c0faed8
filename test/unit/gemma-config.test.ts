/**
 * Gemma 2 / Gemma 3 config rules without weights: a Hugging Face config.json (transformers'
 * defaults where a field is absent, null soft-caps as none, the per-layer window pattern) and
 * GGUF metadata (llama.cpp's defaults: Gemma 2's 4096-token window and 50 / 30 soft-caps, the
 * 27B sizes' attention scale, Gemma 3's local RoPE base), each against hand-written values; the
 * refusals, quoting the bad value; and llama.cpp's per-architecture window patterns (gpt-oss too).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { ggufConfig, ggufLayerSlides } from '../../main/engine/model/gguf/gguf-config.ts';
import { parseHfConfig } from '../../main/engine/model/import-hf.ts';

const FILE = '/models/g/config.json';
const gemma2 = {
  model_type: 'gemma2', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2,
  head_dim: 16, vocab_size: 1000, hidden_activation: 'gelu_pytorch_tanh',
};

describe('parseHfConfig: Gemma', () => {
  it("gemma2 with transformers' defaults: tied, window 4096 on even layers, soft-caps 50 / 30, scale 256^-0.5", () => {
    const c = parseHfConfig(gemma2, FILE);
    assert.equal(c.tiedEmbeddings, true);
    assert.deepEqual(c.slidingWindow, [4096, 0, 4096, 0]);
    assert.deepEqual(c.gemma, { embeddingScale: 8, attentionScale: 1 / 16, attentionSoftcap: 50, finalLogitSoftcap: 30 });
    assert.equal(c.trainedContext, 8192);
    assert.equal(c.localRope, undefined);
  });
  it('null soft-caps are none; layer_types decides the window over the pattern', () => {
    const c = parseHfConfig({ ...gemma2, attn_logit_softcapping: null, final_logit_softcapping: null, sliding_window: 8, layer_types: ['full_attention', 'sliding_attention', 'full_attention', 'full_attention'] }, FILE);
    assert.deepEqual(c.slidingWindow, [0, 8, 0, 0]);
    assert.equal(c.gemma!.attentionSoftcap, 0);
    assert.equal(c.gemma!.finalLogitSoftcap, 0);
  });
  it('gemma3_text: sliding_window_pattern 2 slides layers 0 and 2; their RoPE has rope_local_base_freq; q/k norms', () => {
    const c = parseHfConfig({ ...gemma2, model_type: 'gemma3_text', sliding_window: 32, sliding_window_pattern: 2, rope_theta: 1e6, rope_local_base_freq: 20000 }, FILE);
    assert.equal(c.architecture, 'gemma3');
    assert.deepEqual(c.slidingWindow, [32, 0, 32, 0]);
    assert.deepEqual(c.localRope, { theta: 20000, rotaryDim: 16, layout: 'half' });
    assert.equal(c.rope.theta, 1e6);
    assert.equal(c.qkNorm, true);
    assert.equal(c.gemma!.attentionSoftcap, 0);
  });
  it("gemma3_text as transformers 5 writes it: rope_parameters per layer type (full: linear 8 over 1e6; sliding: its own base)", () => {
    // Read before as one merged set: theta 10,000 and no scaling on the global layers.
    const c = parseHfConfig({
      ...gemma2, model_type: 'gemma3_text', sliding_window: 32, layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention'],
      rope_parameters: { full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1e6 }, sliding_attention: { rope_type: 'default', rope_theta: 20000 } },
    }, FILE);
    assert.deepEqual(c.rope, { theta: 1e6, rotaryDim: 16, layout: 'half', scaling: { type: 'linear', factor: 8 } });
    assert.deepEqual(c.localRope, { theta: 20000, rotaryDim: 16, layout: 'half' });
    assert.deepEqual(c.slidingWindow, [32, 32, 32, 0]);
  });
  it('refuses a per-layer-type rope_parameters it cannot honour, quoting it', () => {
    const g3 = { ...gemma2, model_type: 'gemma3_text', sliding_window: 32 };
    const full = { rope_type: 'default', rope_theta: 1e6 };
    const refuses = (json: object, re: RegExp) => assert.throws(() => parseHfConfig(json, FILE), (e: unknown) => e instanceof ModelLoadError && re.test(e.message));
    refuses({ ...g3, rope_parameters: { full_attention: full, sliding_attention: { rope_type: 'linear', factor: 2, rope_theta: 1e4 } } }, /sliding_attention rope_type "linear" is not supported/);
    refuses({ ...g3, rope_parameters: { sliding_attention: full } }, /no full_attention set/);
    refuses({ ...g3, rope_parameters: { full_attention: full, rope_theta: 5 } }, /mixes per-layer-type sets with "rope_theta"/);
    refuses({ ...gemma2, sliding_window: 32, rope_parameters: { full_attention: full, sliding_attention: full } }, /supported for gemma3_text only, not gemma2/);
  });
  it('refuses another activation, quoting it', () => {
    assert.throws(() => parseHfConfig({ ...gemma2, hidden_activation: 'gelu' }, FILE), (e: unknown) => e instanceof ModelLoadError && /hidden_activation gelu is not supported; supported: gelu_pytorch_tanh/.test(e.message));
  });
});

/** A GGUF header as ggufConfig reads it: metadata and the tensors it looks at. */
function header(arch: string, meta: Record<string, unknown>, layers = 4) {
  const tensors = new Map<string, { shape: number[] }>([['token_embd.weight', { shape: [512, 64] }]]);
  if (arch === 'gemma3') tensors.set('blk.0.attn_q_norm.weight', { shape: [16] });
  return {
    file: '/models/g.gguf',
    tensors: tensors as never,
    metadata: {
      'general.architecture': arch, [`${arch}.context_length`]: 8192, [`${arch}.embedding_length`]: 64, [`${arch}.feed_forward_length`]: 128,
      [`${arch}.block_count`]: layers, [`${arch}.attention.head_count`]: 4, [`${arch}.attention.head_count_kv`]: 2,
      [`${arch}.attention.key_length`]: 16, [`${arch}.attention.layer_norm_rms_epsilon`]: 1e-6, ...meta,
    },
  };
}

describe('ggufConfig: Gemma', () => {
  it("gemma2 without window or soft-cap keys takes llama.cpp's: 4096 on even layers, 50 / 30", () => {
    const c = ggufConfig(header('gemma2', {}));
    assert.deepEqual(c.slidingWindow, [4096, 0, 4096, 0]);
    assert.deepEqual(c.gemma, { embeddingScale: 8, attentionScale: 0.25, attentionSoftcap: 50, finalLogitSoftcap: 30 });
  });
  it("a 46-layer gemma2 (llama.cpp's 27B) scales by 1/√(hidden / heads), not 1/√head_dim", () => {
    assert.equal(ggufConfig(header('gemma2', {}, 46)).gemma!.attentionScale, 1 / Math.sqrt(16));
    const wide = header('gemma2', { 'gemma2.attention.key_length': 32 }, 46);
    assert.equal(ggufConfig(wide).gemma!.attentionScale, 1 / Math.sqrt(16));
    assert.equal(ggufConfig(header('gemma2', { 'gemma2.attention.key_length': 32 }, 42)).gemma!.attentionScale, 1 / Math.sqrt(32));
  });
  it('gemma3: five of six layers slide, with a local RoPE of base 10,000 (or rope.freq_base_swa)', () => {
    const c = ggufConfig(header('gemma3', { 'gemma3.attention.sliding_window': 512, 'gemma3.rope.freq_base': 1e6 }, 7));
    assert.deepEqual(c.slidingWindow, [512, 512, 512, 512, 512, 0, 512]);
    assert.deepEqual(c.localRope, { theta: 10000, rotaryDim: 16, layout: 'half' });
    assert.equal(c.gemma!.finalLogitSoftcap, 0);
    const swa = ggufConfig(header('gemma3', { 'gemma3.attention.sliding_window': 512, 'gemma3.rope.freq_base_swa': 5000 }, 7));
    assert.equal(swa.localRope!.theta, 5000);
  });
  it('a window pattern key is refused, naming it', () => {
    assert.throws(() => ggufConfig(header('gemma3', { 'gemma3.attention.sliding_window': 512, 'gemma3.attention.sliding_window_pattern': 6 })), /gemma3\.attention\.sliding_window_pattern .* is not supported/);
  });
});

describe('ggufLayerSlides: llama.cpp\'s per-architecture window patterns', () => {
  it('gemma2 and gpt-oss every even layer, gemma3 five of six, others every layer', () => {
    const layers = (arch: string) => Array.from({ length: 8 }, (_, i) => ggufLayerSlides(arch, i));
    assert.deepEqual(layers('gpt-oss'), [true, false, true, false, true, false, true, false]);
    assert.deepEqual(layers('gemma2'), [true, false, true, false, true, false, true, false]);
    assert.deepEqual(layers('gemma3'), [true, true, true, true, true, false, true, true]);
    assert.deepEqual(layers('llama'), Array(8).fill(true));
  });
});
