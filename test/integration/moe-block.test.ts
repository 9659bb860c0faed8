/**
 * The MoE block (moe-block.ts) in the real ONNX Runtime graph against the independent float64
 * reference (reference-forward.ts with reference-moe.ts, written from transformers'
 * Qwen3MoeSparseMoeBlock and gpt-oss's GptOssTopKRouter), on both backends: a prefill in two
 * chunks and greedy decode steps, logits equal to float32 rounding of their scale and the same
 * greedy tokens, for every routing option the block has:
 *   - Qwen3-MoE: softmax over all experts, top-k, renormalised (`norm_topk_prob` true) or not;
 *   - gpt-oss's routing (the plug points its MoE uses): a router bias, top-k of the logits then a
 *     softmax over those k, and biases on every expert projection;
 *   - gpt-oss's clamped SwiGLU in the experts (limit lowered to 1.5 so its clamps act on these
 *     weights: the reference's logits without them differ by up to 1.23);
 *   - k = 1 and k = E (every expert for every token);
 *   - 32 experts top-2, grouped four to an outer If (`expertGroupSize`), and k = 1 of 12 (groups of 4).
 * Random weights, 12 experts, 2 layers, no tokenizer (token ids in, logits out).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expectedWeights } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights, MoeOptions } from '../../main/engine/model/manifest.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { expertGroupSize } from '../../main/engine/model/moe-block.ts';
import { randomWeights } from '../helpers/synthetic-gguf.ts';

const E = 12;
const base = (moe: Partial<MoeOptions>): ModelConfig => ({
  architecture: 'qwen3moe', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16,
  vocabSize: 300, rmsNormEps: 1e-6, tiedEmbeddings: false, attentionBias: false, qkNorm: true,
  rope: { theta: 10000, rotaryDim: 16, layout: 'half' }, trainedContext: 512,
  moe: { numExperts: E, expertsPerToken: 3, expertIntermediateSize: 32, routing: 'softmax-topk', normalizeTopK: true, routerBias: false, expertBias: false, activation: 'silu', ...moe },
});

/** Seeded weights (biases N(0, 0.3), so they matter), as the graph and the reference both get them. */
function weights(c: ModelConfig, seed: number): ModelWeights {
  const rand = randomWeights(seed, 0.15);
  const bias = randomWeights(seed + 1, 0.3);
  return new Map([...expectedWeights(c)].map(([name, shape]) => [name, { shape, data: (name.endsWith('.bias') ? bias : rand)(name, shape) }]));
}

const CASES: [string, Partial<MoeOptions>][] = [
  ['Qwen3-MoE: softmax, top-3, renormalised', {}],
  ['softmax, top-3, not renormalised', { normalizeTopK: false }],
  ["gpt-oss's routing: router bias, top-3 logits then softmax, expert biases", { routing: 'topk-softmax', routerBias: true, expertBias: true }],
  ["gpt-oss's whole expert block: + clamped SwiGLU (α 1.702, limit 1.5, so the clamps bite)", { routing: 'topk-softmax', routerBias: true, expertBias: true, activation: 'swiglu-clamped', swiglu: { alpha: 1.702, limit: 1.5 } }],
  ['top-1', { expertsPerToken: 1 }],
  ['every expert for every token (k = E)', { expertsPerToken: E }],
  // expertGroupSize(32, 2) = 4: eight groups of four experts, each behind one more If.
  ['32 experts top-2, in groups of 4 (nested Ifs)', { numExperts: 32, expertsPerToken: 2 }],
];

test('expertGroupSize: the divisor G of E least in E/G + G·min(k, E/G) Ifs per decode step, the larger on a tie; 1 where none is below E', () => {
  const cases = [[8, 4, 1], [12, 3, 1], [12, 1, 4], [12, 12, 1], [32, 4, 4], [32, 2, 4], [128, 8, 4], [128, 4, 8], [4, 2, 1], [7, 1, 1]];
  assert.deepEqual(cases.map(([e, k]) => expertGroupSize(e, k)), cases.map((c) => c[2]));
});

for (const [name, moe] of CASES) {
  test(`MoE block, ${name}: 24 greedy tokens and their logits equal the reference forward's, both backends`, async (t) => {
    const config = base(moe);
    const w = weights(config, 5);
    for (const backend of ['js', 'native'] as const) {
      const r = await greedyAgainstReference({ config, weights: w, ids: [1, 17, 42, 99, 7, 230, 5, 64, 12], steps: 24, maxContext: 64, backend });
      t.diagnostic(`${backend}: worst logit difference ${r.worst.toExponential(2)} of the scale; tokens ${r.tokens.join(' ')}`);
      assert.ok(r.worst < 1e-5, `${backend}: ${r.worst}`);
      assert.ok(new Set(r.tokens).size > 3, `the greedy tokens vary: ${r.tokens.join(' ')}`);
    }
  });
}
