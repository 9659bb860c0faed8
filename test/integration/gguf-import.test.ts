/**
 * GGUF import end to end (real ONNX Runtime): stories260K.gguf (F32) reproduces the llama2.c
 * checkpoint's greedy tokens; the quantized copies load with their linear weights kept as
 * MatMulNBits blocks (formats in the manifest); a Qwen3-shaped GGUF with the real Qwen3 tokenizer
 * gives the same prompt ids, chat prompt and greedy tokens as the same weights imported from a
 * Hugging Face folder (half RoPE layout, q/k norms, tied embedding); a Llama 3.1-style GGUF
 * (q/k rows permuted as llama.cpp's converter does, llama3 RoPE scaling as `rope_freqs.weight`)
 * gives the logits of the same weights imported from Hugging Face with `rope_scaling` llama3.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { detectSource, resolveModel, writeBundle } from '../../main/engine/model/bundle.ts';
import { EXTERNAL_DATA_FILE } from '../../main/engine/model/decoder-graph.ts';
import { expectedWeights, importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { ggufTensorName, importGguf, openGgufModel } from '../../main/engine/model/gguf/import-gguf.ts';
import { openedFromMemory, weightValues, type ModelConfig } from '../../main/engine/model/manifest.ts';
import { maxAbsDiff, OnnxRunner } from '../helpers/onnx-runner.ts';
import { writeGguf, type GgufTensorSpec } from '../helpers/gguf-writer.ts';
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
    // classifier, + the embedding, gathered from its blocks (Q5_1's with their offsets added).
    assert.equal(w.counts[fmt], 5 * 6 + 1 + 1, `${file}: ${JSON.stringify(w.counts)}`);
    assert.equal(w.formats['model.layers.0.mlp.down_proj.weight'], 'float32');
    assert.equal(w.formats['model.embed_tokens.weight'], fmt);
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

test('a GGUF file is known by its magic without the .gguf extension (also alone in a folder); one cut inside its header is truncation', async () => {
  const renamed = path.join(tmp, 'stories-no-extension');
  copyFileSync(STORIES_GGUF, renamed);
  assert.deepEqual(await detectSource(renamed), { kind: 'gguf', path: renamed });
  const folder = path.join(tmp, 'gguf-folder');
  mkdirSync(folder);
  copyFileSync(STORIES_GGUF, path.join(folder, 'model.gguf'));
  assert.deepEqual(await detectSource(folder), { kind: 'gguf', path: path.join(folder, 'model.gguf') });
  const short = path.join(tmp, 'short.gguf');
  writeFileSync(short, readFileSync(STORIES_GGUF).subarray(0, 100));
  await assert.rejects(resolveModel(short, cacheDir), (e: unknown) => {
    assert.ok(e instanceof ModelLoadError);
    assert.match(e.message, /^the 100-byte file ends inside its GGUF header, in the metadata \(/);
    assert.match(e.message, /download it again\.$/);
    return true;
  });
});

/** The error `resolveModel` gives for `bytes` written as a .gguf file (one line, advice included), less the file's path it names. */
async function ggufRefusal(name: string, bytes: Uint8Array): Promise<string> {
  const file = path.join(tmp, name);
  writeFileSync(file, bytes);
  let message = '';
  await assert.rejects(resolveModel(file, cacheDir), (e: unknown) => {
    assert.ok(e instanceof ModelLoadError, String(e));
    message = e.message;
    return true;
  });
  assert.ok(!message.includes('\n'), message);
  assert.ok(message.includes(` (${file})`), `names the file: ${message}`);
  return message.replace(` (${file})`, '');
}

// The parser reads zeros past a short file's end, so where it says the header ends is made up:
// this once said "ends at byte 5984" for a cut at 1,000 bytes and "9984" for one at 7,000 (the
// q4_0 file's metadata ends at 11,439, its tensor list at 14,244, its tensor data starts at 14,272).
test('a GGUF cut inside its header says where (metadata, tensor list, before the data) and quotes only real byte numbers', async () => {
  const q4 = readFileSync(path.join(GGUF_DIR, 'stories260K-q4_0.gguf'));
  const incomplete = /: it is truncated[^.]*\. The file is incomplete or damaged: download it again\.$/;
  for (const cut of [1000, 7000, 11_438]) {
    const m = await ggufRefusal(`cut-${cut}.gguf`, q4.subarray(0, cut));
    assert.match(m, new RegExp(`^the ${cut}-byte file ends inside its GGUF header, in the metadata \\(20 entries, then 48 tensors\\)`), m);
    assert.match(m, incomplete, m);
    assert.deepEqual(m.match(/\d{4,}/g), [String(cut)], `no byte number but the file's size: ${m}`);
  }
  const inList = await ggufRefusal('cut-12000.gguf', q4.subarray(0, 12_000));
  assert.match(inList, /^the 12000-byte file ends inside its GGUF header, in the list of its 48 tensors \(after the metadata, which ends at byte 11439\)/);
  assert.match(inList, incomplete);
  const beforeData = await ggufRefusal('cut-14250.gguf', q4.subarray(0, 14_250));
  assert.match(beforeData, /^the 14250-byte file ends after its GGUF header, before its tensor data, which starts at byte 14272: it is truncated\./);
  assert.match(beforeData, incomplete);
});

test('a GGUF shorter than the 24-byte fixed header (magic, version, two counts) is truncated, not "version 0"', async () => {
  const q4 = readFileSync(path.join(GGUF_DIR, 'stories260K-q4_0.gguf'));
  for (const cut of [0, 4, 23]) {
    const m = await ggufRefusal(`cut-${cut}.gguf`, q4.subarray(0, cut));
    assert.match(m, new RegExp(`^the file is ${cut} bytes, shorter than the 24-byte fixed GGUF header \\(magic, version, tensor count, metadata count\\): it is truncated\\. `), m);
    assert.match(m, /The file is incomplete or damaged: download it again\.$/, m);
  }
  // Not GGUF at all is still said so (a short file whose first bytes are not the magic).
  assert.match(await ggufRefusal('short-text.gguf', new TextEncoder().encode('hello')), /not starting with GGUF magic number/);
});

test('one byte flipped in a GGUF header: "the GGUF header is damaged" naming the implausible count or length, and advice to download it again', async () => {
  const q4 = readFileSync(path.join(GGUF_DIR, 'stories260K-q4_0.gguf'));
  const flipped = (at: number) => {
    const b = new Uint8Array(q4);
    b[at] ^= 0xff;
    return b;
  };
  const damaged = /The file is incomplete or damaged: download it again\.$/;
  // Byte 8: the tensor count, 48 → 207; the parser then reads tensor data as tensor infos.
  const count = await ggufRefusal('flip-8.gguf', flipped(8));
  assert.match(count, /^the GGUF header is damaged: a key or tensor name claims to be 12494444469795422208 bytes long, more than the whole 370752-byte file\. /, count);
  assert.match(count, damaged);
  // Byte 24: the first key's length, 20 → 235, so the key swallows its value's type.
  const key = await ggufRefusal('flip-24.gguf', flipped(24));
  assert.match(key, /^the GGUF header is damaged: a metadata value has type 1006632960, not a GGUF type \(0 to 12\)\. /, key);
  assert.match(key, damaged);
  // Byte 23: the top byte of the metadata count, 20 → 2^64 − 2^56 + 20, far more entries than the file could hold.
  const kv = await ggufRefusal('flip-23.gguf', flipped(23));
  assert.match(kv, /^the GGUF header is damaged: it declares 18374686479671623700 metadata entries, more than a 370752-byte file can hold\. /, kv);
  assert.match(kv, damaged);
  for (const m of [count, key, kv]) assert.doesNotMatch(m, /Choose a complete model|exceeds maximum allowed/, m);
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
    assert.match(e.message, /needs about 0\.00 GiB \(weights 0\.00 GiB \+ KV cache 0\.00 GiB at max context 2048\) but only 0\.00 GiB of memory is available; its weights alone do not fit; open it with 4-bit weights/);
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

test('quantize on an already-quantized GGUF (or a bundle) is ignored with a note naming its types (the bundle as stored); on the F32 GGUF it applies', async () => {
  for (const [file, quantize, types] of [['q4_0', 'q4', 'Q4_0'], ['q8_0', 'q4', 'Q8_0'], ['q5_1', 'q8', 'Q5_1']] as const) {
    const src = path.join(GGUF_DIR, `stories260K-${file}.gguf`);
    const asStored = await resolveModel(src, cacheDir);
    assert.equal(asStored.note, null);
    const note = `${quantize} quantization ignored: stories260K-${file}.gguf is already quantized (${types}); its blocks are used as stored`;
    // Twice: the first start of the request, then the one its fingerprint record serves.
    for (let start = 0; start < 2; start++) {
      const asked = await resolveModel(src, cacheDir, undefined, { quantize });
      assert.equal(asked.dir, asStored.dir, `${file} --quantize ${quantize}: the bundle as stored, not a re-quantized copy`);
      assert.equal(asked.note, note);
    }
  }
  // A bundle folder was imported already: the same rule, the same kind of note.
  const bundle = await resolveModel(STORIES_GGUF, cacheDir);
  const reopened = await resolveModel(bundle.dir, cacheDir, undefined, { quantize: 'q8' });
  assert.equal(reopened.dir, bundle.dir);
  assert.equal(reopened.note, `q8 quantization ignored: ${path.basename(bundle.dir)} is a Ropewalk bundle, imported already; its weights are used as stored`);
  const engine = await Engine.load(path.join(GGUF_DIR, 'stories260K-q4_0.gguf'), { cacheDir, quantize: 'q8' });
  assert.equal(engine.info.fallbackReason, 'q8 quantization ignored: stories260K-q4_0.gguf is already quantized (Q4_0); its blocks are used as stored');
  await engine.dispose();
  const float = await Engine.load(STORIES_GGUF, { cacheDir, quantize: 'q4' });
  assert.equal(float.info.fallbackReason, null);
  // q, k, v, o, gate, up per layer (down's K = 172 is no multiple of 32), the embedding and the untied classifier.
  assert.equal(float.info.weights.formats, 'float32 ×16, q4 (rtn) ×32');
  await float.dispose();
});

/**
 * Llama 3.1's `apply_scaling` (Meta's reference code; transformers `_compute_llama3_parameters`)
 * as per-pair divisors of the plain inverse frequencies θ^(−2i/R): 1 for wavelengths under
 * orig/high, `factor` over orig/low, and between them 1 / ((1 − s)/factor + s) with
 * s = (orig/wavelength − low)/(high − low). llama.cpp's converter writes these as rope_freqs.weight.
 */
function llama3Factors(theta: number, R: number, factor: number, low: number, high: number, orig: number): Float32Array {
  return Float32Array.from({ length: R / 2 }, (_, i) => {
    const wavelength = 2 * Math.PI * theta ** ((2 * i) / R);
    if (wavelength < orig / high) return 1;
    if (wavelength > orig / low) return factor;
    const s = (orig / wavelength - low) / (high - low);
    return 1 / ((1 - s) / factor + s);
  });
}

/** Rows of a Hugging Face q/k weight [H·hd, in] reordered per head from half-split to interleaved pairs (llama.cpp's converter `permute`). */
function interleaveHeads(w: Float32Array, rows: number, cols: number, headDim: number): Float32Array {
  const out = new Float32Array(w.length);
  for (let r = 0; r < rows; r++) {
    const head = Math.floor(r / headDim);
    const d = r % headDim;
    const from = head * headDim + (d % 2) * (headDim / 2) + (d >> 1);
    out.set(w.subarray(from * cols, (from + 1) * cols), r * cols);
  }
  return out;
}

test('a Llama 3.1-style GGUF (rope_freqs.weight) gives the logits of the Hugging Face import with llama3 rope scaling', async (t) => {
  const hfDir = path.join(tmp, 'llama31-hf');
  const scaling = { factor: 8, low: 1, high: 4, orig: 256 };
  await writeSyntheticCheckpoint(hfDir, {
    family: 'llama', tied: true, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, inter: 64, layers: 2,
    ropeScaling: { rope_type: 'llama3', factor: scaling.factor, low_freq_factor: scaling.low, high_freq_factor: scaling.high, original_max_position_embeddings: scaling.orig },
  });
  const hf = await importHuggingFace(hfDir);
  const config: ModelConfig = hf.manifest.config;
  const { theta, rotaryDim: R } = config.rope;
  const factors = llama3Factors(theta, R, scaling.factor, scaling.low, scaling.high, scaling.orig);
  assert.ok(factors.some((f) => f === 1) && factors.some((f) => f === 8) && factors.some((f) => f > 1 && f < 8), `all three bands: ${factors}`);
  const tensors: GgufTensorSpec[] = [];
  for (const [name, shape] of expectedWeights(config)) {
    const values = await weightValues(hf.weights.get(name)!);
    const qk = /self_attn\.[qk]_proj\.weight$/.test(name);
    tensors.push({ name: ggufTensorName(name), shape, data: qk ? interleaveHeads(values, shape[0], shape[1], config.headDim) : values, type: 'F32' });
  }
  const metadata = { ...configMetadata(config), ...qwen3TokenizerMetadata(config.vocabSize) };
  const file = path.join(tmp, 'llama31.gguf');
  writeGguf(file, metadata, [...tensors, { name: 'rope_freqs.weight', shape: [R / 2], data: factors, type: 'F32' }]);
  const withoutFactors = path.join(tmp, 'llama31-no-rope-freqs.gguf');
  writeGguf(withoutFactors, metadata, tensors);

  const gguf = await importGguf(file);
  assert.deepEqual(gguf.manifest.config.rope.frequencyFactors, [...factors]);
  assert.equal(gguf.manifest.config.rope.layout, 'interleaved');
  const plain = await importGguf(withoutFactors);
  const maxContext = 128;
  const runners = [
    await OnnxRunner.create(config, hf.weights, maxContext),
    await OnnxRunner.create(gguf.manifest.config, gguf.weights, maxContext),
    await OnnxRunner.create(plain.manifest.config, plain.weights, maxContext),
  ];
  try {
    // 60 positions: far enough that the divided frequencies turn by a different angle.
    const prompt = Array.from({ length: 48 }, (_, i) => (i * 7919 + 13) % 151_000);
    let worst = 0;
    let unscaled = 0;
    for (const step of [prompt.slice(0, 30), prompt.slice(30), ...Array.from({ length: 12 }, (_, i) => [(i * 131 + 7) % 151_000])]) {
      const [a, b, c] = await Promise.all(runners.map((r) => r.forward(step)));
      const { diff, scale } = maxAbsDiff(b, a);
      // The same tolerance as graph = reference (graph-hf.test.ts): float32 graph, float64 RoPE tables.
      assert.ok(diff <= 1e-5 * Math.max(1, scale), `max |gguf − hf| = ${diff}, scale ${scale}`);
      worst = Math.max(worst, diff / Math.max(1, scale));
      unscaled = Math.max(unscaled, maxAbsDiff(c, a).diff / Math.max(1, scale));
    }
    t.diagnostic(`max |gguf − hf| / max(1, |logit|): ${worst.toExponential(2)}; without rope_freqs.weight: ${unscaled.toExponential(2)}`);
    assert.ok(unscaled > 100 * Math.max(worst, 1e-7), `without rope_freqs the logits differ (${unscaled} vs ${worst})`);
  } finally {
    for (const r of runners) await r.dispose();
  }
});

test('GGUF float tensors are read in chunks while the bundle is written: every type in chunks that straddle blocks equals the whole read, and the streamed bundle equals the in-memory one byte for byte', async () => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const t of g.tensors.values()) {
      const whole = await g.readFloat32(t);
      for (const elements of [37, 256, 1000, whole.length]) {
        const parts: number[] = [];
        for await (const chunk of g.float32Chunks(t, elements)) parts.push(...chunk);
        assert.deepEqual(Float32Array.from(parts), whole, `${t.name} in chunks of ${elements}`);
      }
    }
  } finally {
    await g.close();
  }
  // F32 (every tensor float, the embedding read when written) and Q5_1 (its embedding stays in
  // its blocks, offsets kept: gathered from them, not from a float32 copy).
  for (const file of [STORIES_GGUF, path.join(GGUF_DIR, 'stories260K-q5_1.gguf')]) {
    const opened = await openGgufModel(file);
    const streamedDir = path.join(tmp, `streamed-${path.basename(file)}`);
    try {
      const embed = opened.weights.get('model.embed_tokens.weight')!;
      if (file === STORIES_GGUF) assert.ok(!('data' in embed), 'the float embedding is read when written, not at open');
      else assert.ok('blockOffsets' in embed && embed.blockOffsets instanceof Float32Array, 'the Q5_1 embedding is its blocks with their offsets');
      await writeBundle(opened, streamedDir);
    } finally {
      await opened.close();
    }
    const inMemoryDir = path.join(tmp, `in-memory-${path.basename(file)}`);
    await writeBundle(openedFromMemory(await importGguf(file)), inMemoryDir);
    for (const f of [EXTERNAL_DATA_FILE, 'model.onnx']) {
      assert.ok(readFileSync(path.join(streamedDir, f)).equals(readFileSync(path.join(inMemoryDir, f))), `${path.basename(file)}: ${f} differs`);
    }
  }
});
