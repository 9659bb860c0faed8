/**
 * `npm run bench:peer`: Ropewalk against two llama.cpp builds on the same GGUF files, same
 * threads, same run (issue 23's table): node-llama-cpp's prebuilt CPU binary (through its API)
 * and a current llama.cpp from Debian's archive (`llama-bench`, set up by
 * ../shared/tools/debian-llamacpp.sh, which also gives `llama-quantize`). The bench writes
 * random-weight GGUFs with Qwen3-0.6B's shapes (hidden 1024, 28 layers, 16/8 heads × 128, FFN
 * 3072, vocabulary 151,936, tied embedding; shapes decide speed, not values): F32, Q8_0 and Q4_0
 * itself, Q4_K_M and Q6_K by llama-quantize from the F32 file (skipped, with a line, without the
 * Debian build). Per file and engine:
 *   - prefill tokens/s over prompts of each BENCH_PREFILL length (default 1024,8192);
 *   - decode tokens/s over BENCH_DECODE tokens (default 64) after prompts of each
 *     BENCH_DECODE_CONTEXTS length (default 16,1024);
 * and Ropewalk ÷ the faster of the two builds per row. Each row is measured as llama-bench
 * measures it (its default warm-up run, then `-r` repetitions, their mean): for Ropewalk and
 * node-llama-cpp one untimed run of the same shape first, then BENCH_REPS (default 2, passed to
 * llama-bench as `-r`) timed runs, the mean of their rates. Ropewalk's untimed first run is
 * printed too (`first run`): a fresh engine's first prompt of that length also pays for its
 * first-touched pages (KV growth, arena growth; docs/benchmarks.md), which the warm rows do not.
 * Env: BENCH_FORMATS (default
 * F32,Q8_0,Q4_0,Q4_K_M,Q6_K), BENCH_PEERS (default node-llama-cpp,debian), BENCH_LAYERS (28),
 * BENCH_THREADS (default 2: what a user gets by default on these machines), BENCH_ROUNDS (default
 * 1: each engine's rows of a file in turn, the engines alternated that many times, the median of
 * each row printed — on a noisy machine single rows move by a third between runs minutes apart).
 * `BENCH_FORMATS=Q8_0 BENCH_PREFILL=128 BENCH_DECODE_CONTEXTS=16 BENCH_DECODE=8 BENCH_LAYERS=4`
 * runs a small subset quickly. Each file's rows are printed as they come (in brackets), the
 * aligned table at the end. It asserts nothing. On a machine loaded by other jobs the ratios
 * mean little (llama.cpp's threads spin at barriers and lose their slices): run it quiet.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { getLlama } from 'node-llama-cpp';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationStats } from '../../main/engine/generate/types.ts';
import { benchGguf, debianWrapper, needsQuantize } from './bench-gguf.ts';

type Format = 'F32' | 'Q8_0' | 'Q4_0' | 'Q4_K_M' | 'Q6_K';
const list = (v: string | undefined, d: string) => (v ?? d).split(',').map((s) => s.trim()).filter(Boolean);
const LAYERS = Number(process.env.BENCH_LAYERS ?? 28);
const FORMATS = list(process.env.BENCH_FORMATS, 'F32,Q8_0,Q4_0,Q4_K_M,Q6_K') as Format[];
const PEERS = list(process.env.BENCH_PEERS, 'node-llama-cpp,debian');
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const PREFILL = list(process.env.BENCH_PREFILL, '1024,8192').map(Number);
const CONTEXTS = list(process.env.BENCH_DECODE_CONTEXTS, '16,1024').map(Number);
const DECODE = Number(process.env.BENCH_DECODE ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const REPS = Number(process.env.BENCH_REPS ?? 2);
const MAX_CONTEXT = Math.max(...PREFILL, ...CONTEXTS.map((c) => c + DECODE)) + 16;
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

/** One engine's figures: `prefill@N` and `decode@N` → tokens/s. */
type Rates = Map<string, number>;
const measures = [...PREFILL.map((n) => `prefill@${n}`), ...CONTEXTS.map((n) => `decode@${n}`)];

/** A prompt text of about `n` tokens (" the" tokenizes as one token each, in both tokenizers). */
function promptText(n: number): string {
  return Array.from({ length: Math.max(1, n) }, () => ' the').join('');
}

async function ropewalk(file: string, cacheDir: string): Promise<Rates> {
  const engine = await Engine.load(file, { cacheDir, maxContext: MAX_CONTEXT });
  const run = async (n: number, maxTokens: number): Promise<GenerationStats> => {
    engine.reset();
    let stats: GenerationStats | null = null;
    for await (const ev of engine.generate({ prompt: promptText(n), maxTokens, sampler: GREEDY, ignoreEos: true })) {
      if (ev.type === 'done') stats = ev.stats;
    }
    return stats!;
  };
  const rates: Rates = new Map();
  try {
    await run(4, 4); // warm-up
    for (const n of PREFILL) {
      const first = (await run(n, 1)).prefillTokensPerSec;
      rates.set(`prefill@${n}`, await meanOfReps(async () => (await run(n, 1)).prefillTokensPerSec));
      rates.set(`first:prefill@${n}`, first);
    }
    for (const n of CONTEXTS) {
      const first = (await run(n, DECODE)).decodeTokensPerSec;
      rates.set(`decode@${n}`, await meanOfReps(async () => (await run(n, DECODE)).decodeTokensPerSec));
      rates.set(`first:decode@${n}`, first);
    }
  } finally {
    await engine.dispose();
  }
  return rates;
}

/** The mean of BENCH_REPS timed runs' rates (llama-bench's avg_ts: the mean of its repetitions' tokens/s). */
async function meanOfReps(rate: () => Promise<number>): Promise<number> {
  let sum = 0;
  for (let i = 0; i < REPS; i++) sum += await rate();
  return sum / REPS;
}

async function nodeLlamaCpp(file: string): Promise<Rates> {
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: file });
  const ctx = await model.createContext({ contextSize: MAX_CONTEXT, threads: THREADS, batchSize: 512 });
  const timeIt = async (n: number, maxTokens: number) => {
    const seq = ctx.getSequence();
    const ids = model.tokenize(promptText(n));
    const t0 = performance.now();
    let first = 0;
    let count = 0;
    for await (const _ of seq.evaluate(ids, { temperature: 0 })) {
      if (count === 0) first = performance.now();
      if (++count >= maxTokens) break;
    }
    const end = performance.now();
    await seq.clearHistory();
    seq.dispose();
    return { prefill: (ids.length / (first - t0)) * 1000, decode: ((count - 1) / (end - first)) * 1000 };
  };
  const rates: Rates = new Map();
  try {
    await timeIt(4, 4); // warm-up
    for (const n of PREFILL) {
      await timeIt(n, 1); // llama-bench's warm-up run of the same shape
      rates.set(`prefill@${n}`, await meanOfReps(async () => (await timeIt(n, 1)).prefill));
    }
    for (const n of CONTEXTS) {
      await timeIt(n, DECODE + 1);
      rates.set(`decode@${n}`, await meanOfReps(async () => (await timeIt(n, DECODE + 1)).decode));
    }
  } finally {
    await ctx.dispose();
    await model.dispose();
    await llama.dispose();
  }
  return rates;
}

/** llama-bench's JSON rows: prefill (-p N -n 0) and decode at a depth (-p 0 -n DECODE -d N), after its warm-up run, BENCH_REPS repetitions, averages. */
function debian(wrapper: string, file: string): Rates {
  const bench = (args: string[]) =>
    JSON.parse(execFileSync(wrapper, ['llama-bench', '-m', file, '-t', String(THREADS), '-r', String(REPS), '-o', 'json', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 24 })) as { n_prompt: number; n_gen: number; n_depth?: number; avg_ts: number }[];
  const rates: Rates = new Map();
  for (const r of bench(['-p', PREFILL.join(','), '-n', '0'])) rates.set(`prefill@${r.n_prompt}`, r.avg_ts);
  for (const r of bench(['-p', '0', '-n', String(DECODE), '-d', CONTEXTS.join(',')])) rates.set(`decode@${r.n_depth ?? 0}`, r.avg_ts);
  return rates;
}

const cell = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(1));

/** Per measure, the median of the rounds' figures (the lower middle one of an even count). */
function medians(runs: Rates[]): Rates {
  const out: Rates = new Map();
  for (const m of [...measures, ...measures.map((x) => `first:${x}`)]) {
    const xs = runs.map((r) => r.get(m)).filter((x): x is number => x !== undefined).sort((a, b) => a - b);
    if (xs.length > 0) out.set(m, xs[Math.floor((xs.length - 1) / 2)]);
  }
  return out;
}

const tmp = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-peer-'));
try {
  const wrapper = PEERS.includes('debian') || FORMATS.some(needsQuantize) ? debianWrapper() : null;
  console.log(`Qwen3-0.6B shapes, ${LAYERS} layers, random weights; ${THREADS} threads for all; ${ROUNDS > 1 ? `medians of ${ROUNDS} alternated rounds; ` : ''}each row a warm-up run, then the mean of ${REPS} timed runs (llama-bench -r ${REPS}); tok/s ropewalk / Debian's llama.cpp / node-llama-cpp's, and ropewalk ÷ the faster (load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
  const rows: string[][] = [];
  for (const format of FORMATS) {
    const file = benchGguf(format, tmp, LAYERS, THREADS, wrapper);
    if (!file) {
      console.log(`${format}: skipped (llama-quantize needs the Debian build)`);
      continue;
    }
    const runs: { ours: Rates[]; deb: Rates[]; nlc: Rates[] } = { ours: [], deb: [], nlc: [] };
    for (let r = 0; r < ROUNDS; r++) {
      runs.ours.push(await ropewalk(file, path.join(tmp, 'cache')));
      if (PEERS.includes('debian') && wrapper) runs.deb.push(debian(wrapper, file));
      if (PEERS.includes('node-llama-cpp')) runs.nlc.push(await nodeLlamaCpp(file));
    }
    const [ours, deb, nlc] = [medians(runs.ours), medians(runs.deb), medians(runs.nlc)];
    for (const m of measures) {
      const faster = Math.max(deb.get(m) ?? 0, nlc.get(m) ?? 0);
      const o = ours.get(m);
      rows.push([format, m, cell(o), cell(deb.get(m)), cell(nlc.get(m)), faster > 0 && o !== undefined ? `${(o / faster).toFixed(2)}×` : '—', cell(ours.get(`first:${m}`))]);
      // each file's rows as soon as they are measured (an 8K run takes an hour; one cut short keeps them)
      console.log(`  (${rows[rows.length - 1].join(' | ')})`);
    }
    rmSync(file);
  }
  const head = ['file', 'measure', 'ropewalk', 'debian', 'node-llama-cpp', 'ours ÷ faster', 'ropewalk first run'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padStart(widths[i])).join('  '));
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
