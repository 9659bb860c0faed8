/**
 * Streaming import (Hugging Face folder → bundle, one tensor at a time): progress reports the
 * weight bytes written, rising to the total, with an ETA; a cancelled import leaves nothing in
 * the cache (no bundle, no temp folder) and a later start imports cleanly; the streamed bundle's
 * data file holds each weight at the offset its initializer names; tokenizer.json, read and
 * checked after the weights, is copied byte for byte, and one that fails its check leaves nothing;
 * `--quantize` streams too (row chunks quantized as written) and gives the bytes the in-memory
 * quantization gives.
 */
import assert from 'node:assert/strict';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import onnxProto from 'onnx-proto';
import { EngineHost } from '../../main/engine-host/host.ts';
import { EngineError, ModelLoadError } from '../../main/engine/errors.ts';
import { resolveModel, writeBundle, type ImportProgressEvent } from '../../main/engine/model/bundle.ts';
import { isLinearWeight, quantizeRtn } from '../../main/engine/model/gguf/quantized-weights.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { openedFromMemory, type BundleWeights } from '../../main/engine/model/manifest.ts';
import { readSafetensors } from '../../main/engine/model/safetensors.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

let root: string;
let model: string;

before(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-import-stream-'));
  model = path.join(root, 'qwen3');
  await writeSyntheticCheckpoint(model, { family: 'qwen3', dtype: 'BF16', sharded: true, seed: 5 });
});
after(() => rm(root, { recursive: true, force: true }));

test('cancelling an import mid-write leaves no bundle and no temp folder; the next start imports', async () => {
  const cacheDir = path.join(root, 'cancel-cache');
  const ac = new AbortController();
  const seen: ImportProgressEvent[] = [];
  const onProgress = (p: ImportProgressEvent) => {
    seen.push(p);
    if (p.phase === 'write' && (p.bytes ?? 0) > 0) ac.abort();
  };
  await assert.rejects(resolveModel(model, cacheDir, onProgress, { signal: ac.signal }), (e: unknown) => e instanceof EngineError && e.code === 'CANCELLED');
  const written = seen.filter((p) => p.phase === 'write' && p.bytes !== undefined);
  assert.ok(written.length >= 1 && written.at(-1)!.bytes! < written.at(-1)!.totalBytes!, 'cancelled part-way through the weights');
  assert.deepEqual(await readdir(cacheDir).catch(() => []), []);
  const b = await resolveModel(model, cacheDir);
  assert.equal(b.manifest.config.architecture, 'qwen3');
});

test('through the engine host (worker thread): a load cancelled mid-import rejects CANCELLED and leaves nothing', async () => {
  const cacheDir = path.join(root, 'host-cache');
  const host = new EngineHost();
  const ac = new AbortController();
  try {
    const load = host.load(model, { cacheDir }, (phase, _fraction, detail) => {
      if (phase === 'write' && (detail.bytes ?? 0) > 0) ac.abort();
    }, ac.signal);
    await assert.rejects(load, (e: unknown) => e instanceof EngineError && e.code === 'CANCELLED');
    assert.deepEqual(await readdir(cacheDir).catch(() => []), []);
  } finally {
    await host.dispose();
  }
});

test('progress: bytes rise to the total with an ETA; the data file holds each weight at its offset', async () => {
  const cacheDir = path.join(root, 'progress-cache');
  const writes: ImportProgressEvent[] = [];
  const b = await resolveModel(model, cacheDir, (p) => {
    if (p.phase === 'write' && p.bytes !== undefined) writes.push(p);
  });
  assert.ok(writes.length > 10, `one event per weight, got ${writes.length}`);
  for (let i = 1; i < writes.length; i++) assert.ok(writes[i].bytes! > writes[i - 1].bytes!);
  const last = writes.at(-1)!;
  assert.deepEqual([last.bytes, last.fraction], [last.totalBytes, 1]);
  assert.ok(writes.every((p) => Number.isFinite(p.etaSeconds) && p.etaSeconds! >= 0));

  // The embedding, read back from where its initializer says, equals the source's values.
  const proto = onnxProto.onnx.ModelProto.decode(await readFile(b.modelPath));
  const init = proto.graph!.initializer!.find((t) => t.name === 'model.embed_tokens.weight')!;
  const where = Object.fromEntries(init.externalData!.map((e) => [e.key, e.value]));
  const data = await readFile(path.join(b.dir, where.location!));
  const stored = new Float32Array(data.buffer.slice(data.byteOffset + Number(where.offset), data.byteOffset + Number(where.offset) + Number(where.length)));
  const source = (await readSafetensors(path.join(model, 'model-00001-of-00002.safetensors'))).get('model.embed_tokens.weight')!;
  assert.deepEqual(stored, source.data);
  // Weight bytes (the total) plus alignment padding is the data file.
  assert.ok(data.length >= last.totalBytes! && data.length < last.totalBytes! + 4096 * writes.length);
});

test('tokenizer.json is copied byte for byte; one failing its check after the weights leaves nothing in the cache', async () => {
  const b = await resolveModel(model, path.join(root, 'tokenizer-cache'));
  assert.deepEqual(await readFile(path.join(b.dir, 'tokenizer.json')), await readFile(path.join(model, 'tokenizer.json')));
  assert.deepEqual(b.manifest.specialTokens, { bos: 151643, eos: [151645, 151643] });

  const bad = path.join(root, 'bad-tokenizer');
  await cp(model, bad, { recursive: true });
  const json = JSON.parse(await readFile(path.join(bad, 'tokenizer.json'), 'utf8'));
  json.added_tokens.push({ id: 151669, content: '<|past the vocabulary|>', special: true });
  await writeFile(path.join(bad, 'tokenizer.json'), JSON.stringify(json));
  const cacheDir = path.join(root, 'bad-tokenizer-cache');
  await assert.rejects(resolveModel(bad, cacheDir), (e: unknown) =>
    e instanceof ModelLoadError && e.message.includes('token id 151669') && e.message.includes('vocab_size is 151669') && e.message.includes(path.join(bad, 'tokenizer.json')));
  assert.deepEqual(await readdir(cacheDir).catch(() => []), []);
});

test('--quantize q4/q8 streams: the bundle equals, byte for byte, the one written from in-memory round-to-nearest weights', async () => {
  for (const quantize of ['q4', 'q8'] as const) {
    const streamed = await resolveModel(model, path.join(root, `quantize-${quantize}`), undefined, { quantize });
    // The same import in memory: every float32 weight read whole, Linear weights and the
    // embedding quantized whole by quantizeRtn, then written.
    const m = await importHuggingFace(model);
    const weights: BundleWeights = new Map();
    for (const [name, t] of m.weights) {
      const quantized = isLinearWeight(name) || name === 'model.embed_tokens.weight';
      weights.set(name, (quantized ? quantizeRtn(t, quantize === 'q4' ? 4 : 8) : null) ?? t);
    }
    m.manifest.source = streamed.manifest.source;
    const inMemory = path.join(root, `quantize-${quantize}-in-memory`);
    await writeBundle(openedFromMemory({ ...m, weights }), inMemory);
    for (const file of ['model.onnx', 'model.onnx.data', 'manifest.json']) {
      assert.ok((await readFile(path.join(streamed.dir, file))).equals(await readFile(path.join(inMemory, file))), `${quantize}: ${file} differs`);
    }
    assert.equal(streamed.manifest.weights!.counts[`${quantize} (rtn)`], 2 * 7 + 2, `${quantize}: 7 Linear weights a layer, the embedding and lm_head`);
  }
});
