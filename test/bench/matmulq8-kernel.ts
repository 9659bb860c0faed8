/**
 * `npx tsx test/bench/matmulq8-kernel.ts`: ropewalk.MatMulQ8's kernel alone (the addon's
 * `matMulQ8`: one thread, no ONNX Runtime) against MatMulNBits (the CPU graph's: half-scale nodes
 * and the kernel at accuracy level 4, an onnxruntime-node session of one thread), calls
 * interleaved, on a classifier-sized weight (BENCH_N × BENCH_K, default 151,936 × 1,024:
 * Qwen3-0.6B's tied head, larger than any cache) as Q8_0 and Q4_0, M rows (BENCH_M, default 1):
 * ms per call (median of BENCH_REPS) and the weight bytes streamed per second, to set beside a
 * streaming read of this machine's memory. Random blocks (speed does not depend on values).
 * A bench helper: it asserts nothing.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { matMulNBitsGraph } from '../../main/engine/model/decoder-graph.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { writeExternalData } from '../../main/engine/model/onnx-builder.ts';

const s = loadNativeAddon();
if (!s.available || !s.addon.matMulQ8) throw new Error(s.available ? 'addon without matMulQ8' : s.reason);
const n = Number(process.env.BENCH_N ?? 151936);
const k = Number(process.env.BENCH_K ?? 1024);
const m = Number(process.env.BENCH_M ?? 1);
const reps = Number(process.env.BENCH_REPS ?? 7);
const isa = (process.env.BENCH_ISA ?? s.addon.matMulQ8Kernel) as 'scalar' | 'avx2' | 'avx512vnni' | 'amx';
const x = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i * 0.37));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-q8k-'));
try {
  for (const bits of [8, 4] as const) {
    const blocks = new Uint8Array((n * k * bits) / 8);
    for (let i = 0; i < blocks.length; i++) blocks[i] = (i * 2654435761) >>> 24;
    const scales = Float32Array.from({ length: (n * k) / 32 }, (_, i) => 1e-3 * (1 + (i % 5)));
    const built = matMulNBitsGraph({ shape: [n, k], bits, blockSize: 32, data: blocks, scales, zeroPoints: null, format: bits === 8 ? 'Q8_0' : 'Q4_0' });
    const file = path.join(dir, bits === 8 ? 'q8' : 'q4', 'model.onnx');
    mkdirSync(path.dirname(file));
    writeFileSync(file, built.model);
    await writeExternalData(`${file}.data`, built);
    const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 1 });
    const feed = { x: new ort.Tensor('float32', x, [m, k]) };
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let r = 0; r < reps; r++) {
      let t = performance.now();
      s.addon.matMulQ8(isa, x, m, blocks, scales, n, k, bits);
      ours.push(performance.now() - t);
      t = performance.now();
      await session.run(feed);
      theirs.push(performance.now() - t);
    }
    await session.release();
    const bytes = blocks.length + scales.length * 4;
    const row = (name: string, ms: number) => `${name} ${ms.toFixed(2)} ms = ${(bytes / ms / 1e6).toFixed(1)} GB/s`;
    console.log(`${bits === 8 ? 'Q8_0' : 'Q4_0'} [${n}, ${k}] M=${m}, 1 thread: ${row(`MatMulQ8 (${isa})`, median(ours))}; ${row('MatMulNBits graph', median(theirs))}; ratio ${(median(ours) / median(theirs)).toFixed(2)}× (load ${os.loadavg()[0].toFixed(1)})`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
