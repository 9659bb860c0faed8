/**
 * Gemma 2 and Gemma 3 (text) GGUF files written the way llama.cpp's converter writes them
 * (llama.cpp tensor names, norms stored as 1 + w, `{arch}.attention.sliding_window`, Gemma 2's
 * soft-cap keys, Gemma 3's linear RoPE scaling; llama.cpp's fixed per-layer window patterns),
 * random weights and stories260K's SentencePiece tokenizer (512 tokens), a 16-token window:
 *   - the imported config is the one written here by hand (llama.cpp's scale 1/√head_dim, local
 *     RoPE base 10,000 for Gemma 3);
 *   - greedy tokens equal the independent reference forward's (raw weights, 1 + w) for ≥ 100
 *     tokens past the window;
 *   - against llama.cpp (node-llama-cpp's CPU build; float32 KV cache, flash attention off) on the
 *     same file, F32 and Q8_0 / Q4_0 linear weights: identical prompt ids, greedy agreement over
 *     the ten story prompts measured as in gguf-llamacpp.test.ts (mean tokens to the first
 *     divergence), and teacher-forced along llama.cpp's tokens on the prompt that parts first, the
 *     log-probability distance. F32 sits at 1e-4 (other families: 1e-6): likely llama.cpp's CPU
 *     GELU, which looks its result up in a float16 table (ggml's GGML_GELU_FP16; not verified
 *     here), while Ropewalk and the reference compute it exactly; the int8 activations of Q8_0 /
 *     Q4_0 then round some values the other way, 1e-3 – 2e-2 (stories260K's llama: 1e-4 at most steps).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import type { Llama } from 'node-llama-cpp';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { expectedWeights } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { againstLlamaCpp, PROMPTS } from '../helpers/llamacpp-oracle.ts';
import { mulberry32 } from '../helpers/prng.ts';
import { storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { useLlamaCpp } from '../helpers/llamacpp-fixture.ts';

const WINDOW = 16;
const MAX = 256;
const N = 140;
let llama: Llama;
const tmp = useLlamaCpp('ropewalk-gemma-gguf-', (l) => (llama = l));

const base = {
  hiddenSize: 64, intermediateSize: 128, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 512, rmsNormEps: Math.fround(1e-6),
  tiedEmbeddings: true, attentionBias: false, trainedContext: 2048,
};
const GEMMA2: ModelConfig = {
  ...base, architecture: 'gemma2', numLayers: 3, qkNorm: false,
  rope: { theta: 10000, rotaryDim: 16, layout: 'half' },
  slidingWindow: [WINDOW, 0, WINDOW],
  gemma: { embeddingScale: 8, attentionScale: 0.25, attentionSoftcap: 4, finalLogitSoftcap: 0.5 },
};
const GEMMA3: ModelConfig = {
  ...base, architecture: 'gemma3', numLayers: 6, qkNorm: true,
  rope: { theta: 1_000_000, rotaryDim: 16, layout: 'half', scaling: { type: 'linear', factor: 8 } },
  slidingWindow: [WINDOW, WINDOW, WINDOW, WINDOW, WINDOW, 0],
  localRope: { theta: 10000, rotaryDim: 16, layout: 'half' },
  gemma: { embeddingScale: 8, attentionScale: 0.25, attentionSoftcap: 0, finalLogitSoftcap: 0 },
};

/**
 * Seeded raw (Hugging Face) weights: N(0, std) matrices, N(0, 0.1) norm weights w of x̂·(1 + w), and
 * an embedding of std/√hidden, so that after its √hidden scale it does not dominate the residual
 * stream (a tied classifier would then echo the last token for ever).
 */
function rawWeights(config: ModelConfig, seed: number, std: number): ModelWeights {
  const rand = mulberry32(seed);
  const out: ModelWeights = new Map();
  for (const [name, shape] of expectedWeights(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const s = /norm\.weight$/.test(name) ? 0.1 : name === 'model.embed_tokens.weight' ? std / Math.sqrt(config.hiddenSize) : std;
    out.set(name, { shape, data: Float32Array.from({ length: n }, () => (rand() + rand() + rand() + rand() - 2) * Math.sqrt(3) * s) });
  }
  return out;
}

const files = new Map<string, { file: string; raw: ModelWeights }>();
/** The model's GGUF with its linear weights in `type` (the same seeded raw weights for every type). */
async function gemmaFile(config: ModelConfig, type: 'F32' | 'Q8_0' | 'Q4_0' = 'F32'): Promise<{ file: string; raw: ModelWeights }> {
  const key = `${config.architecture}-${type}`;
  const known = files.get(key);
  if (known) return known;
  const file = path.join(tmp, `${key}.gguf`);
  const raw = rawWeights(config, 17, 0.3);
  writeModelGguf(file, config, await storiesTokenizerMetadata(), (name) => raw.get(name)!.data, type);
  files.set(key, { file, raw });
  return { file, raw };
}

for (const want of [GEMMA2, GEMMA3]) {
  const arch = want.architecture;
  test(`${arch} GGUF: the config imports as written by hand; ≥ 100 greedy tokens past the window equal the reference`, async (t) => {
    const { file, raw } = await gemmaFile(want);
    const imported = await importGguf(file);
    assert.deepEqual(imported.manifest.config, want);
    const ids = [1, ...Array.from({ length: 19 }, (_, i) => (i * 37 + 5) % 512)];
    const r = await greedyAgainstReference({ config: want, weights: imported.weights, refWeights: raw, ids, steps: 110, maxContext: MAX });
    const distinct = new Set(r.tokens).size;
    t.diagnostic(`${arch}: ${distinct} distinct greedy tokens; worst |onnx − ref| / scale ${r.worst.toExponential(2)}; unwindowed reference up to ${r.fullOff.toExponential(2)} off, another token ${r.tokensDiffer} times`);
    assert.ok(distinct >= 20, `the greedy tokens vary (${distinct} distinct)`);
    assert.ok(r.fullOff > 1000 * Math.max(r.worst, 1e-9), 'the window changes the logits far beyond rounding');
  });

  // [type, greedy mean bound, teacher-forced max bound]; measured (gemma2 / gemma3): F32 134.3 / 131.5
  // of 140, max 1.4e-4 / 3.5e-4; Q8_0 85.1 / 56.9, 3.8e-3 / 1.6e-2; Q4_0 36.3 / 43.0, 1.9e-3 / 2.4e-2.
  for (const [type, meanAtLeast, within] of [['F32', 120, 1e-3], ['Q8_0', 30, 5e-2], ['Q4_0', 20, 5e-2]] as const) test(`${arch} GGUF ${type}: same prompt ids as llama.cpp, greedy agreement over ${PROMPTS.length} prompts ≥ ${meanAtLeast} of ${N} on average`, async (t) => {
    const { file } = await gemmaFile(want, type);
    // Where the tokens part earliest, teacher-forced along llama.cpp's tokens: how far the
    // log-probabilities are (int8 activations on both sides, rounded in different orders).
    const { agree, mean, worstPrompt: worst, distances } = await againstLlamaCpp(llama, file, N, 16, path.join(tmp, 'cache'));
    t.diagnostic(`${arch} ${type}: agrees with llama.cpp for ${agree.join(', ')} of ${N} tokens (mean ${mean}; prompts are 4–9 tokens, the window ${WINDOW})`);
    // F32: measured 134.3 (gemma2) and 131.5 (gemma3) of 140; a divergence is a near tie of the top
    // two logits (float32 summation orders differ), after which the two runs part.
    assert.ok(mean >= meanAtLeast, `${arch} ${type}: mean agreement ${mean} (${agree.join(', ')}), expected ≥ ${meanAtLeast}`);
    const sorted = [...distances].sort((a, b) => a - b);
    t.diagnostic(`${arch} ${type}: teacher-forced on ${JSON.stringify(worst)}: median log-prob distance ${sorted[8].toExponential(1)}, max ${sorted[15].toExponential(1)}`);
    assert.ok(sorted[15] < within, `${arch} ${type}: teacher-forced distances ${distances}`);
  });
}
