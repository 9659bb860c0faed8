/**
 * The native/ addon (ONNX Runtime's C API, IoBinding) against the JS-API backend on the real
 * stories260K model: it is built and loads (the test command builds it), greedy logits match
 * through several KV growths, `--ep cuda` reaches the CUDA provider-append call and falls back,
 * the process holds one ONNX Runtime, the weights file is read into memory on the CPU (not mapped
 * by ONNX Runtime) with the same logits, and bad input is a typed error.
 */
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { InvalidOptionError, ModelLoadError, SessionRunError } from '../../main/engine/errors.ts';
import type { DecoderBackend } from '../../main/engine/model/backend.ts';
import { resolveModel, type LoadedBundle } from '../../main/engine/model/bundle.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { NativeDecoderSession, weightsFileOf } from '../../main/engine/model/native-session.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';
import { argmax } from '../helpers/onnx-runner.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { EXTERNAL_DATA_FILE } from '../../main/engine/model/decoder-graph.ts';

const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-native-test-'));
let bundle: LoadedBundle;

before(async () => {
  bundle = await resolveModel(STORIES_BIN, cacheDir);
});
after(() => rmSync(cacheDir, { recursive: true, force: true }));

/** Greedy decoding of `steps` tokens after `prompt`, one run per token; logits of every step. */
async function greedy(backend: DecoderBackend, prompt: number[], steps: number): Promise<{ tokens: number[]; logits: Float32Array[]; kv: KvCache }> {
  const c = bundle.manifest.config;
  const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: c.trainedContext, hostBuffers: backend.kvOnHost });
  const rope = new RopeCache(c.rope, c.trainedContext);
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  let feed = prompt;
  for (let s = 0; s < steps; s++) {
    const P = kv.length;
    rope.ensure(P + feed.length);
    kv.ensure(P + feed.length);
    const out = await backend.run(feed, rope.tables, kv);
    kv.commit(feed.length);
    logits.push(out.slice());
    feed = [argmax(out)];
    tokens.push(feed[0]);
  }
  return { tokens, logits, kv };
}

test('the addon is built and loads the ONNX Runtime of onnxruntime-node', () => {
  const status = loadNativeAddon();
  assert.ok(status.available, status.available ? '' : status.reason);
  const pkg = createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string };
  assert.equal(status.runtimeVersion, pkg.version);
});

test('greedy decoding: native logits equal the JS backend through the KV growths to capacity 128', async () => {
  const c = bundle.manifest.config;
  const js = await DecoderSession.create(bundle.modelPath, c);
  const native = await NativeDecoderSession.create(bundle.modelPath, c);
  try {
    // nodesOnCpu: unknown until the first (profiled) run.
    assert.deepEqual(native.info, { backend: 'native', executionProvider: 'cpu', fallbackReason: null, nodesOnCpu: null });
    const prompt = [1, 403, 407, 261, 378]; // BOS + a prefill chunk of 5
    const a = await greedy(js, prompt, 62);
    const b = await greedy(native, prompt, 62);
    assert.deepEqual(b.tokens, a.tokens);
    // Both backends' profiles count the same CPU session: every compute node on the CPU.
    assert.ok(typeof js.info.nodesOnCpu === 'number' && js.info.nodesOnCpu > 0, String(js.info.nodesOnCpu));
    assert.equal(native.info.nodesOnCpu, js.info.nodesOnCpu);
    assert.equal(b.kv.stats.growths, 5, 'capacity 0 → 8 → 16 → 32 → 64 → 128 was not taken');
    for (let s = 0; s < a.logits.length; s++) {
      let worst = 0;
      for (let i = 0; i < a.logits[s].length; i++) worst = Math.max(worst, Math.abs(a.logits[s][i] - b.logits[s][i]));
      assert.ok(worst <= 1e-5, `step ${s}: logits differ by ${worst}`);
    }
  } finally {
    await js.dispose();
    await native.dispose();
  }
});

test('--ep cuda reaches the CUDA provider-append call and, without its libraries, runs on the CPU with a note', async () => {
  const ortDir = path.dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'));
  const libDir = path.join(ortDir, 'bin', 'napi-v6', process.platform, process.arch);
  const hasCuda = readdirSync(libDir).some((f) => f.startsWith('libonnxruntime_providers_cuda'));
  const native = await NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config, 'cuda');
  try {
    if (hasCuda) {
      assert.equal(native.info.executionProvider, 'cuda', String(native.info.fallbackReason));
    } else {
      assert.equal(native.info.executionProvider, 'cpu');
      assert.match(String(native.info.fallbackReason), /^CUDA execution provider could not be loaded \(SessionOptionsAppendExecutionProvider_CUDA_V2: .+\); using CPU$/);
    }
    const { tokens } = await greedy(native, [1, 403], 3);
    assert.equal(tokens.length, 3);
  } finally {
    await native.dispose();
  }
});

test('one ONNX Runtime per process: both backends share onnxruntime-node\'s library', { skip: process.platform !== 'linux' && 'reads /proc/self/maps' }, async () => {
  const js = await DecoderSession.create(bundle.modelPath, bundle.manifest.config);
  const native = await NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config);
  const maps = readFileSync('/proc/self/maps', 'utf8');
  const libs = new Set(maps.split('\n').map((l) => l.split(/\s+/)[5]).filter((p) => p && /libonnxruntime\.so/.test(p)));
  await js.dispose();
  await native.dispose();
  assert.equal(libs.size, 1, [...libs].join(', '));
});

test('the weights file is read into memory on the CPU: ONNX Runtime maps none of it and the logits equal those over its own mapping; an unreadable one is a typed error naming it', { skip: process.platform !== 'linux' && 'reads /proc/self/maps (and the addon reads the file into memory on Linux only)' }, async () => {
  const status = loadNativeAddon();
  assert.ok(status.available, status.available ? '' : status.reason);
  const c = bundle.manifest.config;
  const weights = weightsFileOf(bundle.modelPath);
  assert.ok(weights !== undefined && existsSync(weights), 'the bundle has no external-data file');
  const open = (weightsFile?: string) => {
    const logits = new Float32Array(c.vocabSize);
    const decoder = new status.addon.NativeDecoder(bundle.modelPath, {
      executionProvider: 'cpu', numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, vocabSize: c.vocabSize,
      rotaryHalf: c.rope.rotaryDim / 2, logits, intraOpThreads: 2, ...(weightsFile ? { weightsFile } : {}),
    });
    const rope = new RopeCache(c.rope, 16);
    rope.ensure(16);
    decoder.resize(16, 0);
    decoder.setRope(rope.tables.cos, rope.tables.sin, rope.tables.rows);
    return { decoder, logits };
  };
  const mappedLines = () => readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.endsWith(weights)).length;
  const inMemory = open(weights);
  assert.equal(inMemory.decoder.weightsInMemory, statSync(weights).size);
  assert.equal(mappedLines(), 0, 'ONNX Runtime mapped the weights file although its contents were handed over');
  const mapped = open();
  try {
    assert.equal(mapped.decoder.weightsInMemory, 0);
    assert.ok(mappedLines() > 0, 'without weightsFile ONNX Runtime maps the file (the check above would mean nothing otherwise)');
    // A prompt, then two decode steps: the same weights give the same logits, bit for bit.
    for (const [ids, past] of [[[1, 403, 407, 261], 0], [[378], 4], [[261], 5]] as const) {
      await inMemory.decoder.run(Int32Array.from(ids), past);
      await mapped.decoder.run(Int32Array.from(ids), past);
      assert.deepEqual(inMemory.logits, mapped.logits, `logits differ after position ${past}`);
    }
  } finally {
    inMemory.decoder.dispose();
    mapped.decoder.dispose();
  }
  // A weights file that cannot be opened: the load fails naming it (ORT_LOAD), and a bundle whose
  // weights file is cut short is ModelLoadError, not a crash.
  const missing = path.join(os.tmpdir(), 'ropewalk-no-such-weights.data');
  assert.throws(() => open(missing), (e: Error & { code?: string }) => {
    assert.equal(e.code, 'ORT_LOAD');
    assert.ok(e.message.includes(`cannot open the weights file '${missing}'`), e.message);
    return true;
  });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-native-short-'));
  try {
    copyFileSync(bundle.modelPath, path.join(dir, 'model.onnx'));
    writeFileSync(path.join(dir, path.basename(weights)), readFileSync(weights).subarray(0, 4096));
    await assert.rejects(NativeDecoderSession.create(path.join(dir, 'model.onnx'), c, 'cpu', 'float32', 0, { weightsInMemory: true }), (e: unknown) => {
      assert.ok(e instanceof ModelLoadError, String(e));
      assert.match(e.message, /ONNX Runtime cannot load the model/);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the engine reads a quantized bundle\'s weights into memory and leaves a float one\'s to ONNX Runtime\'s mapping (whose MatMuls pack their own copy)', { skip: process.platform !== 'linux' && 'the addon reads the file into memory on Linux only' }, async () => {
  const q4 = await Engine.load(path.join(GGUF_DIR, 'stories260K-q4_0.gguf'), { cacheDir });
  const float = await Engine.load(STORIES_BIN, { cacheDir });
  try {
    const inMemory = (e: Engine) => (e['backend'] as NativeDecoderSession).weightsInMemory;
    assert.equal(inMemory(q4), statSync(path.join(q4.info.bundleDir, EXTERNAL_DATA_FILE)).size);
    assert.equal(inMemory(float), 0);
  } finally {
    await q4.dispose();
    await float.dispose();
  }
});

test('bad input: an unreadable model is ModelLoadError quoting the file, so is an unknown KV dtype; a step past the capacity is SessionRunError, one past the RoPE cache InvalidOptionError', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-native-bad-'));
  try {
    const bad = path.join(dir, 'model.onnx');
    writeFileSync(bad, 'not an onnx model');
    await assert.rejects(NativeDecoderSession.create(bad, bundle.manifest.config), (e: unknown) => {
      assert.ok(e instanceof ModelLoadError);
      assert.match(e.message, /CreateSession/);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // A KV dtype the addon does not know: ModelLoadError quoting it (the TypeScript type forbids it; a caller's cast does not).
  await assert.rejects(NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config, 'cpu', 'bfloat16' as 'float16'), (e: unknown) => {
    assert.ok(e instanceof ModelLoadError);
    assert.match(e.message, /kvDtype must be 'float32' or 'float16', got 'bfloat16'/);
    return true;
  });
  const native = await NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config);
  try {
    const c = bundle.manifest.config;
    const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: 8, hostBuffers: false });
    const half = c.rope.rotaryDim / 2;
    const tables = (rows: number) => ({ cos: new Float32Array(rows * half).fill(1), sin: new Float32Array(rows * half), rows });
    // Two tokens with a capacity of 0: the KvCache was not ensured, so the addon refuses.
    await assert.rejects(native.run([1, 2], tables(2), kv), (e: unknown) => {
      assert.ok(e instanceof SessionRunError);
      assert.match(e.message, /2 tokens at position 0 do not fit the KV cache capacity 0/);
      return true;
    });
    // A RoPE cache shorter than the run (2 positions, 1 row) is refused before anything is bound.
    kv.ensure(2);
    await assert.rejects(native.run([1, 2], tables(1), kv), (e: unknown) => {
      assert.ok(e instanceof InvalidOptionError);
      assert.match(e.message, /RoPE cache: it holds 1 positions, the run ends at 2/);
      return true;
    });
    // The session is still usable afterwards.
    await native.run([1], tables(1), kv);
  } finally {
    await native.dispose();
  }
  assert.ok(existsSync(bundle.modelPath));
});
