/**
 * The ONNX graph (real ONNX Runtime, CPU EP) agrees with the independent float64 reference
 * forward pass on synthetic Hugging Face checkpoints written by the test itself: scaled-down
 * real configs of Llama, Mistral, Qwen2 and Qwen3 with random weights and the real Qwen3
 * tokenizer, covering GQA, q/k/v bias, QK-norm, partial rotary, tied and untied embeddings, and
 * every RoPE scaling variant. Positions go past the original context for the scaled variants.
 * Both decoder backends (JS API and native addon) run each case; greedy tokens are identical.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { argmax, maxAbsDiff, OnnxRunner } from '../helpers/onnx-runner.ts';
import { ReferenceModel } from '../helpers/reference-forward.ts';
import { writeSyntheticCheckpoint, type SyntheticSpec } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-graph-hf-'));
after(() => rmSync(root, { recursive: true, force: true }));

const cases: { name: string; spec: SyntheticSpec; maxContext: number }[] = [
  { name: 'llama, GQA, llama3 rope scaling, tied', spec: { family: 'llama', tied: true, maxPositionEmbeddings: 32 }, maxContext: 128 },
  { name: 'llama, plain rope, untied, f16', spec: { family: 'llama', ropeScaling: null, dtype: 'F16' }, maxContext: 128 },
  { name: 'mistral, linear scaling, bf16, sharded', spec: { family: 'mistral', dtype: 'BF16', sharded: true, ropeScaling: { rope_type: 'linear', factor: 4 } }, maxContext: 128 },
  { name: 'qwen2, q/k/v bias, dynamic NTK', spec: { family: 'qwen2', maxPositionEmbeddings: 16, ropeScaling: { rope_type: 'dynamic', factor: 2 } }, maxContext: 64 },
  { name: 'qwen3, QK-norm, yarn, untied', spec: { family: 'qwen3', tied: false, maxPositionEmbeddings: 32, ropeScaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32 } }, maxContext: 128 },
  // gpt-oss's YaRN shape (factor 32, unrounded ramp) and DeepSeek's mscale ratio as the attention factor.
  { name: 'qwen3, yarn factor 32 with truncate false', spec: { family: 'qwen3', maxPositionEmbeddings: 128, ropeScaling: { rope_type: 'yarn', factor: 32, original_max_position_embeddings: 32, beta_fast: 32, beta_slow: 1, truncate: false } }, maxContext: 128 },
  { name: 'llama, yarn with mscale / mscale_all_dim', spec: { family: 'llama', maxPositionEmbeddings: 64, ropeScaling: { type: 'yarn', factor: 40, mscale: 0.707, mscale_all_dim: 1, original_max_position_embeddings: 16 } }, maxContext: 64 },
  { name: 'qwen3, partial rotary 0.5, tied', spec: { family: 'qwen3', tied: true, partialRotary: 0.5 }, maxContext: 128 },
];

for (const c of cases) {
  test(`graph = reference: ${c.name}`, async () => {
    const dir = path.join(root, c.name.replace(/\W+/g, '-'));
    await writeSyntheticCheckpoint(dir, { seed: 7, ...c.spec });
    const model = await importHuggingFace(dir);
    const config = model.manifest.config;
    const runner = await OnnxRunner.create(config, model.weights, c.maxContext);
    const native = await OnnxRunner.create(config, model.weights, c.maxContext, 'native');
    const ref = new ReferenceModel(config, model.weights, c.maxContext);
    try {
      // Prefill 40 tokens in two chunks (past the scaled models' original context), then decode.
      const prompt = Array.from({ length: 40 }, (_, i) => (i * 7919 + 13) % 151_000);
      await runner.forward(prompt.slice(0, 25));
      await native.forward(prompt.slice(0, 25));
      ref.forward(prompt.slice(0, 25));
      let onnx = await runner.forward(prompt.slice(25));
      let viaAddon = await native.forward(prompt.slice(25));
      let expected = ref.forward(prompt.slice(25));
      for (let step = 0; step < 12; step++) {
        const { diff, scale } = maxAbsDiff(onnx, expected);
        // Float32 graph vs float64 reference: ~2e-7 here; a sign error in RoPE gives ~5e-4.
        assert.ok(diff <= 1e-5 * Math.max(1, scale), `${c.name} step ${step}: max |onnx − ref| = ${diff}, scale ${scale}`);
        const between = maxAbsDiff(viaAddon, onnx);
        assert.ok(between.diff <= 1e-5 * Math.max(1, between.scale), `${c.name} step ${step}: max |native − js| = ${between.diff}`);
        assert.equal(argmax(viaAddon), argmax(onnx), `${c.name} step ${step}: greedy tokens differ between backends`);
        const next = argmax(expected);
        onnx = await runner.forward([next]);
        viaAddon = await native.forward([next]);
        expected = ref.forward([next]);
      }
    } finally {
      await runner.dispose();
      await native.dispose();
    }
  });
}
