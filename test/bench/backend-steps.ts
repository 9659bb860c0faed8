/**
 * The issue-6 table, for `npm run bench -- --json`: one decode step on each decoder backend (JS
 * API, native addon) with the KV cache at capacity 2,048, 8,192 and 32,768, holding 16 tokens
 * (attention reads almost nothing, so what remains is what the capacity costs) and full
 * (capacity − 1 tokens: the attention reads everything). Per row the median step (RoPE rows +
 * backend run) in ms and the RoPE part in µs, over `steps` steps after one warm-up step (the
 * warm-up is where the native addon grows its KV blocks to the capacity). Plus stories260K's
 * decode tokens/s through the whole engine on both backends, runs alternated.
 * Same process, same model, same run for both backends; the figures are medians on whatever
 * load the machine has (it is shared: compare rows of one run, not runs).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { BACKEND_KINDS, type BackendKind, type DecoderBackend } from '../../main/engine/model/backend.ts';
import { buildDecoderGraph, EXTERNAL_DATA_FILE } from '../../main/engine/model/decoder-graph.ts';
import { writeExternalData } from '../../main/engine/model/onnx-builder.ts';
import type { ModelConfig, ModelWeights } from '../../main/engine/model/manifest.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';

export interface BackendRow {
  backend: BackendKind;
  /** Tokens held before the step. */
  kvLength: number;
  capacity: number;
  /** Median decode step (RoPE rows + run), ms. */
  stepMs: number;
  /** Median RoPE part of it (`ensure` + `rows`), µs. */
  ropeUs: number;
}

export const CAPACITIES = [2048, 8192, 32768];
const TOKEN = [7];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x: number, digits: number) => Number(x.toFixed(digits));

/** Rows for every backend × capacity × {16 tokens, full}, on a graph built from config + weights. */
export async function backendRows(config: ModelConfig, weights: ModelWeights, steps: number): Promise<BackendRow[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-backends-'));
  const rows: BackendRow[] = [];
  try {
    const built = buildDecoderGraph(config, weights);
    const modelPath = path.join(dir, 'model.onnx');
    writeFileSync(modelPath, built.model);
    await writeExternalData(path.join(dir, EXTERNAL_DATA_FILE), built);
    for (const backend of BACKEND_KINDS) {
      const session = backend === 'native' ? await NativeDecoderSession.create(modelPath, config) : await DecoderSession.create(modelPath, config);
      try {
        for (const capacity of CAPACITIES) {
          const rope = new RopeCache(config.rope, capacity);
          rope.ensure(capacity);
          const kv = new KvCache({ numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: config.headDim, maxContext: capacity, hostBuffers: session.kvOnHost });
          kv.ensure(capacity);
          for (const kvLength of [16, capacity - 1]) {
            rows.push({ backend, kvLength, capacity, ...(await measureStep(session, rope, kv, kvLength, steps)) });
          }
        }
      } finally {
        await session.dispose();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** The same step at position kvLength, `steps` times after a warm-up; the values held do not change its cost. */
async function measureStep(session: DecoderBackend, rope: RopeCache, kv: KvCache, kvLength: number, steps: number) {
  const stepMs: number[] = [];
  const ropeUs: number[] = [];
  for (let s = 0; s <= steps; s++) {
    kv.rewindTo(0);
    kv.commit(kvLength);
    const t0 = performance.now();
    rope.ensure(kvLength + 1);
    const tables = rope.tables;
    const t1 = performance.now();
    await session.run(TOKEN, tables, kv);
    const t2 = performance.now();
    if (s > 0) {
      stepMs.push(t2 - t0);
      ropeUs.push((t1 - t0) * 1000);
    }
  }
  return { stepMs: round(median(stepMs), 3), ropeUs: round(median(ropeUs), 2) };
}

/** stories260K decode tokens/s through the engine, per backend: median of `runs` alternated runs. */
export async function storiesDecodeRates(modelPath: string, tokens: number, runs: number): Promise<{ backend: BackendKind; decodeTokensPerSec: number }[]> {
  const engines = await Promise.all(BACKEND_KINDS.map((backend) => Engine.load(modelPath, { backend })));
  try {
    const rates = new Map<BackendKind, number[]>(BACKEND_KINDS.map((b) => [b, []]));
    for (let r = 0; r < runs; r++) {
      for (const engine of engines) {
        engine.reset();
        const req = { prompt: 'Once upon a time', maxTokens: tokens, ignoreEos: true, sampler: { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 } };
        for await (const ev of engine.generate(req)) {
          if (ev.type === 'done') rates.get(engine.info.backend)!.push(ev.stats.decodeTokensPerSec);
        }
      }
    }
    return BACKEND_KINDS.map((backend) => ({ backend, decodeTokensPerSec: median(rates.get(backend)!) }));
  } finally {
    for (const e of engines) await e.dispose();
  }
}
