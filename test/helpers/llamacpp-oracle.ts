/**
 * llama.cpp as a test oracle on GGUF files, and Ropewalk's side of the comparison: greedy tokens
 * from node-llama-cpp's prebuilt CPU binary (float32 KV cache, flash attention off, one thread)
 * and from Ropewalk's Engine, the ten story prompts, and the first-divergence count
 * (see test/integration/gguf-llamacpp.test.ts for why a mean over prompts). Also the independent
 * llama.cpp tools from Debian (`../shared/tools/debian-llamacpp.sh`) for quantizing fixtures.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { Llama } from 'node-llama-cpp';
import { Engine, type EngineOptions } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { PROJECT_ROOT } from './paths.ts';

export const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

/** The ten prompts (fixed before the agreement was measured on them). */
export const PROMPTS = [
  'Once upon a time', 'Lily and Tom went to the park', 'The little dog was sad', 'One day, a girl named Sue',
  'Tim had a big red ball', 'There was a cat who liked to', 'Mom said', 'The sun was shining and',
  'Ben wanted to fly', 'A bird sat on a tree',
];

/**
 * llama.cpp's greedy tokens after each of `prompts` (token ids), with a float32 KV cache (or
 * `kvType` F16, against Ropewalk's float16 one) and flash attention off: its default (F16 cache,
 * flash attention) rounds Q, K and V to half precision, which Ropewalk's float32 cache does not.
 * One thread: llama.cpp's spinning threads crawl on a loaded 2-core machine.
 */
export async function llamaCppGreedy(llama: Llama, file: string, prompts: number[][], n: number, kvType: 'F32' | 'F16' = 'F32'): Promise<number[][]> {
  const model = await llama.loadModel({ modelPath: file });
  try {
    const all: number[][] = [];
    for (const prompt of prompts) {
      const ctx = await model.createContext({
        contextSize: 512, threads: 1, flashAttention: false, experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType,
      });
      const out: number[] = [];
      for await (const t of ctx.getSequence().evaluate(prompt as never, { temperature: 0 })) {
        out.push(t as number);
        if (out.length >= n) break;
      }
      await ctx.dispose();
      all.push(out);
    }
    return all;
  } finally {
    await model.dispose();
  }
}

export type Done = Extract<GenerationEvent, { type: 'done' }>;

/**
 * Ropewalk's greedy answers to `prompts` from one load of `file` (bundles cached under `cacheDir`),
 * with a float32 KV cache unless `opts` asks otherwise: the cache `llamaCppGreedy` gives llama.cpp
 * by default (like against like; the app's default is float16, measured against llama.cpp's F16 cache).
 */
export async function ropewalkGreedy(file: string, prompts: string[], n: number, cacheDir: string, opts: Pick<EngineOptions, 'kvCacheDtype'> = {}): Promise<Done[]> {
  const engine = await Engine.load(file, { cacheDir, kvCacheDtype: 'float32', ...opts });
  try {
    const all: Done[] = [];
    for (const prompt of prompts) {
      let done: Done | null = null;
      for await (const ev of engine.generate({ prompt, maxTokens: n, sampler: GREEDY, ignoreEos: true })) {
        if (ev.type === 'done') done = ev;
      }
      assert.ok(done && done.tokens.length === n, `generation ended early: ${JSON.stringify(done)}`);
      all.push(done);
    }
    return all;
  } finally {
    await engine.dispose();
  }
}

/** max over llama.cpp's next 7 most likely tokens of |(ours[t] − ours[top]) − (log p_t − log p_top)|. */
export function logProbDistance(logits: Float32Array, probs: [number, number][]): number {
  const [top, pTop] = probs[0];
  return probs.slice(1, 8).reduce((d, [tok, p]) => Math.max(d, Math.abs(logits[tok] - logits[top] - (Math.log(p) - Math.log(pTop)))), 0);
}

/**
 * Teacher-forced along llama.cpp's `steps` greedy tokens after BOS + `text`: at each step the
 * `logProbDistance` of Ropewalk's logits (prefill, then one decode step per llama.cpp token) from
 * llama.cpp's 8 most likely tokens, both on `file` (both with a float32 KV cache; llama.cpp's flash attention off).
 */
export async function teacherForcedDistances(llama: Llama, file: string, text: string, steps: number, cacheDir: string): Promise<number[]> {
  const model = await llama.loadModel({ modelPath: file });
  const ctx = await model.createContext({
    contextSize: 512, threads: 1, flashAttention: false, experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  });
  const prompt = [model.tokens.bos as number, ...(model.tokenize(text) as number[])];
  const path: { token: number; probs: [number, number][] }[] = [];
  for await (const out of ctx.getSequence().evaluateWithMetadata(prompt as never, { probabilities: true }, { temperature: 0 })) {
    path.push({ token: out.token as number, probs: [...out.probabilities.entries()].slice(0, 8) as [number, number][] });
    if (path.length >= steps) break;
  }
  await ctx.dispose();
  await model.dispose();
  const engine = await Engine.load(file, { cacheDir, kvCacheDtype: 'float32' });
  const distances: number[] = [];
  try {
    let logits = await engine.prefill(prompt);
    for (const step of path) {
      distances.push(logProbDistance(logits, step.probs));
      logits = await engine.decodeStep(step.token);
    }
  } finally {
    await engine.dispose();
  }
  return distances;
}

/** Tokens until the first difference (n when none). */
export function agreement(ours: number[], theirs: number[], n: number): number {
  const firstDiff = ours.findIndex((tok, i) => tok !== theirs[i]);
  return firstDiff === -1 ? n : firstDiff;
}

/**
 * Greedy agreement with llama.cpp over PROMPTS (after checking both tokenize each prompt alike:
 * BOS then llama.cpp's ids), and, on the prompt where the two part earliest, the teacher-forced
 * log-probability distances over `steps` tokens along llama.cpp's.
 */
export async function againstLlamaCpp(llama: Llama, file: string, n: number, steps: number, cacheDir: string): Promise<{ agree: number[]; mean: number; worstPrompt: string; distances: number[] }> {
  const ours = await ropewalkGreedy(file, PROMPTS, n, cacheDir);
  const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
  PROMPTS.forEach((p, i) => assert.deepEqual(ours[i].promptTokens, [model.tokens.bos, ...model.tokenize(p)], p));
  await model.dispose();
  const theirs = await llamaCppGreedy(llama, file, ours.map((d) => d.promptTokens), n);
  const agree = ours.map((d, i) => agreement(d.tokens, theirs[i], n));
  const mean = agree.reduce((a, b) => a + b, 0) / agree.length;
  const worstPrompt = PROMPTS[agree.indexOf(Math.min(...agree))];
  const distances = await teacherForcedDistances(llama, file, worstPrompt, steps, cacheDir);
  return { agree, mean, worstPrompt, distances };
}

/**
 * The wrapper that runs Debian's llama.cpp tools (`WRAPPER llama-quantize …`), set up on first
 * use by `../shared/tools/debian-llamacpp.sh` in its default scratch folder (a few minutes, from
 * Debian's archive; later calls return at once).
 */
export function debianLlamaCpp(): string {
  const script = path.resolve(PROJECT_ROOT, '..', 'shared', 'tools', 'debian-llamacpp.sh');
  return execFileSync('bash', [script], { encoding: 'utf8' }).trim().split('\n').pop()!;
}
