/**
 * Mixture-of-Experts configs (moe.ts): a Qwen3-MoE config.json and a `qwen3moe` GGUF header map
 * to the MoE options written here by hand (Qwen3-30B-A3B's values), the weight list has one
 * router and E experts per layer, and what cannot be run is refused with the bad value quoted:
 * k > E, dense layers among the sparse ones, a shared expert, missing counts, an expert index
 * outside a 3-D tensor. No weights are read.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { ggufConfig } from '../../main/engine/model/gguf/gguf-config.ts';
import { expectedWeights, parseHfConfig } from '../../main/engine/model/import-hf.ts';
import type { MoeOptions } from '../../main/engine/model/manifest.ts';
import { expertSlice, ggufExpertTensor } from '../../main/engine/model/moe.ts';

const FILE = '/models/q/config.json';
/** Qwen3-30B-A3B's config.json, layers and vocabulary scaled down. */
const qwen3moe = {
  architectures: ['Qwen3MoeForCausalLM'], model_type: 'qwen3_moe', hidden_size: 2048, intermediate_size: 6144, moe_intermediate_size: 768,
  num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 4, head_dim: 128, vocab_size: 1000, num_experts: 128,
  num_experts_per_tok: 8, norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [], rms_norm_eps: 1e-6,
  rope_theta: 1_000_000, max_position_embeddings: 40960, tie_word_embeddings: false, use_sliding_window: false, sliding_window: null,
};
const MOE: MoeOptions = {
  numExperts: 128, expertsPerToken: 8, expertIntermediateSize: 768, routing: 'softmax-topk', normalizeTopK: true,
  routerBias: false, expertBias: false, activation: 'silu',
};

function throwsWith(fn: () => unknown, ...parts: string[]): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ModelLoadError, `expected ModelLoadError, got ${String(e)}`);
    for (const s of parts) assert.ok(e.message.includes(s), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(s)}`);
    return true;
  });
}

describe('parseHfConfig: qwen3_moe', () => {
  it('reads the MoE fields, Qwen3 attention (q/k norms) and one router and 128 × 3 experts per layer', () => {
    const c = parseHfConfig(qwen3moe, FILE);
    assert.equal(c.architecture, 'qwen3moe');
    assert.equal(c.qkNorm, true);
    assert.deepEqual(c.moe, MOE);
    const w = expectedWeights(c);
    assert.deepEqual(w.get('model.layers.1.mlp.gate.weight'), [128, 2048]);
    assert.deepEqual(w.get('model.layers.1.mlp.experts.127.gate_proj.weight'), [768, 2048]);
    assert.deepEqual(w.get('model.layers.1.mlp.experts.127.down_proj.weight'), [2048, 768]);
    assert.equal(w.has('model.layers.0.mlp.gate_proj.weight'), false);
    assert.equal([...w.keys()].filter((n) => n.includes('.experts.')).length, 2 * 128 * 3);
  });

  it("takes transformers' default norm_topk_prob (false) when the field is absent", () => {
    const { norm_topk_prob: _n, ...rest } = qwen3moe;
    assert.equal(parseHfConfig(rest, FILE).moe!.normalizeTopK, false);
  });

  it("reads transformers 5's num_local_experts (what Qwen3MoeConfig.save_pretrained writes) as num_experts", () => {
    // Refused before ("config.json has no num_experts"): test/fixtures/transformers-oracle/qwen3moe/config.json is such a file.
    const { num_experts: _e, ...v5 } = qwen3moe;
    assert.deepEqual(parseHfConfig({ ...v5, num_local_experts: 128 }, FILE).moe, MOE);
    throwsWith(() => parseHfConfig({ ...qwen3moe, num_local_experts: 64 }, FILE), 'num_experts 128 and num_local_experts 64 disagree');
  });

  it('refuses what it cannot run, quoting the value', () => {
    throwsWith(() => parseHfConfig({ ...qwen3moe, num_experts_per_tok: 129 }, FILE), 'num_experts_per_tok 129 exceeds num_experts 128', FILE);
    throwsWith(() => parseHfConfig({ ...qwen3moe, num_experts: null }, FILE), 'no num_experts');
    throwsWith(() => parseHfConfig({ ...qwen3moe, decoder_sparse_step: 2 }, FILE), 'decoder_sparse_step 2');
    throwsWith(() => parseHfConfig({ ...qwen3moe, mlp_only_layers: [0] }, FILE), 'mlp_only_layers [0]');
    throwsWith(() => parseHfConfig({ ...qwen3moe, shared_expert_intermediate_size: 5632 }, FILE), 'shared_expert_intermediate_size 5632');
    throwsWith(() => parseHfConfig({ ...qwen3moe, moe_intermediate_size: 300_000 }, FILE), 'moe_intermediate_size 300000 exceeds');
  });
});

/** A qwen3moe GGUF header as ggufConfig reads it (Qwen3-30B-A3B's metadata, 2 layers). */
function header(meta: Record<string, unknown>) {
  const a = 'qwen3moe';
  return {
    file: '/models/q.gguf',
    tensors: new Map([['token_embd.weight', { shape: [1000, 2048] }], ['output.weight', { shape: [1000, 2048] }], ['blk.0.attn_q_norm.weight', { shape: [128] }]]) as never,
    metadata: {
      'general.architecture': a, [`${a}.context_length`]: 40960, [`${a}.embedding_length`]: 2048, [`${a}.feed_forward_length`]: 6144,
      [`${a}.block_count`]: 2, [`${a}.attention.head_count`]: 32, [`${a}.attention.head_count_kv`]: 4, [`${a}.attention.key_length`]: 128,
      [`${a}.attention.layer_norm_rms_epsilon`]: 1e-6, [`${a}.rope.freq_base`]: 1e6, [`${a}.expert_count`]: 128,
      [`${a}.expert_used_count`]: 8, [`${a}.expert_feed_forward_length`]: 768, ...meta,
    },
  };
}

describe('ggufConfig: qwen3moe', () => {
  it("reads llama.cpp's expert metadata: softmax gating, weights normalised, half RoPE layout", () => {
    const c = ggufConfig(header({}));
    assert.deepEqual(c.moe, MOE);
    assert.equal(c.rope.layout, 'half');
    assert.equal(c.qkNorm, true);
  });

  it('refuses k > E and a missing expert count, naming the key', () => {
    throwsWith(() => ggufConfig(header({ 'qwen3moe.expert_used_count': 129 })), 'expert_used_count 129 exceeds expert_count 128', '/models/q.gguf');
    throwsWith(() => ggufConfig(header({ 'qwen3moe.expert_count': undefined })), 'qwen3moe.expert_count is missing');
  });
});

describe("llama.cpp's 3-D expert tensors", () => {
  it('name every expert weight, and slice expert e of [E, out, in] at e · bytes / E', () => {
    assert.deepEqual(ggufExpertTensor('model.layers.3.mlp.experts.17.up_proj.weight'), { tensor: 'blk.3.ffn_up_exps.weight', expert: 17 });
    assert.equal(ggufExpertTensor('model.layers.3.mlp.gate.weight'), null);
    const t = { name: 'blk.0.ffn_down_exps.weight', typeId: 8, shape: [128, 2048, 768], offset: 1000, byteLength: 128 * 2048 * 24 * 34 };
    assert.deepEqual(expertSlice(t, 5, 'f.gguf'), { ...t, name: 'blk.0.ffn_down_exps.weight[5]', shape: [2048, 768], offset: 1000 + 5 * 2048 * 24 * 34, byteLength: 2048 * 24 * 34 });
    throwsWith(() => expertSlice(t, 128, 'f.gguf'), 'blk.0.ffn_down_exps.weight has shape [128, 2048, 768]', 'expert 128');
    throwsWith(() => expertSlice({ ...t, shape: [2048] }, 0, 'f.gguf'), 'has shape [2048]');
    // gpt-oss's expert biases [E, out]: expert e's row.
    assert.deepEqual(ggufExpertTensor('model.layers.0.mlp.experts.2.down_proj.bias'), { tensor: 'blk.0.ffn_down_exps.bias', expert: 2 });
    const b = { name: 'blk.0.ffn_down_exps.bias', typeId: 0, shape: [32, 2880], offset: 64, byteLength: 32 * 2880 * 4 };
    assert.deepEqual(expertSlice(b, 31, 'f.gguf'), { ...b, name: 'blk.0.ffn_down_exps.bias[31]', shape: [2880], offset: 64 + 31 * 2880 * 4, byteLength: 2880 * 4 });
  });
});
