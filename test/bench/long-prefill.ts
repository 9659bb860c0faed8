/**
 * `npm run bench:prefill`: where the time of a long prefill goes, on stories260K (the model a
 * 22K-token prefill once took 320 s on, under heavy load). For prompt lengths 1K, 4K and 16K
 * (BENCH_PREFILL_SIZES) and both backends it prints:
 *   - prefill tokens/s through `Engine.prefill` in 256-token chunks, as the engine does;
 *   - the first and the last chunk's time, and their ratio next to the ratio of the positions
 *     the last chunk attends to (a cost linear in the position per chunk, so quadratic in all);
 * then, for the longest length, the same last chunk run through a plain onnxruntime-node session
 * on the engine's own KV cache with ONNX Runtime's profiler on: the share of its kernel time spent
 * in `GroupQueryAttention` (the baseline: what ONNX Runtime alone costs for the same run), and
 * the time to tokenize a text of that many tokens. With BENCH_PREFILL_PEER=1, llama.cpp
 * (node-llama-cpp, the same model as GGUF, 2 threads, batch 256) prefills the same token ids, up
 * to BENCH_PREFILL_PEER_MAX tokens (default 4096: it is much slower here under load).
 * Figures are from one run each; it is a benchmark, not a test: it asserts nothing.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { Engine } from '../../main/engine/generate/engine.ts';
import { BACKEND_KINDS } from '../../main/engine/model/backend.ts';
import { defaultModelPath } from '../../main/common/default-model.ts';
import { MODEL_FILE } from '../../main/engine/model/bundle.ts';
import { STORIES_GGUF } from '../helpers/paths.ts';

const SIZES = (process.env.BENCH_PREFILL_SIZES ?? '1024,4096,16384').split(',').map(Number);
const CHUNK = 256;
const MAX = Math.max(...SIZES);
/** Token ids of a long prompt without tokenizing (tokenizing is timed on its own). */
const ids = Array.from({ length: MAX }, (_, i) => 3 + ((i * 7919) % 500));
const fmt = (x: number) => x.toFixed(x >= 100 ? 0 : 1);

async function prefill(engine: Engine, n: number): Promise<{ ms: number; first: number; last: number }> {
  engine.reset();
  const chunks: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i += CHUNK) {
    const c0 = performance.now();
    await engine.prefill(ids.slice(i, Math.min(n, i + CHUNK)));
    chunks.push(performance.now() - c0);
  }
  return { ms: performance.now() - t0, first: chunks[0], last: chunks[chunks.length - 1] };
}

/** The last chunk of an `n`-token prefill through a profiling session fed the JS engine's KV cache. */
async function attentionShare(engine: Engine, modelPath: string, n: number): Promise<{ ms: number; gqaShare: number }> {
  await prefill(engine, n - CHUNK);
  const c = engine.manifest.config;
  const P = n - CHUNK;
  engine.rope.ensure(n);
  engine.kv.ensure(n);
  const rope = engine.rope.tables;
  const C = engine.kv.capacity;
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(ids.slice(P, n), BigInt), [1, CHUNK]),
    rope_cos_cache: new ort.Tensor('float32', rope.cos, [rope.rows, c.rope.rotaryDim / 2]),
    rope_sin_cache: new ort.Tensor('float32', rope.sin, [rope.rows, c.rope.rotaryDim / 2]),
    seqlens_k: new ort.Tensor('int32', Int32Array.from([n - 1]), [1]),
    total_seq_len: new ort.Tensor('int32', Int32Array.from([n]), []),
  };
  for (let l = 0; l < c.numLayers; l++) {
    feeds[`past_key_${l}`] = new ort.Tensor('float32', engine.kv.key(l), [1, c.numKvHeads, C, c.headDim]);
    feeds[`past_value_${l}`] = new ort.Tensor('float32', engine.kv.value(l), [1, c.numKvHeads, C, c.headDim]);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-prefill-'));
  try {
    const session = await ort.InferenceSession.create(modelPath, { executionProviders: ['cpu'], graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: path.join(dir, 'profile') });
    const t0 = performance.now();
    await session.run(feeds, ['logits']);
    const ms = performance.now() - t0;
    session.endProfiling();
    await session.release();
    const file = readdirSync(dir).find((f) => f.endsWith('.json'))!;
    const events = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { cat: string; name: string; dur: number; args?: { op_name?: string } }[];
    let all = 0;
    let gqa = 0;
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
      all += e.dur;
      if (e.args?.op_name === 'GroupQueryAttention') gqa += e.dur;
    }
    return { ms, gqaShare: gqa / all };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const modelPath = defaultModelPath();
console.log(`prefill on stories260K, ${CHUNK}-token chunks, load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`);
console.log('backend  tokens  prefill tok/s  first chunk ms  last chunk ms  last/first  positions last/first');
for (const backend of BACKEND_KINDS) {
  const engine = await Engine.load(modelPath, { backend, maxContext: Math.max(MAX, 512) });
  try {
    for (const n of SIZES) {
      const r = await prefill(engine, n);
      console.log(`${backend.padEnd(7)}  ${String(n).padStart(6)}  ${fmt((n * 1000) / r.ms).padStart(13)}  ${fmt(r.first).padStart(14)}  ${fmt(r.last).padStart(13)}  ${fmt(r.last / r.first).padStart(10)}  ${fmt(n / CHUNK).padStart(21)}`);
    }
  } finally {
    await engine.dispose();
  }
}
const js = await Engine.load(modelPath, { backend: 'js', maxContext: Math.max(MAX, 512) });
try {
  const share = await attentionShare(js, path.join(js.info.bundleDir, MODEL_FILE), MAX);
  console.log(`last chunk of ${MAX} through a plain ONNX Runtime session: ${fmt(share.ms)} ms, GroupQueryAttention ${(share.gqaShare * 100).toFixed(1)} % of kernel time`);
  const text = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine.\n\n'.repeat(Math.ceil(MAX / 25));
  const t0 = performance.now();
  const tokens = js.tokenizer.encode(text).length;
  console.log(`tokenizing ${tokens} tokens (${text.length} characters): ${fmt(performance.now() - t0)} ms`);
} finally {
  await js.dispose();
}

if (process.env.BENCH_PREFILL_PEER === '1') {
  const { getLlama } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: STORIES_GGUF });
  try {
    for (const n of SIZES.filter((x) => x <= Number(process.env.BENCH_PREFILL_PEER_MAX ?? 4096))) {
      const ctx = await model.createContext({ contextSize: n + 16, threads: 2, batchSize: CHUNK });
      const seq = ctx.getSequence();
      const t0 = performance.now();
      for await (const _ of seq.evaluate(ids.slice(0, n) as never, { temperature: 0 })) break; // the first token ends the prefill
      console.log(`llama.cpp  ${String(n).padStart(6)}  ${fmt((n * 1000) / (performance.now() - t0)).padStart(13)} tok/s`);
      seq.dispose();
      await ctx.dispose();
    }
  } finally {
    await model.dispose();
    await llama.dispose();
  }
}
