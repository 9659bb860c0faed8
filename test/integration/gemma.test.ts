/**
 * Gemma 2 and Gemma 3 (text) from Hugging Face folders, through the real ONNX Runtime graph,
 * against the independent float64 reference forward (test/helpers/reference-forward.ts, written
 * from the Gemma 2 report and transformers' modeling_gemma2.py / modeling_gemma3.py semantics; it
 * takes the checkpoint's raw norm weights as 1 + w and a config written here by hand, never the
 * import's). Python transformers cannot be installed here, so it is the transformers-side oracle.
 * Random-weight checkpoints with transformers' field sets, windows (16) shorter than the 256-token
 * context, soft-caps small enough to bite (random weights give small logits):
 *   - the imported config is the hand-written one (window pattern, scale, soft-caps, local RoPE);
 *   - greedy tokens equal the reference's for ≥ 100 tokens past every window, logits to float32
 *     rounding at each step, on both backends; the unwindowed reference is far off;
 *   - a context shift past the window turns each layer's keys by its own RoPE (Gemma 3: local or
 *     global base) and equals the reference's shift on both backends; the engine shifts both families;
 *   - Gemma's chat templates render `<start_of_turn>` turns (Gemma 3's folds a system message in).
 * The GGUF side (llama.cpp's converter layout, llama.cpp agreement) is gemma-gguf.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { renderChatTemplate } from '../../main/engine/tokenizer/chat-template.ts';
import { greedyAgainstReference } from '../helpers/greedy-reference.ts';
import { OnnxRunner } from '../helpers/onnx-runner.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import { GEMMA_CHAT_TEMPLATE, writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';
import { advanceInLockstep, decodeInLockstep } from '../helpers/lockstep.ts';

const WINDOW = 16;
const MAX = 256;
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-gemma-'));
after(() => rmSync(root, { recursive: true, force: true }));

const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13) % 151_000);
const base = {
  hiddenSize: 32, intermediateSize: 64, numLayers: 3, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 151_669, rmsNormEps: 1e-6,
  tiedEmbeddings: true, attentionBias: false,
};

/** Gemma 2 as its config.json says, written out by hand. */
const GEMMA2: ModelConfig = {
  ...base, architecture: 'gemma2', qkNorm: false, trainedContext: 8192,
  rope: { theta: 10000, rotaryDim: 16, layout: 'half' },
  slidingWindow: [WINDOW, 0, WINDOW], // even layers slide
  gemma: { embeddingScale: Math.fround(Math.sqrt(32)), attentionScale: 24 ** -0.5, attentionSoftcap: 0.2, finalLogitSoftcap: 0.5 },
};

/** Gemma 3 (text): layers 0–4 slide with base 10,000, layer 5 is global with base 1,000,000 and linear scaling 8. */
const GEMMA3: ModelConfig = {
  ...base, numLayers: 6, architecture: 'gemma3', qkNorm: true, trainedContext: 32768,
  rope: { theta: 1_000_000, rotaryDim: 16, layout: 'half', scaling: { type: 'linear', factor: 8 } },
  slidingWindow: [WINDOW, WINDOW, WINDOW, WINDOW, WINDOW, 0],
  localRope: { theta: 10000, rotaryDim: 16, layout: 'half' },
  gemma: { embeddingScale: Math.fround(Math.sqrt(32)), attentionScale: 16 ** -0.5, attentionSoftcap: 0, finalLogitSoftcap: 0 },
};

async function checkpoint(family: 'gemma2' | 'gemma3_text') {
  const dir = path.join(root, family);
  const overrides = family === 'gemma2'
    ? { sliding_window: WINDOW, query_pre_attn_scalar: 24, attn_logit_softcapping: 0.2, final_logit_softcapping: 0.5 }
    : { sliding_window: WINDOW, rope_scaling: { rope_type: 'linear', factor: 8 } };
  const raw = await writeSyntheticCheckpoint(dir, { family, seed: 21, layers: family === 'gemma2' ? 3 : 6, headDim: 16, configOverrides: overrides });
  return { dir, raw: raw as ModelWeights, model: await importHuggingFace(dir) };
}

for (const [family, want] of [['gemma2', GEMMA2], ['gemma3_text', GEMMA3]] as const) {
  test(`${family}: the config imports as written by hand; ≥ 100 greedy tokens past the ${WINDOW}-token window equal the reference on both backends`, async (t) => {
    const { raw, model } = await checkpoint(family);
    assert.deepEqual(model.manifest.config, want);
    const steps = 120;
    for (const backend of ['js', 'native'] as const) {
      const r = await greedyAgainstReference({
        config: model.manifest.config, weights: model.weights, refWeights: raw, refConfig: want, ids: prompt, steps, maxContext: MAX, backend,
      });
      t.diagnostic(`${family} ${backend}: ${steps} steps (${prompt.length + steps - WINDOW} past the window), worst |onnx − ref| / scale ${r.worst.toExponential(2)}; unwindowed reference up to ${r.fullOff.toExponential(2)} off, another token ${r.tokensDiffer} times`);
      assert.ok(r.fullOff > 1000 * Math.max(r.worst, 1e-9), 'the window changes the logits far beyond rounding');
    }
  });
}

for (const backend of ['js', 'native'] as const) {
  test(`gemma3 ${backend}: a context shift past the window turns each layer's keys by its own RoPE (local or global) and equals the reference's shift, 60 tokens on`, async (t) => {
    const { raw, model } = await checkpoint('gemma3_text');
    const runner = await OnnxRunner.create(GEMMA3, model.weights, MAX, backend);
    const ref = new ReferenceModel(GEMMA3, raw, MAX);
    try {
      let expected = ref.forward(prompt);
      await runner.forward(prompt);
      expected = await advanceInLockstep(runner, ref, expected, 90);
      const [keep, drop] = [1, 40];
      const { cos, sin } = runner.rope.shiftRotation(drop);
      const layerTables = Uint8Array.from(GEMMA3.slidingWindow!, (w) => (w > 0 ? 1 : 0));
      runner.session.shift(runner.kv, keep, drop, { cos, sin, rotaryDim: 16, interleaved: false, layerTables });
      ref.shift(keep, drop);
      const worst = await decodeInLockstep(runner, ref, expected, 60, 'after the shift');
      t.diagnostic(`gemma3 ${backend}: after dropping ${drop} of 90, 60 steps, worst |onnx − ref| / scale ${worst.toExponential(2)}`);
    } finally {
      await runner.dispose();
    }
  });
}

test('the engine shifts Gemma 2 and Gemma 3 (per-layer rotation) past the max context and goes on', async () => {
  const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
  for (const family of ['gemma3_text', 'gemma2'] as const) {
    const { dir } = await checkpoint(family);
    const engine = await Engine.load(dir, { cacheDir: path.join(root, 'cache'), maxContext: 64 });
    try {
      let done: GenerationEvent | undefined;
      for await (const ev of engine.generate({ prompt: 'Once upon a time', maxTokens: 80, sampler: GREEDY, ignoreEos: true, contextShift: true })) done = ev;
      assert.ok(done?.type === 'done', JSON.stringify(done));
      assert.equal(done.reason, 'length', family);
      assert.equal(done.stats.contextShifts, 1, family);
    } finally {
      await engine.dispose();
    }
  }
});

test('gemma2: the soft-caps bite (the reference without them is far off)', async () => {
  const { raw } = await checkpoint('gemma2');
  const capped = new ReferenceModel(GEMMA2, raw, MAX).forward(prompt);
  const uncapped = new ReferenceModel({ ...GEMMA2, gemma: { ...GEMMA2.gemma!, attentionSoftcap: 0, finalLogitSoftcap: 0 } }, raw, MAX).forward(prompt);
  let diff = 0;
  for (let i = 0; i < capped.length; i++) diff = Math.max(diff, Math.abs(capped[i] - uncapped[i]));
  assert.ok(diff > 1e-2, `soft-caps change the logits by only ${diff}`);
});

/** Gemma 3's template (google/gemma-3-1b-it tokenizer_config.json): a system message opens the first user turn. */
const GEMMA3_TEMPLATE = `{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
`;

test("Gemma 3's chat template: the system message opens the first user turn", () => {
  const text = renderChatTemplate(GEMMA3_TEMPLATE, [
    { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'A story?' },
  ], { addGenerationPrompt: true, bosToken: '<bos>' });
  assert.equal(text, '<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nA story?<end_of_turn>\n<start_of_turn>model\n');
});

test("Gemma's chat template: <start_of_turn> user / model turns, the generation prompt opens a model turn", () => {
  const text = renderChatTemplate(GEMMA_CHAT_TEMPLATE, [
    { role: 'user', content: 'Hi ' }, { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'A story?' },
  ], { addGenerationPrompt: true, bosToken: '<bos>' });
  assert.equal(text, '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nA story?<end_of_turn>\n<start_of_turn>model\n');
  // Gemma 2's template refuses a system message itself (as transformers' apply_chat_template does).
  assert.throws(() => renderChatTemplate(GEMMA_CHAT_TEMPLATE, [{ role: 'system', content: 'x' }, { role: 'user', content: 'Hi' }], { addGenerationPrompt: true }), /System role not supported/);
});
