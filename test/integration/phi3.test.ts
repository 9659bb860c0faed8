/**
 * Phi-3 (fused qkv_proj and gate_up_proj, LongRoPE with its attention factor, a sliding window on
 * every layer) from a Hugging Face folder and from a GGUF file written the way llama.cpp's
 * converter writes it (attn_qkv, ffn_up holding gate and up, rope_factors_long / _short tensors,
 * rope.scaling.attn_factor), against the independent reference forward (which splits the fused
 * rows itself and computes LongRoPE from transformers' `_compute_longrope_parameters` semantics;
 * Python transformers cannot run here) and, on the GGUF, llama.cpp (float32 KV cache, flash
 * attention off; mean first divergence over the ten story prompts, as gguf-llamacpp.test.ts).
 * Both sides use the long factors: the max context exceeds the original one.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import type { Llama } from 'node-llama-cpp';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { expectedWeights, importHuggingFace } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { renderChatTemplate } from '../../main/engine/tokenizer/chat-template.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { againstLlamaCpp } from '../helpers/llamacpp-oracle.ts';
import { mulberry32 } from '../helpers/prng.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import type { GgufValue } from '../helpers/gguf-writer.ts';
import { storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { PHI3_CHAT_TEMPLATE, writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { useLlamaCpp } from '../helpers/llamacpp-fixture.ts';

const WINDOW = 16;
const MAX = 256;
let llama: Llama;
const tmp = useLlamaCpp('ropewalk-phi3-', (l) => (llama = l));

const SHORT = [1, 1.05, 1.1, 1.2, 1.4, 1.8, 2.5, 3];
const LONG = [1, 1.2, 1.6, 2.4, 4, 8, 16, 32];

test('phi3 (Hugging Face): the config imports as written by hand; ≥ 100 greedy tokens past the window equal the reference on both backends', async (t) => {
  const dir = path.join(tmp, 'hf');
  const raw = (await writeSyntheticCheckpoint(dir, {
    family: 'phi3', seed: 5, hidden: 64, heads: 4, kvHeads: 2, layers: 2, inter: 96,
    configOverrides: {
      max_position_embeddings: MAX, original_max_position_embeddings: 64, sliding_window: WINDOW,
      rope_scaling: { type: 'longrope', short_factor: SHORT, long_factor: LONG },
    },
  })) as ModelWeights;
  const want: ModelConfig = {
    architecture: 'phi3', hiddenSize: 64, intermediateSize: 96, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 151_669,
    rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: false, qkNorm: false, fusedProjections: true, trainedContext: MAX,
    rope: {
      theta: 10000, rotaryDim: 16, layout: 'half',
      // s = 256 / 64 = 4: attention factor √(1 + ln 4 / ln 64) (transformers' default)
      scaling: { type: 'longrope', shortFactor: SHORT, longFactor: LONG, originalMaxPositionEmbeddings: 64, attentionFactor: Math.sqrt(1 + Math.log(4) / Math.log(64)) },
    },
    slidingWindow: [WINDOW, WINDOW],
  };
  const model = await importHuggingFace(dir);
  assert.deepEqual(model.manifest.config, want);
  const ids = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13) % 151_000);
  for (const backend of ['js', 'native'] as const) {
    const r = await greedyAgainstReference({ config: want, weights: model.weights, refWeights: raw, refConfig: want, ids, steps: 110, maxContext: MAX, backend });
    t.diagnostic(`phi3 ${backend}: ${new Set(r.tokens).size} distinct tokens; worst |onnx − ref| / scale ${r.worst.toExponential(2)}; unwindowed reference up to ${r.fullOff.toExponential(2)} off, another token ${r.tokensDiffer} times`);
    assert.ok(r.fullOff > 1000 * Math.max(r.worst, 1e-9), 'the window changes the logits far beyond rounding');
  }
  // The long factors are in use: with the short ones the reference is far off.
  const shortRef = new ReferenceModel(want, raw, 64).forward(ids);
  const longRef = new ReferenceModel(want, raw, MAX).forward(ids);
  assert.ok(shortRef.some((v, i) => Math.abs(v - longRef[i]) > 1e-3), 'short and long factors give the same logits');
});

/** Seeded weights: N(0, std) matrices and embedding, 1 + N(0, 0.02) norms. */
function rawWeights(config: ModelConfig, seed: number, std: number): ModelWeights {
  const rand = mulberry32(seed);
  const out: ModelWeights = new Map();
  for (const [name, shape] of expectedWeights(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const norm = /norm\.weight$/.test(name);
    const s = norm ? 0.02 : std;
    out.set(name, { shape, data: Float32Array.from({ length: n }, () => (norm ? 1 : 0) + (rand() + rand() + rand() + rand() - 2) * Math.sqrt(3) * s) });
  }
  return out;
}

/** Phi-3's chat tokens, control tokens after stories260K's 512 (llama.cpp's Phi-3 vocabulary looks `<|end|>` up by its text). */
const PHI3_TOKENS = ['<|endoftext|>', '<|system|>', '<|user|>', '<|assistant|>', '<|end|>'];

/** stories260K's tokenizer with Phi-3's chat tokens appended (ids 512 … 516). */
async function phi3TokenizerMetadata(): Promise<Record<string, GgufValue>> {
  const m = await storiesTokenizerMetadata();
  const list = <T>(v: GgufValue, key: 'strs' | 'f32s' | 'i32s') => (v as Record<typeof key, T[]>)[key];
  return {
    ...m,
    'tokenizer.ggml.tokens': { strs: [...list<string>(m['tokenizer.ggml.tokens'], 'strs'), ...PHI3_TOKENS] },
    'tokenizer.ggml.scores': { f32s: [...list<number>(m['tokenizer.ggml.scores'], 'f32s'), ...PHI3_TOKENS.map(() => 0)] },
    'tokenizer.ggml.token_type': { i32s: [...list<number>(m['tokenizer.ggml.token_type'], 'i32s'), ...PHI3_TOKENS.map(() => 3)] },
    'tokenizer.chat_template': { str: PHI3_CHAT_TEMPLATE },
  };
}

const PHI3_GGUF: ModelConfig = {
    architecture: 'phi3', hiddenSize: 64, intermediateSize: 128, numLayers: 3, numHeads: 4, numKvHeads: 4, headDim: 16, vocabSize: 517,
    rmsNormEps: Math.fround(1e-5), tiedEmbeddings: false, attentionBias: false, qkNorm: false, fusedProjections: true, trainedContext: 2048,
    // GGUF stores the factors as float32 tensors.
    rope: { theta: 10000, rotaryDim: 16, layout: 'half', scaling: { type: 'longrope', shortFactor: SHORT.map(Math.fround), longFactor: LONG.map(Math.fround), originalMaxPositionEmbeddings: 128, attentionFactor: Math.fround(1.19) } },
};

/** The Phi-3 GGUF with linear weights in `type`, from the same seeded weights. */
async function phi3Gguf(type: 'F32' | 'Q8_0'): Promise<{ file: string; raw: ModelWeights }> {
  const file = path.join(tmp, `phi3-${type}.gguf`);
  const raw = rawWeights(PHI3_GGUF, 9, 0.15);
  writeModelGguf(file, PHI3_GGUF, await phi3TokenizerMetadata(), (name) => raw.get(name)!.data, type);
  return { file, raw };
}

test('phi3 GGUF: the config imports as written; greedy tokens equal the reference; agreement with llama.cpp over the ten prompts', async (t) => {
  const config = PHI3_GGUF;
  const { file, raw } = await phi3Gguf('F32');
  const imported = await importGguf(file);
  assert.deepEqual(imported.manifest.config, config);
  // <|end|> ends a reply, as in llama.cpp's vocabulary, beside the file's EOS.
  assert.ok(imported.manifest.specialTokens.eos.includes(516), `EOS ${imported.manifest.specialTokens.eos}`);
  assert.equal(imported.manifest.chatTemplate, PHI3_CHAT_TEMPLATE);
  const ids = [1, ...Array.from({ length: 19 }, (_, i) => (i * 37 + 5) % 512)];
  const r = await greedyAgainstReference({ config, weights: imported.weights, refWeights: raw, ids, steps: 100, maxContext: MAX });
  t.diagnostic(`phi3 GGUF: ${new Set(r.tokens).size} distinct tokens, worst |onnx − ref| / scale ${r.worst.toExponential(2)}`);
  assert.ok(new Set(r.tokens).size >= 20, 'the greedy tokens vary');

  const N = 140;
  const { agree, mean, worstPrompt, distances } = await againstLlamaCpp(llama, file, N, 32, path.join(tmp, 'cache'));
  t.diagnostic(`phi3 GGUF: agrees with llama.cpp for ${agree.join(', ')} of ${N} tokens (mean ${mean})`);
  // Measured 117.4 of 140 (85, 14 and 95 on three prompts). The earliest parting is a near tie:
  // teacher-forced along llama.cpp's tokens, the log-probabilities stay within 1e-3 of its.
  assert.ok(mean >= 100, `mean agreement ${mean} (${agree.join(', ')}), expected ≥ 100`);
  t.diagnostic(`phi3 GGUF: teacher-forced on ${JSON.stringify(worstPrompt)}: max log-prob distance ${Math.max(...distances).toExponential(1)} over 32 steps`);
  assert.ok(Math.max(...distances) < 1e-3, `log-prob distances ${distances}`);
});

test('phi3 GGUF Q8_0 (fused attn_qkv and ffn_up on their blocks): agreement with llama.cpp over the ten prompts', async (t) => {
  const { file } = await phi3Gguf('Q8_0');
  const { agree, mean, worstPrompt, distances } = await againstLlamaCpp(llama, file, 140, 32, path.join(tmp, 'cache'));
  const sorted = [...distances].sort((a, b) => a - b);
  t.diagnostic(`phi3 Q8_0: agrees with llama.cpp for ${agree.join(', ')} of 140 tokens (mean ${mean}); teacher-forced on ${JSON.stringify(worstPrompt)}: median ${sorted[16].toExponential(1)}, max ${sorted[31].toExponential(1)}`);
  // Measured: mean 113.4 of 140; teacher-forced median 2.6e-2, max 9.0e-2 — further from llama.cpp
  // than stories260K's Q8_0 (1e-4 at most steps, gguf-llamacpp.test.ts) while F32 is at 7.4e-6:
  // the int8 activations of the fused matmuls round differently somewhere; not explained yet.
  assert.ok(mean >= 80, `mean agreement ${mean} (${agree.join(', ')}), expected ≥ 80`);
  assert.ok(sorted[31] < 0.2, `teacher-forced distances ${distances}`);
});

test("Phi-3's chat template: <|user|> / <|assistant|> turns ended by <|end|>", () => {
  const text = renderChatTemplate(PHI3_CHAT_TEMPLATE, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], { addGenerationPrompt: true, eosToken: '<|endoftext|>' });
  assert.equal(text, '<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n');
});
