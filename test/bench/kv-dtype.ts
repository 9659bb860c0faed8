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
 * filled with int8 × scale, exact in all three). It asserts nothing.
 */
import { readdirSync, readFileSync, rmSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { DataType, OnnxGraphBuilder } from '../../main/engine/model/onnx-builder.ts';
import { floatToHalf } from '../../main/engine/model/gguf/quants.ts';
import { mulberry32 } from '../helpers/prng.ts';
import { opShares } from './step-profile.ts';

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
