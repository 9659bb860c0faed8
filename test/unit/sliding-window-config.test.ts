/**
 * Sliding-window configs → `ModelConfig.slidingWindow` (per layer, 0 = full), checked against
 * hand-written expectations from transformers' rules (MistralConfig: every layer; Qwen2Config:
 * only with use_sliding_window, layers ≥ max_window_layers; explicit layer_types first) and
 * llama.cpp's GGUF key `{arch}.attention.sliding_window`; what cannot be honoured is refused.
 * Also the graph's GroupQueryAttention attribute (local_window_size = W; test/integration/sliding-window.test.ts
 * measures that this is ONNX Runtime's meaning).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { localWindow } from '../../main/engine/model/decoder-graph.ts';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { ggufConfig } from '../../main/engine/model/gguf/import-gguf.ts';
import { parseHfConfig } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { writeGguf } from '../helpers/gguf-writer.ts';
import { configMetadata } from '../helpers/synthetic-gguf.ts';

const FILE = '/models/x/config.json';
const base = {
  hidden_size: 64, intermediate_size: 172, num_hidden_layers: 3, num_attention_heads: 8,
  num_key_value_heads: 2, vocab_size: 1000, rms_norm_eps: 1e-5, max_position_embeddings: 4096, rope_theta: 10000,
};
const windows = (c: Record<string, unknown>) => parseHfConfig({ ...base, ...c }, FILE).slidingWindow;
const refuses = (c: Record<string, unknown>, part: string) =>
  assert.throws(() => parseHfConfig({ ...base, ...c }, FILE), (e: unknown) => e instanceof ModelLoadError && e.message.includes(part));

describe('Hugging Face config.json', () => {
  it('Mistral: sliding_window on every layer; null or absent: none', () => {
    assert.deepEqual(windows({ model_type: 'mistral', sliding_window: 32 }), [32, 32, 32]);
    assert.equal(windows({ model_type: 'mistral', sliding_window: null }), undefined);
    assert.equal(windows({ model_type: 'mistral' }), undefined);
  });
  it('Qwen2 / Qwen3: only with use_sliding_window, from max_window_layers on', () => {
    assert.equal(windows({ model_type: 'qwen2', sliding_window: 32, use_sliding_window: false, max_window_layers: 0 }), undefined);
    assert.deepEqual(windows({ model_type: 'qwen2', sliding_window: 32, use_sliding_window: true, max_window_layers: 1 }), [0, 32, 32]);
    assert.deepEqual(windows({ model_type: 'qwen3', sliding_window: 16, use_sliding_window: true, max_window_layers: 0 }), [16, 16, 16]);
    assert.equal(windows({ model_type: 'qwen3', sliding_window: 16, use_sliding_window: true, max_window_layers: 3 }), undefined);
  });
  it('Qwen3-MoE: with use_sliding_window every layer, max_window_layers ignored (transformers 5.12.1 built it so)', () => {
    // transformers 5.12.1: Qwen3MoeForCausalLM(Qwen3MoeConfig(num_hidden_layers=4, use_sliding_window=True,
    // sliding_window=8, max_window_layers=2)) has self_attn.sliding_window 8 on all four layers.
    const moe = { model_type: 'qwen3_moe', num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 16, sliding_window: 8, use_sliding_window: true };
    assert.deepEqual(windows({ ...moe, max_window_layers: 2 }), [8, 8, 8]);
    assert.equal(windows({ ...moe, use_sliding_window: false }), undefined);
  });
  it('layer_types decides which layers slide', () => {
    const layer_types = ['sliding_attention', 'full_attention', 'sliding_attention'];
    assert.deepEqual(windows({ model_type: 'mistral', sliding_window: 8, layer_types }), [8, 0, 8]);
  });
  it('Llama has no sliding window (LlamaConfig ignores the key)', () => {
    assert.equal(windows({ model_type: 'llama', sliding_window: 32 }), undefined);
  });
  it('refuses what it cannot honour, naming it', () => {
    refuses({ model_type: 'mistral', sliding_window: 1 }, 'sliding_window 1 is not supported');
    refuses({ model_type: 'mistral', sliding_window: 8, layer_types: ['sliding_attention'] }, 'layer_types has 1 entries for 3 layers');
    refuses({ model_type: 'mistral', sliding_window: 8, layer_types: ['chunked_attention', 'full_attention', 'full_attention'] }, 'layer_types "chunked_attention" is not supported');
    refuses({ model_type: 'mistral', layer_types: ['sliding_attention', 'full_attention', 'full_attention'] }, 'no sliding_window');
  });
});

describe('GGUF metadata', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-swa-gguf-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const config: ModelConfig = {
    architecture: 'llama', hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, vocabSize: 16,
    rmsNormEps: 1e-5, tiedEmbeddings: true, attentionBias: false, qkNorm: false, rope: { theta: 10000, rotaryDim: 8, layout: 'interleaved' }, trainedContext: 256,
  };
  async function configOf(extra: Record<string, { u32: number }>): Promise<ModelConfig> {
    const file = path.join(tmp, `${Object.keys(extra).join('-') || 'none'}-${Object.values(extra).map((v) => v.u32).join('-')}.gguf`);
    writeGguf(file, { ...configMetadata(config), ...extra }, [{ name: 'token_embd.weight', shape: [16, 32], data: new Float32Array(512), type: 'F32' }]);
    const g = await openGguf(file);
    try {
      return ggufConfig(g);
    } finally {
      await g.close();
    }
  }
  it('attention.sliding_window windows every layer; 0 or absent: none', async () => {
    assert.deepEqual((await configOf({ 'llama.attention.sliding_window': { u32: 32 } })).slidingWindow, [32, 32]);
    assert.equal((await configOf({ 'llama.attention.sliding_window': { u32: 0 } })).slidingWindow, undefined);
    assert.equal((await configOf({})).slidingWindow, undefined);
  });
  it('a per-layer pattern is refused, not guessed', async () => {
    await assert.rejects(configOf({ 'llama.attention.sliding_window': { u32: 32 }, 'llama.attention.sliding_window_pattern': { u32: 2 } }), /sliding_window_pattern \(a per-layer sliding-window pattern\) is not supported/);
  });
});

describe('graph attribute', () => {
  const c = { slidingWindow: [32, 0] } as ModelConfig;
  it('local_window_size = W on a windowed layer, none on a full one', () => {
    assert.deepEqual(localWindow(c, 0), { local_window_size: 32 });
    assert.deepEqual(localWindow(c, 1), {});
    assert.throws(() => localWindow({ slidingWindow: [1] } as ModelConfig, 0), /at least 2 tokens/);
  });
});
