/**
 * GGUF import end to end (real ONNX Runtime): stories260K.gguf (F32) reproduces the llama2.c
 * checkpoint's greedy tokens; the quantized copies load with their linear weights kept as
 * MatMulNBits blocks (formats in the manifest); a Qwen3-shaped GGUF with the real Qwen3 tokenizer
 * gives the same prompt ids, chat prompt and greedy tokens as the same weights imported from a
 * Hugging Face folder (half RoPE layout, q/k norms, tied embedding).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { EXTERNAL_DATA_FILE } from '../../main/engine/model/decoder-graph.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { writeGguf } from '../helpers/gguf-writer.ts';
import { GGUF_DIR, STORIES_BIN, STORIES_GGUF } from '../helpers/paths.ts';
import { configMetadata, qwen3_0_6bConfig, qwen3TokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const tmp = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-gguf-test-'));
const cacheDir = path.join(tmp, 'cache');
after(() => rmSync(tmp, { recursive: true, force: true }));

async function greedy(model: string, req: Partial<GenerationRequest> & { maxTokens: number }) {
  const engine = await Engine.load(model, { cacheDir });
  try {
    let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
    for await (const ev of engine.generate({ prompt: 'Once upon a time', sampler: GREEDY, ignoreEos: true, ...req })) {
      if (ev.type === 'done') done = ev;
    }
    assert.ok(done && done.reason !== 'error', `generation ended: ${JSON.stringify(done)}`);
    return done;
  } finally {
    await engine.dispose();
  }
}

test('stories260K.gguf (F32) gives the llama2.c checkpoint\'s prompt ids and 200 greedy tokens', async () => {
  const fromBin = await greedy(STORIES_BIN, { maxTokens: 200 });
  const fromGguf = await greedy(STORIES_GGUF, { maxTokens: 200 });
  assert.deepEqual(fromGguf.promptTokens, fromBin.promptTokens);
  assert.deepEqual(fromGguf.tokens, fromBin.tokens);
  const bundle = await resolveModel(STORIES_GGUF, cacheDir);
  assert.equal(bundle.manifest.source.kind, 'gguf');
  assert.equal(bundle.manifest.config.rope.layout, 'interleaved');
  assert.deepEqual(bundle.manifest.weights?.counts, { float32: 48 });
});

test('quantized stories260K files load with linear weights as MatMulNBits blocks', async (t) => {
  const f32Bytes = statSync(path.join((await resolveModel(STORIES_GGUF, cacheDir)).dir, EXTERNAL_DATA_FILE)).size;
  for (const [file, fmt] of [['q8_0', 'q8 (Q8_0)'], ['q4_0', 'q4 (Q4_0)'], ['q5_1', 'q8 (Q5_1)']]) {
    const src = path.join(GGUF_DIR, `stories260K-${file}.gguf`);
    const bundle = await resolveModel(src, cacheDir);
    const w = bundle.manifest.weights!;
    // Per layer: q, k, v, o, gate, up (ffn_down's rows of 172 stay F32 in the file) + the
    // classifier, + the embedding where GatherBlockQuantized reads its blocks (not Q5_1's offsets).
    assert.equal(w.counts[fmt], 5 * 6 + 1 + (file === 'q5_1' ? 0 : 1), `${file}: ${JSON.stringify(w.counts)}`);
    assert.equal(w.formats['model.layers.0.mlp.down_proj.weight'], 'float32');
    assert.equal(w.formats['model.embed_tokens.weight'], file === 'q5_1' ? 'float32' : fmt);
    const bytes = statSync(path.join(bundle.dir, EXTERNAL_DATA_FILE)).size;
    t.diagnostic(`${file}: weights ${w.bytes} B resident (float32 ${w.float32Bytes} B), bundle data ${bytes} B vs ${f32Bytes} B for F32`);
    assert.ok(w.bytes < w.float32Bytes);
    const done = await greedy(src, { maxTokens: 8 });
    assert.equal(done.tokens.length, 8);
  }
});

test('a Qwen3 GGUF with the real tokenizer equals the same weights imported from Hugging Face', async () => {
  const hfDir = path.join(tmp, 'qwen3-hf');
  await writeSyntheticCheckpoint(hfDir, { family: 'qwen3', tied: true, hidden: 16, heads: 2, kvHeads: 1, headDim: 8, inter: 32, layers: 2 });
  const hf = await importHuggingFace(hfDir);
  const ggufFile = path.join(tmp, 'qwen3.gguf');
  writeModelGguf(ggufFile, hf.manifest.config, qwen3TokenizerMetadata(hf.manifest.config.vocabSize), (name) => hf.weights.get(name)!.data);
  const messages = [{ role: 'user' as const, content: 'Hello, wörld! 12345 — ünïcode 😀\n\n  code()' }];
  const a = await greedy(hfDir, { prompt: undefined, messages, maxTokens: 12 });
  const b = await greedy(ggufFile, { prompt: undefined, messages, maxTokens: 12 });
  assert.ok(a.promptTokens.length > 20);
  assert.deepEqual(b.promptTokens, a.promptTokens);
  assert.deepEqual(b.tokens, a.tokens);
});

test('an unsupported GGUF architecture is refused naming it', async () => {
  const file = path.join(tmp, 'gemma.gguf');
  writeGguf(file, { ...configMetadata(qwen3_0_6bConfig(1)), 'general.architecture': { str: 'gemma' } }, []);
  await assert.rejects(resolveModel(file, cacheDir), (e: unknown) => {
    assert.ok(e instanceof ModelLoadError);
    assert.match(e.message, /unsupported GGUF architecture "gemma"; supported: llama, qwen2, qwen3/);
    return true;
  });
});

test('a model whose weights and KV cache at the max context do not fit is refused before loading', async () => {
  await assert.rejects(Engine.load(STORIES_GGUF, { cacheDir, availableMemoryBytes: 1_000_000 }), (e: unknown) => {
    assert.ok(e instanceof ModelLoadError);
    assert.match(e.message, /needs about 0\.00 GiB \(weights 0\.00 GiB \+ KV cache 0\.00 GiB at max context 2048\) but only 0\.00 GiB of memory is available; lower the max context/);
    return true;
  });
  const engine = await Engine.load(STORIES_GGUF, { cacheDir, availableMemoryBytes: 4_000_000 });
  assert.equal(engine.info.weights.residentBytes, 1_171_200);
  await engine.dispose();
});

test('--quantize q4/q8 imports a float checkpoint as round-to-nearest MatMulNBits blocks', async () => {
  const float = await greedy(STORIES_BIN, { maxTokens: 24 });
  for (const [quantize, minAgree] of [['q8', 24], ['q4', 1]] as const) {
    const engine = await Engine.load(STORIES_BIN, { cacheDir, quantize });
    const w = engine.info.weights;
    // q, k, v, o, gate, up per layer (down's K = 172 is no multiple of 32) + the (tied) embedding.
    assert.equal(w.formats, `float32 ×16, ${quantize} (rtn) ×31`);
    assert.ok(w.residentBytes < 1_171_200 && w.bundleBytes > w.residentBytes);
    let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
    for await (const ev of engine.generate({ prompt: 'Once upon a time', sampler: GREEDY, ignoreEos: true, maxTokens: 24 })) if (ev.type === 'done') done = ev;
    await engine.dispose();
    const agree = done!.tokens.findIndex((t, i) => t !== float.tokens[i]);
    assert.ok(agree === -1 || agree >= minAgree, `${quantize}: agrees with float32 for ${agree} tokens`);
  }
});
