/**
 * `npm run bench:gpu -- [--ep cuda,webgpu,cpu] [--model PATH] [--contexts 1024,8192]
 * [--decode N] [--bandwidth GB/s]`: what a GPU gives, for a person with one to run as it is.
 * Per execution provider (each one that opens here; one that falls back says why and is
 * skipped): load time with the bundle already cached (which includes the warm-up run: shader
 * compilation on WebGPU), then per context C: TTFT and prefill tokens/s over a prompt of about
 * C − N tokens, decode tokens/s over the N tokens after it, GPU memory in use (device-wide,
 * after the run minus before the load: `nvidia-smi` for NVIDIA, sysfs `mem_info_vram_used` for
 * AMD; "n/a" where neither can be read), and beside them the bound a decode step cannot beat:
 * memory bandwidth ÷ bytes read per token (resident weights + the KV cache's keys and values of
 * C positions, in the graph's KV dtype: float16 on CUDA), as tokens/s, and the share of it reached.
 *
 * Bandwidth: `--bandwidth GB/s`, else looked up by the GPU's name in BANDWIDTH_GBS (vendors'
 * spec sheets), else not shown. Model: `--model` (anything `npm run chat` opens), else a
 * random-weight GGUF with Qwen3-0.6B's shapes (BENCH_LAYERS layers, default 28; BENCH_FORMAT
 * Q4_0 (default) or Q8_0; shapes decide speed, not values). A provider whose load or run fails
 * gets one line saying so and the others still run. Greedy, EOS ignored. It asserts nothing. On these machines (no GPU)
 * it runs on WebGPU over lavapipe only to check that it works: the figures then say nothing of
 * GPU speed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { kvElementBytes } from '../../main/engine/cache/kv-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationStats } from '../../main/engine/generate/types.ts';
import { parseExecutionProvider } from '../../main/engine/model/ep-choice.ts';
import type { ExecutionProvider } from '../../main/engine/model/backend.ts';
import { qwen3_0_6bConfig, qwen3TokenizerMetadata, randomWeights, writeModelGguf } from '../helpers/synthetic-gguf.ts';

/** Peak memory bandwidth, GB/s, by a substring of the GPU's name (vendors' spec sheets). Longest match wins. */
export const BANDWIDTH_GBS: Record<string, number> = {
  H200: 4800, 'H100 SXM': 3350, 'H100 80GB HBM3': 3350, 'H100 PCIe': 2000, 'A100-SXM4-80GB': 2039, 'A100 80GB': 1935, 'A100-SXM4-40GB': 1555,
  L40S: 864, L4: 300, A10: 600, T4: 320, 'RTX 4090': 1008, 'RTX 4080': 717, 'RTX 4070': 504, 'RTX 3090': 936, 'RTX 3080': 760,
  'RTX 3060': 360, 'RX 7900 XTX': 960, 'RX 7900 XT': 800, 'RX 6800 XT': 512, 'Arc A770': 560, 'Arc A750': 512,
};

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

/** The bandwidth for a GPU name (the longest table key it contains), or null. */
export function bandwidthFor(name: string | null): number | null {
  if (!name) return null;
  const key = Object.keys(BANDWIDTH_GBS).filter((k) => name.includes(k)).sort((a, b) => b.length - a.length)[0];
  return key ? BANDWIDTH_GBS[key] : null;
}

/** Device-wide GPU memory in use, bytes: NVIDIA (nvidia-smi), else AMD (sysfs), else null. */
function gpuMemoryUsed(): number | null {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] });
    return Number(out.split('\n')[0]) * 2 ** 20;
  } catch {
    // not NVIDIA, or no driver tools
  }
  try {
    const cards = readdirSync('/sys/class/drm').filter((c) => /^card\d+$/.test(c));
    let used = 0;
    let found = false;
    for (const c of cards) {
      try {
        used += Number(readFileSync(`/sys/class/drm/${c}/device/mem_info_vram_used`, 'utf8'));
        found = true;
      } catch {
        // not an AMD card
      }
    }
    return found ? used : null;
  } catch {
    return null;
  }
}

/** A prompt text of about `n` tokens (" the" is one token in the Qwen3 and llama tokenizers). */
const promptText = (n: number) => ' the'.repeat(Math.max(1, n));

async function answer(engine: Engine, promptTokens: number, decode: number): Promise<GenerationStats> {
  engine.reset();
  let stats: GenerationStats | null = null;
  for await (const ev of engine.generate({ prompt: promptText(promptTokens), maxTokens: decode, sampler: GREEDY, ignoreEos: true })) {
    if (ev.type === 'done') {
      if (ev.reason === 'error') throw new Error(ev.error?.message ?? 'the answer failed');
      stats = ev.stats;
    }
  }
  return stats!;
}

/**
 * One provider's rows: a first load (imports the bundle), a timed second load, then one answer
 * per context. @returns no rows when the provider fell back (said on stdout).
 */
async function measure(ep: ExecutionProvider, model: string, cacheDir: string, maxContext: number, contexts: number[], decode: number, flagBandwidth: number | null): Promise<string[][]> {
  const memBefore = gpuMemoryUsed();
  // First load imports (and, for a GPU, builds its bundle); the second, timed, finds it cached.
  await (await Engine.load(model, { executionProvider: ep, cacheDir, maxContext })).dispose();
  const t0 = performance.now();
  const engine = await Engine.load(model, { executionProvider: ep, cacheDir, maxContext });
  const loadS = (performance.now() - t0) / 1000;
  const rows: string[][] = [];
  try {
    const info = engine.info;
    if (info.executionProvider !== ep) {
      console.log(`${ep}: not here (${info.fallbackReason}); skipped`);
      return rows;
    }
    const bandwidth = ep === 'cpu' ? flagBandwidth : (flagBandwidth ?? bandwidthFor(info.adapter));
    const c = engine.manifest.config;
    const kvBytesPerPosition = c.numLayers * 2 * c.numKvHeads * c.headDim * kvElementBytes(engine.manifest.dtype === 'float16' ? 'float16' : 'float32');
    for (const ctx of contexts) {
      const s = await answer(engine, ctx - decode, decode);
      const perToken = info.weights.residentBytes + kvBytesPerPosition * s.contextUsed;
      const bound = bandwidth ? (bandwidth * 1e9) / perToken : null;
      const mem = gpuMemoryUsed();
      rows.push([
        ep,
        info.backend,
        (info.adapter ?? '?').slice(0, 28),
        loadS.toFixed(2),
        String(s.contextUsed),
        s.ttftMs.toFixed(0),
        s.prefillTokensPerSec.toFixed(0),
        s.decodeTokensPerSec.toFixed(1),
        bound ? bound.toFixed(0) : '—',
        bound ? `${((100 * s.decodeTokensPerSec) / bound).toFixed(0)} %` : '—',
        ep === 'cpu' ? '—' : mem !== null && memBefore !== null ? `${((mem - memBefore) / 2 ** 20).toFixed(0)} MiB` : 'n/a',
      ]);
    }
  } finally {
    await engine.dispose();
  }
  return rows;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { ep: { type: 'string' }, model: { type: 'string' }, contexts: { type: 'string' }, decode: { type: 'string' }, bandwidth: { type: 'string' } },
  });
  const eps = (values.ep ?? 'cuda,webgpu,cpu').split(',').map((e) => parseExecutionProvider(e.trim())).filter((e): e is ExecutionProvider => e !== 'auto');
  const contexts = (values.contexts ?? '1024,8192').split(',').map(Number);
  const decode = Number(values.decode ?? 64);
  const flagBandwidth = values.bandwidth ? Number(values.bandwidth) : null;
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-gpu-'));
  try {
    let model = values.model;
    if (!model) {
      const layers = Number(process.env.BENCH_LAYERS ?? 28);
      const format = process.env.BENCH_FORMAT === 'Q8_0' ? 'Q8_0' : 'Q4_0';
      const config = qwen3_0_6bConfig(layers);
      model = path.join(tmp, `qwen3-0.6b-shapes-${format}.gguf`);
      console.error(`writing a random-weight ${format} GGUF with Qwen3-0.6B's shapes (${layers} layers)…`);
      writeModelGguf(model, config, qwen3TokenizerMetadata(config.vocabSize), randomWeights(7), format, format);
    }
    const cacheDir = path.join(tmp, 'cache');
    const maxContext = Math.max(...contexts) + decode + 16;
    console.log(`model ${path.basename(model)}; contexts ${contexts.join(', ')}; ${decode} decode tokens; greedy`);
    const head = ['EP', 'backend', 'GPU', 'load s', 'context', 'TTFT ms', 'prefill tok/s', 'decode tok/s', 'bound tok/s', 'of bound', 'GPU mem'];
    const rows: string[][] = [];
    for (const ep of eps) {
      try {
        rows.push(...(await measure(ep, model, cacheDir, maxContext, contexts, decode, flagBandwidth)));
      } catch (e) {
        console.log(`${ep}: failed (${String((e as Error).message).split('\n')[0]})`);
      }
    }
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (r: string[]) => r.map((x, i) => x.padStart(widths[i])).join('  ');
    console.log(line(head));
    for (const r of rows) console.log(line(r));
    console.log('bound: bandwidth ÷ (resident weights + the KV of the context, in the graph\'s dtype) per decoded token; "—": bandwidth unknown (--bandwidth GB/s)');
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
