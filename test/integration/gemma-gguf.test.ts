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
 *     same file: identical prompt ids, and greedy agreement over the ten story prompts measured as
 *     in gguf-llamacpp.test.ts (mean tokens to the first divergence).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { getLlama, type Llama } from 'node-llama-cpp';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { expectedWeights } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { agreement, llamaCppGreedy, PROMPTS, ropewalkGreedy } from '../helpers/llamacpp-oracle.ts';
import { mulberry32 } from '../helpers/prng.ts';
import { storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';

const WINDOW = 16;
const MAX = 256;
const N = 140;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-gemma-gguf-'));
let llama: Llama;
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as never });
});
after(async () => {
  await llama?.dispose();
  rmSync(tmp, { recursive: true, force: true });
});

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
async function gemmaFile(config: ModelConfig): Promise<{ file: string; raw: ModelWeights }> {
  const known = files.get(config.architecture);
  if (known) return known;
  const file = path.join(tmp, `${config.architecture}.gguf`);
  const raw = rawWeights(config, 17, 0.3);
  writeModelGguf(file, config, await storiesTokenizerMetadata(), (name) => raw.get(name)!.data);
  files.set(config.architecture, { file, raw });
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

  test(`${arch} GGUF: same prompt ids as llama.cpp, greedy agreement over ${PROMPTS.length} prompts`, async (t) => {
    const { file } = await gemmaFile(want);
    const ours = await ropewalkGreedy(file, PROMPTS, N, path.join(tmp, 'cache'));
    const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
    PROMPTS.forEach((p, i) => assert.deepEqual(ours[i].promptTokens, [model.tokens.bos, ...model.tokenize(p)], p));
    await model.dispose();
    const theirs = await llamaCppGreedy(llama, file, ours.map((d) => d.promptTokens), N);
    const agree = ours.map((d, i) => agreement(d.tokens, theirs[i], N));
    const mean = agree.reduce((a, b) => a + b, 0) / agree.length;
    t.diagnostic(`${arch}: agrees with llama.cpp for ${agree.join(', ')} of ${N} tokens (mean ${mean}; prompts are 4–9 tokens, the window ${WINDOW})`);
    // Measured 134.3 (gemma2) and 131.5 (gemma3) of 140; a divergence is a near tie of the top two
    // logits (float32 summation orders differ), after which the two runs part.
    assert.ok(mean >= 120, `${arch}: mean agreement ${mean} (${agree.join(', ')}), expected ≥ 120`);
  });
}
