/**
 * The KV cache setting on the CPU (issue 23 item 3): `kvCacheDtype: 'float16'`, the default
 * (graph-target.ts `DEFAULT_KV_CACHE_DTYPE`), loads the CPU graph
 * with float16 KV under float32 activations (graph-target.ts `GraphTarget.kvDtype`: q/k/v cast to
 * float16 before GroupQueryAttention, its output cast back; the native kernels kept), and the KV
 * bytes per position, the load's memory estimate and its refusal follow it.
 * Oracle: the same model's float32-KV graph on the same backend, teacher-forced along its greedy
 * path for 64 steps after a prompt: top-1 agreement >= 95 %, and on float weights the
 * log-probabilities of the float32 top-8 within 2e-2 at every step (the bound graph-float16.test.ts
 * holds the whole float16 graph to; measured: stories260K 1.38e-2, the Qwen3 checkpoint 5.6e-5).
 * Quantized files compute llama.cpp's int8 activations, where a q/k/v or attention output rounded
 * to float16 moves some int8 roundings and those carry on (llama.cpp's own F16 cache does the same:
 * gguf-llamacpp.test.ts, where float16 KV is measured against llama.cpp's F16 cache): there the
 * mean over steps of that largest |Δ log p| stays within 0.15 (measured 8.6e-2 Q8_0, 9.1e-2 Q4_0;
 * single steps up to 0.27) and top-1 agrees at every step (64 / 64). The native backend's
 * float16 KV tensors give the JS backend's greedy tokens through growths, context shifts, prefix
 * reuse and a conversation switch.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { KV_FLOAT16_MODEL_FILE } from '../../main/engine/model/bundle.ts';
import { engineAgreement } from '../helpers/float16-agreement.ts';
import { assertSameScript, greedyAnswer, kvScript } from '../helpers/kv-script.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-kv16-'));
const cacheDir = path.join(root, 'cache');
after(() => rmSync(root, { recursive: true, force: true }));

const STEPS = 64;
const BOUND = 2e-2;
const INT8_MEAN_BOUND = 0.15;

/** int8: llama.cpp's int8 activations (a quantized file): the mean bound, not the per-step one. */
const MODELS: { name: string; int8?: true; source: () => Promise<string> }[] = [
  { name: 'stories260K', source: async () => STORIES_BIN },
  { name: 'GGUF Q8_0 (native MatMulQ8)', int8: true, source: async () => path.join(GGUF_DIR, 'stories260K-q8_0.gguf') },
  { name: 'GGUF Q4_0 (native MatMulQ8)', int8: true, source: async () => path.join(GGUF_DIR, 'stories260K-q4_0.gguf') },
  {
    name: 'synthetic Hugging Face Qwen3 (QK-norm, RotaryEmbedding)',
    source: async () => {
      const dir = path.join(root, 'qwen3');
      await writeSyntheticCheckpoint(dir, { seed: 5, family: 'qwen3', tied: true });
      return dir;
    },
  },
];

for (const m of MODELS) {
  test(`${m.name}: float16 KV on the CPU agrees with float32 KV (top-1 >= 95 % of 64 teacher-forced steps, top-8 log p within ${m.int8 ? `${INT8_MEAN_BOUND} on average` : `${BOUND} at every step`}) in half the KV bytes`, async (t) => {
    const source = await m.source();
    const f32 = await Engine.load(source, { cacheDir, maxContext: 128, kvCacheDtype: 'float32' });
    const f16 = await Engine.load(source, { cacheDir, maxContext: 128, kvCacheDtype: 'float16' });
    try {
      assert.equal(f16.info.backend, 'native', String(f16.sessionInfo.fallbackReason));
      assert.equal(f32.info.kvCacheDtype, 'float32');
      assert.equal(f16.info.kvCacheDtype, 'float16');
      assert.equal(f16.manifest.dtype, 'float32', 'activations stay float32');
      assert.equal(f16.info.bundleDir, f32.info.bundleDir, 'one bundle: the float16-KV graph beside model.onnx');
      const saved = JSON.parse(readFileSync(path.join(f16.info.bundleDir, 'manifest.json'), 'utf8'));
      assert.deepEqual(saved.kvGraphs, { float16: KV_FLOAT16_MODEL_FILE });
      assert.ok(existsSync(path.join(f16.info.bundleDir, KV_FLOAT16_MODEL_FILE)));
      assert.equal(f16.info.memory!.kvBytesPerPosition * 2, f32.info.memory!.kvBytesPerPosition, 'the estimate: half the KV bytes a position');
      const { agree, maxDiff, meanDiff } = await engineAgreement(f32, f16, f32.encodeRequest({ prompt: 'Once upon a time' }), STEPS);
      t.diagnostic(`${m.name}: top-1 ${(agree * 100).toFixed(1)} %, |Δ log p| over the float32 top-8: max ${maxDiff.toExponential(2)}, mean of the steps' max ${meanDiff.toExponential(2)}`);
      assert.ok(agree >= 0.95, `top-1 agreement ${agree}`);
      if (m.int8) assert.ok(meanDiff <= INT8_MEAN_BOUND, `mean |Δ log p| ${meanDiff}`);
      else assert.ok(maxDiff <= BOUND, `max |Δ log p| ${maxDiff}`);
      f32.reset();
      f16.reset();
      const [a, b] = [await greedyAnswer(f32, 'Once upon a time', 40), await greedyAnswer(f16, 'Once upon a time', 40)];
      assert.equal(b.stats.kv.capacity, a.stats.kv.capacity);
      assert.equal(b.stats.kv.bytes * 2, a.stats.kv.bytes, 'the KV tensors: half the bytes at the same capacity');
    } finally {
      await f16.dispose();
      await f32.dispose();
    }
  });
}

test('float16 KV on the CPU: the native backend gives the JS backend\'s greedy tokens through KV growths, context shifts, prefix reuse and a conversation switch', async (t) => {
  const opts = { cacheDir, kvCacheDtype: 'float16' as const, maxContext: 64 };
  const js = await Engine.load(STORIES_BIN, { ...opts, backend: 'js' });
  const native = await Engine.load(STORIES_BIN, { ...opts, backend: 'native' });
  try {
    assert.equal(native.info.backend, 'native', String(native.sessionInfo.fallbackReason));
    assert.equal(js.info.backend, 'js');
    assert.equal(js.info.kvCacheDtype, 'float16');
    const n = assertSameScript(await kvScript(js), await kvScript(native));
    t.diagnostic(`float16 KV: ${n} greedy tokens equal on both backends`);
  } finally {
    await native.dispose();
    await js.dispose();
  }
});

test('a max context whose float32 KV does not fit: the refusal offers float16 KV, which then loads', async () => {
  // stories260K at 512 positions: 5 layers × 4 KV heads × 8 × 2 (K, V) × 4 bytes = 1,280 bytes a
  // position in float32 (655,360 at 512), 640 in float16; weights ~1 MB. Memory for weights + 3/4 of the float32 KV.
  const probe = await Engine.load(STORIES_BIN, { cacheDir, maxContext: 512, kvCacheDtype: 'float32' });
  const facts = probe.info.memory!;
  await probe.dispose();
  const available = facts.weightBytes + 512 * (facts.kvBytesPerPosition * 0.75 + facts.ropeBytesPerPosition);
  await assert.rejects(
    Engine.load(STORIES_BIN, { cacheDir, maxContext: 512, availableMemoryBytes: available, kvCacheDtype: 'float32' }),
    (e: unknown) => e instanceof ModelLoadError && /set the KV cache to float16 \(half its bytes: KV cache setting; in the terminal --kv-cache float16\)/.test(e.message),
  );
  const half = await Engine.load(STORIES_BIN, { cacheDir, maxContext: 512, availableMemoryBytes: available, kvCacheDtype: 'float16' });
  try {
    assert.equal(half.info.kvCacheDtype, 'float16');
    assert.equal(half.info.memory!.kvBytesPerPosition, facts.kvBytesPerPosition / 2);
  } finally {
    await half.dispose();
  }
});

test('switching the KV cache dtype reloads from the same bundle (no import), and a bundle without the float16-KV graph says so and runs float32', async () => {
  const phases: string[] = [];
  const f16 = await Engine.load(STORIES_BIN, { cacheDir, maxContext: 64, kvCacheDtype: 'float16', onProgress: (p) => phases.push(p.phase) });
  const dir = f16.info.bundleDir;
  await f16.dispose();
  assert.ok(phases.includes('cached') && !phases.includes('write'), `phases ${phases.join(', ')}: the bundle the float32 loads wrote`);
  // A bundle folder written before the float16-KV graph existed: no kvGraphs, no file.
  const old = path.join(root, 'old-bundle');
  cpSync(dir, old, { recursive: true });
  rmSync(path.join(old, KV_FLOAT16_MODEL_FILE));
  const manifest = JSON.parse(readFileSync(path.join(old, 'manifest.json'), 'utf8'));
  delete manifest.kvGraphs;
  writeFileSync(path.join(old, 'manifest.json'), JSON.stringify(manifest));
  const e = await Engine.load(old, { cacheDir, maxContext: 64, kvCacheDtype: 'float16' });
  try {
    assert.equal(e.info.kvCacheDtype, 'float32');
    assert.match(e.info.fallbackReason ?? '', /KV cache float16 not available in this bundle \(it has no float16-KV graph\); using float32/);
  } finally {
    await e.dispose();
  }
});

test('with no KV cache setting a CPU load runs float16 KV (the default) on both backends, at half the KV bytes a position of float32', async () => {
  for (const backend of ['native', 'js'] as const) {
    const plain = await Engine.load(STORIES_BIN, { cacheDir, maxContext: 64, backend });
    const f32 = await Engine.load(STORIES_BIN, { cacheDir, maxContext: 64, backend, kvCacheDtype: 'float32' });
    try {
      assert.equal(plain.info.backend, backend, String(plain.sessionInfo.fallbackReason));
      assert.deepEqual([plain.info.kvCacheDtype, f32.info.kvCacheDtype], ['float16', 'float32'], backend);
      assert.equal(plain.info.fallbackReason, null, 'no note: the bundle has the float16-KV graph');
      assert.equal(plain.info.memory!.kvBytesPerPosition * 2, f32.info.memory!.kvBytesPerPosition, backend);
    } finally {
      await f32.dispose();
      await plain.dispose();
    }
  }
});

test('an unknown KV cache dtype is refused, quoted', async () => {
  await assert.rejects(Engine.load(STORIES_BIN, { cacheDir, kvCacheDtype: 'int4' as never }), /KV cache dtype.*"int4"/);
});
