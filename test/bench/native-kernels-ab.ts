/**
 * `npx tsx test/bench/native-kernels-ab.ts`: the native backend's CPU graph with the addon's
 * ropewalk.MatMulQ8 / MatMulQ8K against the MatMulNBits graph (`EngineOptions.nativeKernels` true /
 * false), same GGUF, same process, measurements interleaved over BENCH_ROUNDS rounds: Qwen3-0.6B-shaped
 * random-weight GGUFs (bench-gguf.ts; BENCH_FORMATS, default Q8_0,Q4_0,Q4_K_M,Q6_K, the last two
 * by Debian's llama-quantize; BENCH_LAYERS, default 28) at
 * BENCH_THREADS (default 2) intra-op threads; per round and engine prefill tokens/s over a
 * BENCH_PREFILL-token prompt (default 1024) and decode tokens/s over BENCH_DECODE tokens (default
 * 32) after BENCH_DECODE_CONTEXTS-token prompts (default 16,1024). Medians, and MatMulQ8 ÷
 * MatMulNBits. A bench helper: it asserts nothing; say the load beside its figures.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationStats } from '../../main/engine/generate/types.ts';
import { benchGguf, debianWrapper, needsQuantize } from './bench-gguf.ts';

const list = (v: string | undefined, d: string) => (v ?? d).split(',').map((s) => s.trim()).filter(Boolean);
const FORMATS = list(process.env.BENCH_FORMATS, 'Q8_0,Q4_0,Q4_K_M,Q6_K');
const LAYERS = Number(process.env.BENCH_LAYERS ?? 28);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PREFILL = Number(process.env.BENCH_PREFILL ?? 1024);
const DECODE = Number(process.env.BENCH_DECODE ?? 32);
const CONTEXTS = list(process.env.BENCH_DECODE_CONTEXTS, '16,1024').map(Number);
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load = () => os.loadavg().map((l) => l.toFixed(1)).join(' ');

async function run(engine: Engine, n: number, maxTokens: number): Promise<GenerationStats> {
  engine.reset();
  let stats: GenerationStats | null = null;
  const prompt = Array.from({ length: n }, () => ' the').join('');
  for await (const ev of engine.generate({ prompt, maxTokens, sampler: GREEDY, ignoreEos: true })) if (ev.type === 'done') stats = ev.stats;
  return stats!;
}

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-nk-ab-'));
try {
  console.log(`load at start ${load()}`);
  const wrapper = FORMATS.some(needsQuantize) ? debianWrapper() : null;
  for (const format of FORMATS) {
    const file = benchGguf(format, root, LAYERS, THREADS, wrapper);
    if (!file) {
      console.log(`${format}: skipped (llama-quantize needs the Debian build)`);
      continue;
    }
    const opts = { cacheDir: path.join(root, 'cache'), maxContext: Math.max(PREFILL, ...CONTEXTS) + DECODE + 16, threads: THREADS };
    const engines = { MatMulQ8: await Engine.load(file, { ...opts, nativeKernels: true }), MatMulNBits: await Engine.load(file, { ...opts, nativeKernels: false }) };
    const rates = new Map<string, number[]>();
    const add = (key: string, v: number) => rates.set(key, [...(rates.get(key) ?? []), v]);
    try {
      for (const e of Object.values(engines)) await run(e, 4, 4);
      for (let r = 0; r < ROUNDS; r++) {
        for (const [name, e] of Object.entries(engines)) {
          await run(e, 4, 2); // its threads awake after the other engine's turn
          add(`${name} prefill@${PREFILL}`, (await run(e, PREFILL, 1)).prefillTokensPerSec);
          for (const c of CONTEXTS) add(`${name} decode@${c}`, (await run(e, c, DECODE)).decodeTokensPerSec);
        }
      }
    } finally {
      for (const e of Object.values(engines)) await e.dispose();
      rmSync(file);
    }
    for (const m of [`prefill@${PREFILL}`, ...CONTEXTS.map((c) => `decode@${c}`)]) {
      const a = rates.get(`MatMulQ8 ${m}`)!;
      const b = rates.get(`MatMulNBits ${m}`)!;
      console.log(`${format} ${m}, ${THREADS} threads, tok/s: MatMulQ8 ${median(a).toFixed(1)} [${a.map((v) => v.toFixed(1)).join(', ')}] / MatMulNBits ${median(b).toFixed(1)} [${b.map((v) => v.toFixed(1)).join(', ')}] = ${(median(a) / median(b)).toFixed(2)}× (load ${load()})`);
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
