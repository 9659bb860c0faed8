/**
 * Qwen3-MoE (`qwen3moe`, Qwen3-30B-A3B's architecture) from a GGUF file written the way
 * llama.cpp's converter writes it (3-D `ffn_{gate,up,down}_exps` expert tensors, `ffn_gate_inp`
 * router, `qwen3moe.expert_*` metadata) and from the same weights as a Hugging Face folder
 * (`Qwen3MoeForCausalLM`: `mlp.gate`, `mlp.experts.N.*_proj`): random weights, 8 experts of
 * which each token uses 2 (renormalised), 2 layers, hidden 256 and expert width 256 (so
 * llama-quantize's K-quants apply), stories260K's 512-token tokenizer (so the ten story prompts
 * tokenize as in the other llama.cpp tests and the logits are not 151,936-way near ties).
 *   - the imported config is the one written here;
 *   - against llama.cpp (node-llama-cpp's CPU build; float32 KV cache, flash attention off) on the
 *     same file, by gguf-llamacpp.test.ts's measure (mean tokens to the first greedy divergence
 *     over the ten prompts, identical prompt ids; teacher-forced log-probability distances on a
 *     prompt): F32, and Q8_0 and Q4_K_M made by Debian's llama-quantize from the F32 file;
 *   - a decode step runs k = 2 of the 8 experts per layer (ONNX Runtime's profiler), so it reads
 *     2/8 of the experts' weights; a prefill step runs the experts its tokens chose, each on the
 *     rows of its tokens (T · k rows per layer in all);
 *   - the memory estimate from the file's header (the library's) counts every expert, as the bundle stores them;
 *   - the Hugging Face folder gives the GGUF's greedy tokens;
 *   - `--ep webgpu` (Mesa's lavapipe) runs the Q8_0 file with the CPU provider's first greedy tokens;
 *   - a tiny qwen3moe file with the real Qwen3 tokenizer: llama.cpp's prompt ids and 16 greedy tokens.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { Llama } from 'node-llama-cpp';
import { Engine } from '../../main/engine/generate/engine.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { CPU_TARGET, NATIVE_CPU_TARGET } from '../../main/engine/model/graph-target.ts';
import { nativeKernelsAvailable } from '../../main/engine/model/native-addon.ts';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { expectedWeights } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { writeSafetensors } from '../../main/engine/model/safetensors.ts';
import { agreement, againstLlamaCpp, debianLlamaCpp, GREEDY, llamaCppGreedy, PROMPTS, ropewalkGreedy, teacherForcedDistances } from '../helpers/llamacpp-oracle.ts';
import { useLlamaCpp } from '../helpers/llamacpp-fixture.ts';
import { profiledStep, weightBytesRead } from '../helpers/ort-profile.ts';
import { describeRun, parseJsonRun, runChat } from '../helpers/cli-run.ts';
import { readModelFacts } from '../../main/services/model-facts.ts';
import { qwen3TokenizerMetadata, randomWeights, storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';

const N = 100;
let llama: Llama;
const tmp = useLlamaCpp('ropewalk-qwen3moe-', (l) => (llama = l));
const cache = path.join(tmp, 'cache');

const E = 8;
const K = 2;
const CONFIG: ModelConfig = {
  architecture: 'qwen3moe', hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64,
  vocabSize: 512, rmsNormEps: Math.fround(1e-6), tiedEmbeddings: false, attentionBias: false, qkNorm: true,
  rope: { theta: 1_000_000, rotaryDim: 64, layout: 'half' }, trainedContext: 4096,
  moe: { numExperts: E, expertsPerToken: K, expertIntermediateSize: 256, routing: 'softmax-topk', normalizeTopK: true, routerBias: false, expertBias: false, activation: 'silu' },
};
/** The seeded weights, generated once, so the GGUF and the Hugging Face folder hold the same values. */
const rand = randomWeights(11, 0.05);
const WEIGHTS = new Map([...expectedWeights(CONFIG)].map(([name, shape]) => [name, { shape, data: rand(name, shape) }]));

let f32File: string | null = null;
async function f32Gguf(): Promise<string> {
  if (f32File) return f32File;
  const file = path.join(tmp, 'qwen3moe-F32.gguf');
  writeModelGguf(file, CONFIG, await storiesTokenizerMetadata(), (name) => WEIGHTS.get(name)!.data);
  return (f32File = file);
}

/** `target` made by Debian's llama-quantize from the F32 file (once). */
async function quantized(target: 'Q8_0' | 'Q4_K_M'): Promise<string> {
  const file = path.join(tmp, `qwen3moe-${target}.gguf`);
  if (!existsSync(file)) execFileSync(debianLlamaCpp(), ['llama-quantize', await f32Gguf(), file, target], { stdio: 'ignore' });
  return file;
}

test('a qwen3moe GGUF imports with its experts: the config written, one [out, in] weight per expert and projection', async () => {
  const m = await importGguf(await f32Gguf());
  assert.deepEqual(m.manifest.config, CONFIG);
  const w = m.weights.get('model.layers.1.mlp.experts.7.down_proj.weight');
  assert.ok(w && 'data' in w);
  assert.deepEqual(w.shape, [256, 256]);
  assert.deepEqual(w.data, WEIGHTS.get('model.layers.1.mlp.experts.7.down_proj.weight')!.data);
  // 2 layers × (4 attention + router + 8 × 3 experts + 4 norms) + embedding, classifier, final norm.
  assert.equal(m.weights.size, 2 * (4 + 1 + E * 3 + 4) + 3);
});

/**
 * [file, greedy mean bound, teacher-forced bound, steps of 16 within it, prompt]. Measured
 * 2026-12-02 (greedy agreement of 100 tokens; teacher-forced on the prompt given):
 *   F32: 100 on every prompt; 1–4e-6 at every step ("Once upon a time").
 *   Q8_0 (experts, attention and classifier Q8_0, llama.cpp's int8 activations reproduced): mean
 *     76.8 (dense qwen3 of the same shapes and file type: 76.6); the worst prompt parts at its
 *     prefill (2e-2 at every step: one near tie in an int8 rounding or a routing choice moves the
 *     KV cache), so the steps are taken on the first prompt, which agrees for all 100.
 *   Q4_K_M (experts Q4_K, layer 1's down Q6_K, attention Q4_K/Q5_K/Q8_0): mean 18.3, 5e-2 – 5e-1:
 *     llama.cpp quantizes these types' activations per 256 with one float32 scale (`block_q8_K`),
 *     which MatMulNBits cannot express (gguf-lowbit-llamacpp.test.ts: Q2_K, Q3_K, IQ4_XS alike).
 */
const CASES = [
  ['F32', 95, 1e-4, 16, PROMPTS[0], 'float32 ×69'],
  ['Q8_0', 50, 1e-4, 12, PROMPTS[0], 'float32 ×11, q8 (Q8_0) ×58'],
  ['Q4_K_M', 8, 0.15, 14, PROMPTS[0], 'float32 ×11, q4 (Q4_K) ×43, q8 (Q5_K) ×2, q8 (Q6_K) ×9, q8 (Q8_0) ×4'],
] as const;

for (const [type, meanAtLeast, within, steps, prompt, formats] of CASES) {
  test(`qwen3moe ${type}: greedy agreement with llama.cpp over ${PROMPTS.length} prompts ≥ ${meanAtLeast} of ${N} on average; teacher-forced ${steps} of 16 steps within ${within}`, async (t) => {
    const file = type === 'F32' ? await f32Gguf() : await quantized(type);
    // Every expert on the file's own blocks: 2 layers × 8 experts × 3 in the quantized counts
    // (the routers and norms float32; the embedding on its blocks too, Q4_K_M's with their offsets).
    const engine = await Engine.load(file, { cacheDir: cache });
    assert.equal(engine.info.weights.formats, formats);
    await engine.dispose();
    const r = await againstLlamaCpp(llama, file, N, 16, cache);
    const distances = await teacherForcedDistances(llama, file, prompt, 16, cache);
    const close = distances.filter((d) => d < within).length;
    const show = (ds: number[]) => ds.map((d) => d.toExponential(1)).join(' ');
    t.diagnostic(`${type}: agreement ${r.agree.join(', ')} (mean ${r.mean}); teacher-forced on "${prompt}": ${show(distances)}; on "${r.worstPrompt}" (parts first): ${show(r.distances)}`);
    assert.ok(r.mean >= meanAtLeast, `${type}: mean agreement ${r.mean} (${r.agree.join(', ')}), expected ≥ ${meanAtLeast}`);
    assert.ok(close >= steps, `${type}: ${close} of 16 teacher-forced steps within ${within}`);
  });
}

test('a decode step runs 2 of the 8 experts per layer (ONNX Runtime\'s profiler), reading 2/8 of the experts\' weights; a prefill step runs the experts its tokens chose, each on those tokens only', async (t) => {
  for (const type of ['F32', 'Q8_0'] as const) {
    const file = type === 'F32' ? await f32Gguf() : await quantized(type);
    const bundle = await resolveModel(file, cache);
    const expertRuns = (runs: { graph: string }[]) => new Set(runs.filter((r) => /_expert\d+$/.test(r.graph)).map((r) => r.graph));
    const decode = await profiledStep(bundle.dir, CONFIG, 1, path.join(tmp, `profile-${type}-decode`));
    assert.equal(expertRuns(decode).size, CONFIG.numLayers * K, `${type}: experts run in a decode step: ${[...expertRuns(decode)].join(', ')}`);
    const bytes = weightBytesRead(bundle.dir, decode);
    const ratio = bytes.experts / bytes.allExperts;
    t.diagnostic(`${type}: a decode step reads ${bytes.experts} of the experts' ${bytes.allExperts} bytes (${ratio.toFixed(3)}) and ${bytes.rest} others: ${bytes.experts + bytes.rest} in all`);
    assert.equal(ratio, K / E, `${type}: experts' bytes read ${bytes.experts} of ${bytes.allExperts}`);
    const T = 8;
    const prefill = await profiledStep(bundle.dir, CONFIG, T, path.join(tmp, `profile-${type}-prefill`));
    const chosen = expertRuns(prefill).size;
    // Each expert's matmuls run on the rows of the tokens that chose it: T · k rows per layer in all.
    const rows = new Map<string, number>();
    for (const r of prefill) if (/_expert\d+$/.test(r.graph) && /MatMul/.test(r.op)) rows.set(r.graph, r.inputShapes[0].slice(0, -1).reduce((a, b) => a * b, 1));
    const expertRows = [...rows.values()].reduce((a, b) => a + b, 0);
    t.diagnostic(`${type}: an ${T}-token prefill step runs ${chosen} of the ${CONFIG.numLayers * E} experts, on ${expertRows} token rows in all`);
    assert.ok(chosen > CONFIG.numLayers * K && chosen <= CONFIG.numLayers * E, `${type}: ${chosen} experts in a prefill step`);
    assert.equal(expertRows, CONFIG.numLayers * T * K, `${type}: expert rows ${[...rows].join(' ')}`);
  }
});

test("the memory estimate counts every expert: the library's weight bytes from the GGUF header are the bundle's, all 16 experts in them", async () => {
  for (const type of ['F32', 'Q8_0', 'Q4_K_M'] as const) {
    const file = type === 'F32' ? await f32Gguf() : await quantized(type);
    const facts = await readModelFacts(file, 'gguf');
    // The bundle the engine loads by default: the native CPU target's where the addon has its kernels (Q4_K_M's super-blocks stored as they are).
    const bundle = await resolveModel(file, cache, undefined, { target: nativeKernelsAvailable() ? NATIVE_CPU_TARGET : CPU_TARGET });
    assert.equal(facts.weightBytes, bundle.manifest.weights!.bytes, `${type}: header estimate vs bundle`);
    const experts = Object.keys(bundle.manifest.weights!.formats).filter((n) => n.includes('.experts.'));
    assert.equal(experts.length, CONFIG.numLayers * E * 3, type);
  }
  // F32: every expert's 256 × 256 float32 values are in the estimate.
  assert.ok((await readModelFacts(await f32Gguf(), 'gguf')).weightBytes! > CONFIG.numLayers * E * 3 * 256 * 256 * 4);
});

/** The test's weights as a Hugging Face Qwen3-MoE folder (Qwen3-30B-A3B's config fields, sizes scaled down), tokenizer from the GGUF. */
async function writeHfFolder(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const c = CONFIG;
  const config = {
    architectures: ['Qwen3MoeForCausalLM'], attention_bias: false, attention_dropout: 0, bos_token_id: 1, eos_token_id: 2,
    decoder_sparse_step: 1, head_dim: c.headDim, hidden_act: 'silu', hidden_size: c.hiddenSize, initializer_range: 0.02,
    intermediate_size: c.intermediateSize, max_position_embeddings: c.trainedContext, max_window_layers: c.numLayers, mlp_only_layers: [],
    model_type: 'qwen3_moe', moe_intermediate_size: c.moe!.expertIntermediateSize, norm_topk_prob: true, num_attention_heads: c.numHeads,
    num_experts: E, num_experts_per_tok: K, num_hidden_layers: c.numLayers, num_key_value_heads: c.numKvHeads, output_router_logits: false,
    rms_norm_eps: 1e-6, rope_scaling: null, rope_theta: c.rope.theta, router_aux_loss_coef: 0.001, sliding_window: null,
    tie_word_embeddings: false, torch_dtype: 'float32', use_cache: true, use_sliding_window: false, vocab_size: c.vocabSize,
  };
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  const tensors = Object.fromEntries([...WEIGHTS].map(([name, w]) => [name, { dtype: 'F32' as const, shape: w.shape, data: w.data }]));
  await writeSafetensors(path.join(dir, 'model.safetensors'), tensors);
  const gguf = await importGguf(await f32Gguf());
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(gguf.tokenizerJson));
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(gguf.tokenizerConfig));
}

test('the same weights as a Hugging Face folder (Qwen3MoeForCausalLM) give the GGUF\'s greedy tokens over the ten prompts', async () => {
  const dir = path.join(tmp, 'hf-qwen3moe');
  await writeHfFolder(dir);
  const hf = await ropewalkGreedy(dir, PROMPTS, N, cache);
  const gguf = await ropewalkGreedy(await f32Gguf(), PROMPTS, N, cache);
  PROMPTS.forEach((p, i) => {
    assert.deepEqual(hf[i].promptTokens, gguf[i].promptTokens, p);
    assert.deepEqual(hf[i].tokens, gguf[i].tokens, p);
  });
});

test('the Hugging Face folder with --quantize q8 and q4: every expert quantized at import (rtn blocks), and q8 gives the float model\'s first greedy tokens', async (t) => {
  const dir = path.join(tmp, 'hf-qwen3moe');
  await writeHfFolder(dir);
  const greedy = async (quantize?: 'q8' | 'q4') => {
    const engine = await Engine.load(dir, { cacheDir: cache, quantize });
    let tokens: number[] = [];
    for await (const ev of engine.generate({ prompt: PROMPTS[0], maxTokens: 32, sampler: GREEDY, ignoreEos: true })) if (ev.type === 'done') tokens = ev.tokens;
    const formats = engine.info.weights.formats;
    await engine.dispose();
    return { tokens, formats };
  };
  const float = await greedy();
  assert.equal(float.formats, 'float32 ×69');
  const agree: Record<string, number> = {};
  for (const quantize of ['q8', 'q4'] as const) {
    const q = await greedy(quantize);
    // rtn blocks for 2 layers × (4 attention + 24 experts) + embedding and classifier; norms and routers float32.
    assert.equal(q.formats, `float32 ×11, ${quantize} (rtn) ×58`);
    agree[quantize] = agreement(q.tokens, float.tokens, 32);
  }
  t.diagnostic(`greedy tokens as the float model's: q8 ${agree.q8} of 32, q4 ${agree.q4} of 32`);
  // 8-bit weights and int8 activations move the logits by ~1e-2 on this chaotic random model, so
  // only the first tokens must agree; 4-bit ones are recorded, not bounded.
  assert.ok(agree.q8 >= 4, `q8 agrees for ${agree.q8} tokens`);
});

test('--ep webgpu (Mesa lavapipe here) on the Q8_0 file runs on WebGPU with the CPU provider\'s first greedy tokens (≥ 16 of 40)', async (t) => {
  const file = await quantized('Q8_0');
  const args = ['--model', file, '--temperature', '0', '--max-tokens', '40', '--json', PROMPTS[0]];
  const cpu = parseJsonRun(await runChat(['--ep', 'cpu', ...args], cache, 180_000));
  const r = await runChat(['--ep', 'webgpu', ...args], cache, 300_000);
  assert.doesNotMatch(r.stderr, /could not be used/, `no WebGPU adapter here: install Mesa's lavapipe (see .ci/run). ${describeRun(r)}`);
  const gpu = parseJsonRun(r);
  assert.equal(gpu.stats.executionProvider, 'webgpu', describeRun(r));
  const agree = agreement(gpu.tokens, cpu.tokens, 40);
  t.diagnostic(`webgpu: ${agree} of 40 greedy tokens as the CPU's; ${gpu.stats.nodesOnCpu} main-graph nodes on the CPU provider`);
  // WebGPU's MatMulNBits kernel sums in another order than the CPU's; on this chaotic random model
  // that parts the two at a near tie (measured: after 24 tokens), so the first 16 must agree.
  assert.ok(agree >= 16, `webgpu agrees with the CPU for ${agree} tokens: ${gpu.tokens.join(' ')} vs ${cpu.tokens.join(' ')}`);
});

test("a qwen3moe GGUF with the real Qwen3 tokenizer (151,936 tokens, tied embedding): llama.cpp's prompt ids and its greedy tokens for 16", async (t) => {
  const tiny: ModelConfig = {
    ...CONFIG, hiddenSize: 32, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 151_936, tiedEmbeddings: true,
    rope: { theta: 1_000_000, rotaryDim: 16, layout: 'half' },
    moe: { ...CONFIG.moe!, numExperts: 4, expertIntermediateSize: 32 },
  };
  const file = path.join(tmp, 'qwen3moe-qwen3-tokenizer.gguf');
  writeModelGguf(file, tiny, qwen3TokenizerMetadata(tiny.vocabSize), randomWeights(5, 0.3));
  const [ours] = await ropewalkGreedy(file, ['The quick brown fox'], 16, cache);
  const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
  assert.deepEqual(ours.promptTokens, model.tokenize('The quick brown fox'));
  await model.dispose();
  const [theirs] = await llamaCppGreedy(llama, file, [ours.promptTokens], 16);
  t.diagnostic(`ours ${ours.tokens.join(' ')}; llama.cpp ${theirs.join(' ')}`);
  assert.deepEqual(ours.tokens, theirs);
});
