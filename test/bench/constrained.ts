/**
 * Constrained decoding's cost per token: decode ms/token of the same engine (a synthetic Qwen3
 * checkpoint with the real 151,669-token tokenizer, so the mask spans a real vocabulary; random
 * weights, tiny layers, so the mask's share is as large as it gets) without a response_format
 * and with a JSON Schema whose output never ends early (an array of short strings), sampled at
 * temperature 1. Also the first constrained request's one-time setup (token bytes + trie).
 * `npx tsx test/bench/constrained.ts` alone, or `BENCH_SECTIONS=json npm run bench`. A
 * benchmark, not a test: it asserts nothing. Medians of alternated runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationRequest } from '../../main/engine/generate/types.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const TOKENS = 64;
const RUNS = 3;
const SCHEMA = { type: 'array', items: { type: 'string', maxLength: 12 } };

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One generation's decode ms per token (after the first token, as the stats count it). */
async function msPerToken(engine: Engine, req: GenerationRequest): Promise<number> {
  for await (const ev of engine.generate(req)) if (ev.type === 'done') return ev.stats.decodeTokensPerSec > 0 ? 1000 / ev.stats.decodeTokensPerSec : NaN;
  return NaN;
}

/** Rows [measure, value] for the bench table: ms/token without and with a schema, and the one-time setup. */
export async function constrainedRows(model: string, cacheDir: string): Promise<string[][]> {
  const engine = await Engine.load(model, { cacheDir, maxContext: 1024 });
  try {
    const base: GenerationRequest = { prompt: 'A list:', maxTokens: TOKENS, ignoreEos: true, sampler: { temperature: 1, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, seed: 1 } };
    const t0 = performance.now();
    engine.tokenizer.tokenBytes();
    await msPerToken(engine, { ...base, maxTokens: 2, responseFormat: { type: 'json_schema', schema: SCHEMA } }); // builds the trie
    const setupMs = performance.now() - t0;
    const plain: number[] = [];
    const constrained: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      plain.push(await msPerToken(engine, base));
      constrained.push(await msPerToken(engine, { ...base, responseFormat: { type: 'json_schema', schema: SCHEMA } }));
    }
    const [p, c] = [median(plain), median(constrained)];
    return [
      ['decode, no response_format (ms/token)', p.toFixed(2)],
      ['decode, JSON Schema (ms/token)', c.toFixed(2)],
      ['constraint overhead (ms/token)', (c - p).toFixed(2)],
      ['first constrained request: token bytes + trie (ms, once per model)', setupMs.toFixed(0)],
    ];
  } finally {
    await engine.dispose();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-json-'));
  try {
    const model = path.join(root, 'qwen3');
    await writeSyntheticCheckpoint(model, { family: 'qwen3', seed: 1 });
    const rows = await constrainedRows(model, path.join(root, 'cache'));
    console.log(`constrained decoding, synthetic Qwen3 (vocab 151,669), ${TOKENS} tokens, ${RUNS} alternated runs, medians (load average ${os.loadavg()[0].toFixed(1)})`);
    for (const [k, v] of rows) console.log(`  ${k.padEnd(70)} ${v}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
