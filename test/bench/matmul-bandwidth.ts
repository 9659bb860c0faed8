/**
 * `npx tsx test/bench/matmul-bandwidth.ts`: the quantized matmuls of one decode step (T = 1)
 * against this machine's memory bandwidth. Per format (BENCH_FORMATS, default Q8_0,Q4_0) a
 * Qwen3-0.6B-shaped bundle (random weights, BENCH_LAYERS layers) built twice — the MatMulNBits
 * graph and the native addon's ropewalk.MatMulQ8 graph — and ONNX Runtime's profiler over
 * BENCH_STEPS decode steps at 16 tokens held (native backend), the two interleaved BENCH_ROUNDS
 * times: for the quantized matmuls, the bytes its nodes' initializer inputs
 * hold (from the graph) ÷ their node time = the rate they stream weights at, and the step's
 * node and wall time.
 * Compare with a streaming read of the same threads (printed by the caller's microbench).
 * A bench helper: it asserts nothing.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { qwen3Bundle } from './capacity.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { profileDecode } from './step-profile.ts';

/** Bytes per element of ONNX TensorProto data types (FLOAT, UINT8, INT8, FLOAT16). */
const BYTES: Record<number, number> = { 1: 4, 2: 1, 3: 1, 10: 2 };

/** Node name → bytes of its initializer inputs, from the graph (the data lives in the external file). */
function initializerBytes(modelPath: string): Map<string, number> {
  const m = onnxProto.onnx.ModelProto.decode(readFileSync(modelPath));
  const size = new Map<string, number>();
  for (const t of m.graph!.initializer!) size.set(t.name!, (t.dims ?? []).reduce<number>((a, d) => a * Number(d), 1) * (BYTES[t.dataType!] ?? 0));
  const out = new Map<string, number>();
  for (const n of m.graph!.node!) out.set(n.name!, (n.input ?? []).reduce((a, i) => a + (size.get(i) ?? 0), 0));
  return out;
}
const formats = (process.env.BENCH_FORMATS ?? 'Q8_0,Q4_0').split(',') as ('Q8_0' | 'Q4_0')[];
const layers = Number(process.env.BENCH_LAYERS ?? 28);
const steps = Number(process.env.BENCH_STEPS ?? 6);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-mmbw-'));

/** One profiled decode (16 held): per quantized-matmul op, MB per step, ms per step; the step's node and wall ms. */
async function measure(modelPath: string, config: ModelConfig) {
  const weights = initializerBytes(modelPath);
  let events: { cat?: string; name?: string; dur?: number; args?: { op_name?: string } }[] = [];
  const p = await profileDecode(modelPath, config, 16, 2048, steps, (file) => { events = JSON.parse(readFileSync(file, 'utf8')); });
  let us = 0;
  let bytes = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name?.endsWith('_kernel_time') || !/^(MatMulNBits|MatMulQ8)$/.test(String(e.args?.op_name))) continue;
    us += e.dur ?? 0;
    bytes += weights.get(e.name.slice(0, -'_kernel_time'.length)) ?? 0;
  }
  return { mb: bytes / (steps + 1) / 1e6, ms: us / (steps + 1) / 1000, nodeMs: p.nodeUsPerStep / 1000, wallMs: p.wallMsPerStep };
}

try {
  for (const format of formats) {
    const kinds = [
      { name: 'MatMulNBits (+ half-scale nodes)', ...(await qwen3Bundle(path.join(root, `${format}-nbits`), format, layers, false)) },
      { name: 'ropewalk.MatMulQ8', ...(await qwen3Bundle(path.join(root, `${format}-q8`), format, layers, true)) },
    ];
    for (let r = 0; r < rounds; r++) {
      for (const k of kinds) {
        const m = await measure(k.modelPath, k.config);
        console.log(`${format} ${k.name}: ${m.mb.toFixed(1)} MB per step in ${m.ms.toFixed(2)} ms = ${(m.mb / m.ms).toFixed(1)} GB/s; ` +
          `step nodes ${m.nodeMs.toFixed(2)} ms, wall ${m.wallMs.toFixed(2)} ms (threads ${process.env.BENCH_THREADS ?? 'default'}, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
      }
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
