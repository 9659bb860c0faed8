/**
 * `BENCH_SECTIONS=kvdtype npm run bench`: what a smaller KV element costs ONNX Runtime 1.30's CPU
 * GroupQueryAttention, one node with Qwen3-0.6B's attention shapes (16 query / 8 KV heads × 128)
 * at `held` tokens of capacity `capacity`, float32 activations in and out, per KV storage:
 *   float32   the graph's KV today;
 *   float16   q/k/v Cast to float16 before the node and its output Cast back (the CPU kernel is
 *             typed by one T for q/k/v and past/present together), KV float16;
 *   int8      the kernel's quantized-KV path (`k_quant_type`/`v_quant_type` PER_TENSOR,
 *             `kv_cache_bit_width` 8, float k_scale/v_scale inputs 12 and 13): float32 q/k/v,
 *             int8 past/present, one static scale for a whole cache (no per-block scales: a
 *             scale must be chosen before the values are seen).
 * The three sessions run interleaved, step by step; per storage the median node time of the
 * attention (GroupQueryAttention + its Casts) from ONNX Runtime's profiler, its ratio to
 * float32, and its output's largest difference from float32's on the same values (the past
 * filled with int8 × scale, exact in all three).
 * `kvStepRows`: the same choice in the whole decode step the KV cache setting ships (float32 and
 * float16 KV: `EngineOptions.kvCacheDtype`), a Qwen3-0.6B-shaped Q4_0 GGUF's two graphs (one bundle) on the
 * native backend, steps interleaved at `held` tokens: median wall step, node time, and the
 * attention's (GroupQueryAttention + Casts) node time, from ONNX Runtime's profiler.
 * It asserts nothing.
 */
import { readdirSync, readFileSync, rmSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { DataType, OnnxGraphBuilder } from '../../main/engine/model/onnx-builder.ts';
import { floatToHalf } from '../../main/engine/model/gguf/quants.ts';
import { mulberry32 } from '../helpers/prng.ts';
import { opShares } from './step-profile.ts';
import { performance } from 'node:perf_hooks';
import { Engine } from '../../main/engine/generate/engine.ts';
import { KV_FLOAT16_MODEL_FILE, MODEL_FILE } from '../../main/engine/model/bundle.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { kvBytesPerPosition } from '../../main/engine/model/memory.ts';
import { loadNativeAddon, type NativeAddon } from '../../main/engine/model/native-addon.ts';
import { intraOpThreadsFor } from '../../main/engine/model/cpu-threads.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { qwen3_0_6bConfig, qwen3TokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { poolWeights } from './pool-weights.ts';

type Storage = 'float32' | 'float16' | 'int8';
const STORAGES: Storage[] = ['float32', 'float16', 'int8'];
const INT8 = 3; // onnx.TensorProto.DataType.INT8
const Hq = 16;
const Hkv = 8;
const hd = 128;
const SCALE = 0.02;

function gqaGraph(storage: Storage, capacity: number): Uint8Array {
  const g = new OnnxGraphBuilder('unused.data');
  const kvType = storage === 'float32' ? DataType.FLOAT : storage === 'float16' ? DataType.FLOAT16 : INT8;
  const q = g.input('q', DataType.FLOAT, [1, 1, Hq * hd]);
  const k = g.input('k', DataType.FLOAT, [1, 1, Hkv * hd]);
  const v = g.input('v', DataType.FLOAT, [1, 1, Hkv * hd]);
  const past = [g.input('past_key', kvType, [1, Hkv, capacity, hd]), g.input('past_value', kvType, [1, Hkv, capacity, hd])];
  const lengths = [g.input('seqlens_k', DataType.INT32, [1]), g.input('total_seq_len', DataType.INT32, [])];
  const attrs = { num_heads: Hq, kv_num_heads: Hkv, scale: { float: 1 / Math.sqrt(hd) } };
  const toHalf = (x: string) => g.op('Cast', [x], { to: DataType.FLOAT16 });
  let inputs = [q, k, v, ...past, ...lengths];
  if (storage === 'float16') inputs = [toHalf(q), toHalf(k), toHalf(v), ...past, ...lengths];
  if (storage === 'int8') inputs = [...inputs, '', '', '', '', '', g.input('k_scale', DataType.FLOAT, [1]), g.input('v_scale', DataType.FLOAT, [1])];
  const quant: Record<string, string | number> = storage === 'int8' ? { k_quant_type: 'PER_TENSOR', v_quant_type: 'PER_TENSOR', kv_cache_bit_width: 8 } : {};
  const [attn] = g.node('GroupQueryAttention', inputs, ['attn', 'present_key', 'present_value'], { ...attrs, ...quant }, 'com.microsoft');
  g.node(storage === 'float16' ? 'Cast' : 'Identity', [attn], ['out'], storage === 'float16' ? { to: DataType.FLOAT } : {});
  g.output('out', DataType.FLOAT, [1, 1, Hq * hd]);
  g.output('present_key', kvType, [1, Hkv, capacity, hd]);
  g.output('present_value', kvType, [1, Hkv, capacity, hd]);
  return g.build('gqa_probe', { '': 18, 'com.microsoft': 1 }, 'GroupQueryAttention KV storage probe').model;
}

/** Feeds for one storage: the same q/k/v and the same past values (int8 codes × SCALE) in each. */
function feeds(storage: Storage, capacity: number, held: number, codes: Int8Array[], qkv: Float32Array[]): Record<string, ort.Tensor> {
  const dims = [1, Hkv, capacity, hd];
  const kvTensor = (c: Int8Array) =>
    storage === 'float32' ? new ort.Tensor('float32', Float32Array.from(c, (x) => x * SCALE), dims)
    : storage === 'float16' ? new ort.Tensor('float16', Uint16Array.from(c, (x) => floatToHalf(x * SCALE)), dims)
    : new ort.Tensor('int8', c, dims);
  const out: Record<string, ort.Tensor> = {
    q: new ort.Tensor('float32', qkv[0], [1, 1, Hq * hd]),
    k: new ort.Tensor('float32', qkv[1], [1, 1, Hkv * hd]),
    v: new ort.Tensor('float32', qkv[2], [1, 1, Hkv * hd]),
    past_key: kvTensor(codes[0]),
    past_value: kvTensor(codes[1]),
    seqlens_k: new ort.Tensor('int32', Int32Array.of(held), [1]),
    total_seq_len: new ort.Tensor('int32', Int32Array.of(held + 1), []),
  };
  if (storage === 'int8') {
    out.k_scale = new ort.Tensor('float32', Float32Array.of(SCALE), [1]);
    out.v_scale = new ort.Tensor('float32', Float32Array.of(SCALE), [1]);
  }
  return out;
}

export interface KvStorageRow {
  storage: Storage;
  /** Median attention node time per step (GroupQueryAttention + Casts), µs. */
  attentionUs: number;
  /** Largest |out − float32's out| over the output. */
  maxDiff: number;
}

/** The rows (see the file comment); `steps` interleaved steps per storage. */
export async function kvStorageRows(capacity: number, held: number, steps: number): Promise<KvStorageRow[]> {
  const rand = mulberry32(23);
  const codes = [0, 1].map(() => Int8Array.from({ length: Hkv * capacity * hd }, () => Math.round((rand() * 2 - 1) * 127)));
  const qkv = [Hq, Hkv, Hkv].map((h) => Float32Array.from({ length: h * hd }, () => (rand() - 0.5) * 4));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-kv-dtype-'));
  const sessions = new Map<Storage, ort.InferenceSession>();
  const outs = new Map<Storage, Float32Array>();
  try {
    for (const s of STORAGES) {
      sessions.set(s, await ort.InferenceSession.create(gqaGraph(s, capacity), { enableProfiling: true, profileFilePrefix: path.join(dir, s), intraOpNumThreads: 2 }));
    }
    const inputs = new Map(STORAGES.map((s) => [s, feeds(s, capacity, held, codes, qkv)]));
    for (let i = 0; i < steps; i++) {
      for (const s of STORAGES) {
        const o = await sessions.get(s)!.run(inputs.get(s)!);
        if (i === 0) outs.set(s, o.out.data as Float32Array);
      }
    }
    for (const s of STORAGES) sessions.get(s)!.endProfiling();
    const ref = outs.get('float32')!;
    return STORAGES.map((storage) => {
      const file = readdirSync(dir).find((f) => f.startsWith(`${storage}_`) && f.endsWith('.json'))!;
      const events = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
      const attentionUs = opShares(events, steps).reduce((a, o) => a + o.usPerStep, 0);
      const out = outs.get(storage)!;
      let maxDiff = 0;
      for (let i = 0; i < out.length; i++) maxDiff = Math.max(maxDiff, Math.abs(out[i] - ref[i]));
      return { storage, attentionUs, maxDiff };
    });
  } finally {
    for (const s of sessions.values()) await s.release();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The bench section's table rows, with the ratio to float32 and the bytes per element. */
export async function kvStorageSection(): Promise<string[][]> {
  const capacity = Number(process.env.BENCH_KV_DTYPE_CAPACITY ?? 2048);
  const held = Number(process.env.BENCH_CAPACITY_HELD ?? 1072);
  const steps = Number(process.env.BENCH_KV_DTYPE_STEPS ?? 30);
  const rows = await kvStorageRows(capacity, held, steps);
  console.log(`\nKV storage against GroupQueryAttention (CPU, one node, 16/8 heads × 128, ${held} tokens held of ${capacity}; ${steps} interleaved steps, profiler node time; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
  const bytes: Record<Storage, number> = { float32: 4, float16: 2, int8: 1 };
  return rows.map((r) => [r.storage, String(bytes[r.storage]), `${(r.attentionUs / 1000).toFixed(3)} ms`, `${(r.attentionUs / rows[0].attentionUs).toFixed(2)}×`, r.maxDiff.toExponential(1)]);
}

export const KV_STORAGE_HEAD = ['KV storage', 'bytes/elem', 'attention / step', 'vs float32', 'max |Δ out|'];

/** A native decoder on `modelPath` with the RoPE and KV caches ready for a step at `held` (capacity `capacity`). */
function openDecoder(addon: NativeAddon, modelPath: string, c: ModelConfig, kvDtype: 'float32' | 'float16', held: number, capacity: number, profilePrefix?: string) {
  const decoder = new addon.NativeDecoder(modelPath, {
    executionProvider: 'cpu', numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, vocabSize: c.vocabSize,
    rotaryHalf: c.rope.rotaryDim / 2, logits: new Float32Array(c.vocabSize), kvDtype, intraOpThreads: intraOpThreadsFor(Number(process.env.BENCH_THREADS ?? 0)),
    ...(profilePrefix ? { profilePrefix } : {}),
  });
  const rope = new RopeCache(c.rope, capacity);
  rope.ensure(held + 1);
  decoder.resize(capacity, 0);
  decoder.setRope(rope.tables.cos, rope.tables.sin, rope.tables.rows);
  return decoder;
}

/**
 * The whole-step rows (see the file comment): per KV dtype [dtype, KV bytes / position, wall ms,
 * node ms, attention ms, wall vs float32]. One session at a time (two sessions' spinning thread
 * pools on 2 cores slow each other), the dtypes alternating over `rounds` rounds of `steps` steps,
 * the median of the rounds' medians; node times from one profiled session each after them (the
 * profiler slows the wall step, so it times no wall row).
 */
export async function kvStepRows(layers: number, held: number, steps: number, rounds = 3): Promise<string[][]> {
  const status = loadNativeAddon();
  if (!status.available) return [['(no native addon)', status.reason, '', '', '', '']];
  const capacity = held + 28;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-kv-step-'));
  try {
    const file = path.join(dir, 'qwen3-Q4_0.gguf');
    const config = qwen3_0_6bConfig(layers);
    writeModelGguf(file, config, qwen3TokenizerMetadata(config.vocabSize), poolWeights(), 'Q4_0', 'Q4_0');
    const dtypes = ['float32', 'float16'] as const;
    const bundles = [];
    for (const kvCacheDtype of dtypes) {
      const engine = await Engine.load(file, { cacheDir: path.join(dir, 'cache'), kvCacheDtype, maxContext: capacity });
      bundles.push({ kvCacheDtype, modelPath: path.join(engine.info.bundleDir, kvCacheDtype === 'float16' ? KV_FLOAT16_MODEL_FILE : MODEL_FILE), c: engine.manifest.config, medians: [] as number[] });
      await engine.dispose();
    }
    const ids = Int32Array.of(7);
    for (let r = 0; r < rounds; r++) {
      for (const b of bundles) {
        const decoder = openDecoder(status.addon, b.modelPath, b.c, b.kvCacheDtype, held, capacity);
        const wall: number[] = [];
        for (let s = 0; s <= steps; s++) {
          const t = performance.now();
          await decoder.run(ids, held);
          wall.push(performance.now() - t);
        }
        decoder.dispose();
        b.medians.push(median(wall.slice(1)));
      }
    }
    const out: { dtype: string; bytes: number; wallMs: number; nodeMs: number; attentionMs: number }[] = [];
    for (const b of bundles) {
      const decoder = openDecoder(status.addon, b.modelPath, b.c, b.kvCacheDtype, held, capacity, path.join(dir, b.kvCacheDtype));
      for (let s = 0; s <= steps; s++) await decoder.run(ids, held);
      const events = JSON.parse(readFileSync(decoder.endProfiling(), 'utf8'));
      decoder.dispose();
      const ops = opShares(events, steps + 1, b.c.vocabSize);
      const nodeMs = ops.reduce((a, o) => a + o.usPerStep, 0) / 1000;
      const attentionMs = ops.filter((o) => o.op === 'GroupQueryAttention' || o.op === 'DecodeAttention' || o.op === 'Cast').reduce((a, o) => a + o.usPerStep, 0) / 1000;
      out.push({ dtype: b.kvCacheDtype, bytes: kvBytesPerPosition(b.c, b.kvCacheDtype), wallMs: median(b.medians), nodeMs, attentionMs });
    }
    return out.map((r) => [r.dtype, String(r.bytes), `${r.wallMs.toFixed(2)} ms`, `${r.nodeMs.toFixed(2)} ms`, `${r.attentionMs.toFixed(2)} ms`, `${(r.wallMs / out[0].wallMs).toFixed(2)}×`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export const KV_STEP_HEAD = ['KV cache', 'bytes/position', 'wall step', 'node time', 'attention (its node + Casts)', 'wall vs float32'];
