/**
 * `npm run bench:peer`: Ropewalk against llama.cpp (node-llama-cpp's prebuilt CPU binary) on the
 * same GGUF files, same threads, same run. The bench writes random-weight GGUFs with Qwen3-0.6B's
 * shapes (hidden 1024, 28 layers, 16/8 heads × 128, FFN 3072, vocabulary 151,936, tied
 * embedding; shapes decide speed, not values), one per format: F32, Q8_0 and Q4_0 (linear
 * weights and the token embedding in that format, norms F32, as llama.cpp's quantizer writes
 * them). For each it measures, per engine:
 *   - prefill tokens/s over a 128-token prompt;
 *   - decode tokens/s over 32 tokens after a 16-token prompt (greedy);
 * and prints Ropewalk ÷ llama.cpp, plus Ropewalk's bundle size on disk and resident weight bytes.
 * Env: BENCH_LAYERS (default 28), BENCH_FORMATS (default F32,Q8_0,Q4_0), BENCH_THREADS (default:
 * the machine's parallelism, which is also ONNX Runtime's default). It asserts nothing.
 * On a machine loaded by other jobs use BENCH_THREADS=1: llama.cpp's threads spin at barriers and
 * lose their time slices (measured: its Q8_0 decode 1.4 tok/s on 2 threads, 11.1 on 1, same run
 * conditions), which makes multi-thread ratios flatter Ropewalk.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { getLlama } from 'node-llama-cpp';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationStats } from '../../main/engine/generate/types.ts';
import { qwen3_0_6bConfig, qwen3TokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { poolWeights } from './pool-weights.ts';

const LAYERS = Number(process.env.BENCH_LAYERS ?? 28);
const FORMATS = (process.env.BENCH_FORMATS ?? 'F32,Q8_0,Q4_0').split(',') as ('F32' | 'Q8_0' | 'Q4_0')[];
const THREADS = Number(process.env.BENCH_THREADS ?? os.availableParallelism());
const PREFILL = 128;
const DECODE_PROMPT = 16;
const DECODE = 32;
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

const dirBytes = (dir: string) => readdirSync(dir).reduce((a, f) => a + statSync(path.join(dir, f)).size, 0);
const fmt = (x: number) => x.toFixed(1).padStart(7);

async function ropewalk(file: string, cacheDir: string) {
  const engine = await Engine.load(file, { cacheDir, maxContext: 512 });
  const run = async (ids: number[], maxTokens: number): Promise<GenerationStats> => {
    engine.reset();
    let stats: GenerationStats | null = null;
    for await (const ev of engine.generate({ prompt: promptText(ids.length), maxTokens, sampler: GREEDY, ignoreEos: true })) {
      if (ev.type === 'done') stats = ev.stats;
    }
    return stats!;
  };
  await run([], 4); // warm-up
  const prefill = (await run(new Array(PREFILL), 1)).prefillTokensPerSec;
  const decode = (await run(new Array(DECODE_PROMPT), DECODE)).decodeTokensPerSec;
  const info = { prefill, decode, bundleBytes: dirBytes(engine.info.bundleDir), weightBytes: engine.manifest.weights?.bytes ?? 0 };
  await engine.dispose();
  return info;
}

/** A prompt text of about `n` tokens ("word" repeated tokenizes as one token per " word"). */
function promptText(n: number): string {
  return Array.from({ length: Math.max(1, n) }, () => ' the').join('');
}

async function llamaCpp(file: string) {
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: file });
  const ctx = await model.createContext({ contextSize: 512, threads: THREADS, batchSize: 512 });
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
    return { n: ids.length, prefillMs: first - t0, decodeMs: end - first, decoded: count - 1 };
  };
  await timeIt(4, 4); // warm-up
  const p = await timeIt(PREFILL, 1);
  const d = await timeIt(DECODE_PROMPT, DECODE);
  await ctx.dispose();
  await model.dispose();
  await llama.dispose();
  return { prefill: (p.n / p.prefillMs) * 1000, decode: (d.decoded / d.decodeMs) * 1000 };
}

const tmp = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-peer-'));
try {
  console.log(`Qwen3-0.6B shapes, ${LAYERS} layers, random weights; ${THREADS} threads for both; prefill ${PREFILL} tokens, decode ${DECODE} after ${DECODE_PROMPT}`);
  console.log('format  engine      prefill tok/s  decode tok/s   bundle MB  weights MB');
  const config = qwen3_0_6bConfig(LAYERS);
  const tokenizer = qwen3TokenizerMetadata(config.vocabSize);
  for (const f of FORMATS) {
    const file = path.join(tmp, `qwen3-${f}.gguf`);
    writeModelGguf(file, config, tokenizer, poolWeights(), f, f);
    const ours = await ropewalk(file, path.join(tmp, 'cache'));
    const theirs = await llamaCpp(file);
    console.log(`${f.padEnd(6)}  ropewalk    ${fmt(ours.prefill)}        ${fmt(ours.decode)}       ${fmt(ours.bundleBytes / 2 ** 20)}    ${fmt(ours.weightBytes / 2 ** 20)}`);
    console.log(`${f.padEnd(6)}  llama.cpp   ${fmt(theirs.prefill)}        ${fmt(theirs.decode)}       ${fmt(statSync(file).size / 2 ** 20)}  (GGUF)`);
    console.log(`${f.padEnd(6)}  ratio       ${(ours.prefill / theirs.prefill).toFixed(2).padStart(6)}         ${(ours.decode / theirs.decode).toFixed(2).padStart(6)}`);
    rmSync(file);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
