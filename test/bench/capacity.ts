/**
 * `BENCH_SECTIONS=capacity npm run bench`: does a decode step pay for KV capacity it does not use?
 * A GGUF with Qwen3-0.6B's shapes (synthetic-gguf.ts, random weights; Q8_0 by default,
 * BENCH_CAPACITY_FORMAT=Q4_0 for the other) is imported once, then ONE native-backend session
 * decodes with `held` tokens in its KV cache (1,072 by default: a 1,024-token prompt and 48
 * generated) at each capacity (1,100 / 2,048 / 8,192 by default), the capacities interleaved
 * round by round (the first step after a switch reallocates the blocks and is not counted), so
 * every capacity sees the same load. One session, not one per capacity: ONNX Runtime's pool
 * threads spin after a run, and a second session's spinning threads steal the cores of the first
 * (measured: three sessions interleaved read 165 / 148 / 136 ms, one session 40.0 / 40.1 /
 * 40.4 ms, same machine, same minute).
 * Per capacity: the median step (wall, ms) and its ratio to the smallest capacity's; and, from
 * ONNX Runtime's profiler (step-profile.ts), the attention's node time per step (GroupQueryAttention or DecodeAttention) and its
 * ratio, which a loaded machine disturbs far less than wall time. It asserts nothing.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { qwen3_0_6bConfig, qwen3TokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { poolWeights } from './pool-weights.ts';
import { profileDecode } from './step-profile.ts';

export interface CapacityRow {
  capacity: number;
  /** Median wall time of a decode step, ms. */
  stepMs: number;
  /** The attention's node time per step (GroupQueryAttention or DecodeAttention, all layers), ms, from the profiler. */
  attentionMs: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A bundle of a synthetic Qwen3-0.6B-shaped GGUF in `format`, imported into `root`: its model path and config. */
export async function qwen3Bundle(root: string, format: 'Q8_0' | 'Q4_0', layers: number, nativeKernels = true): Promise<{ modelPath: string; config: ModelConfig }> {
  mkdirSync(root, { recursive: true });
  const file = path.join(root, `qwen3-${format}.gguf`);
  const config = qwen3_0_6bConfig(layers);
  writeModelGguf(file, config, qwen3TokenizerMetadata(config.vocabSize), poolWeights(), format, format);
  const engine = await Engine.load(file, { cacheDir: path.join(root, 'cache'), nativeKernels });
  const out = { modelPath: path.join(engine.info.bundleDir, 'model.onnx'), config: engine.manifest.config };
  await engine.dispose();
  rmSync(file);
  return out;
}

/** Median decode step per capacity, capacities interleaved over `rounds` rounds of `steps` steps. */
async function wallSteps(modelPath: string, c: ModelConfig, held: number, capacities: number[], rounds: number, steps: number): Promise<Map<number, number>> {
  // As the engine opens a quantized bundle: its weights read into memory (2 MiB pages where Linux gives them).
  const session = await NativeDecoderSession.create(modelPath, c, 'cpu', 'float32', 0, { weightsInMemory: true });
  const times = new Map<number, number[]>(capacities.map((cap) => [cap, []]));
  try {
    const rope = new RopeCache(c.rope, Math.max(...capacities));
    rope.ensure(held + 1);
    const tables = rope.tables;
    const caches = capacities.map((cap) => {
      const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: cap, hostBuffers: false });
      kv.ensure(cap);
      return { cap, kv };
    });
    for (let r = 0; r < rounds; r++) {
      for (const { cap, kv } of caches) {
        for (let s = 0; s <= steps; s++) {
          kv.rewindTo(0);
          kv.commit(held);
          const t = performance.now();
          await session.run([7], tables, kv);
          if (s > 0) times.get(cap)!.push(performance.now() - t);
        }
      }
    }
  } finally {
    await session.dispose();
  }
  return new Map([...times].map(([cap, xs]) => [cap, median(xs)]));
}

/** The capacity rows (see the file comment), on a bundle from `qwen3Bundle`. */
export async function capacityRows(modelPath: string, c: ModelConfig, held: number, capacities: number[], rounds: number, steps: number): Promise<CapacityRow[]> {
  const wall = await wallSteps(modelPath, c, held, capacities, rounds, steps);
  const attention = new Map<number, number[]>(capacities.map((cap) => [cap, []]));
  for (let r = 0; r < Math.max(1, Math.floor(rounds / 2)); r++) {
    for (const cap of capacities) {
      const p = await profileDecode(modelPath, c, held, cap, steps);
      attention.get(cap)!.push(p.ops.filter((o) => o.op === 'GroupQueryAttention' || o.op === 'DecodeAttention').reduce((a, o) => a + o.usPerStep, 0) / 1000);
    }
  }
  return capacities.map((capacity) => ({ capacity, stepMs: wall.get(capacity)!, attentionMs: median(attention.get(capacity)!) }));
}

/** The bench section: prints the rows with their ratios to the smallest capacity. */
export async function capacitySection(): Promise<string[][]> {
  const format = (process.env.BENCH_CAPACITY_FORMAT ?? 'Q8_0') as 'Q8_0' | 'Q4_0';
  const layers = Number(process.env.BENCH_LAYERS ?? 28);
  const held = Number(process.env.BENCH_CAPACITY_HELD ?? 1072);
  const capacities = (process.env.BENCH_CAPACITIES ?? '1100,2048,8192').split(',').map(Number);
  const rounds = Number(process.env.BENCH_CAPACITY_ROUNDS ?? 4);
  const steps = Number(process.env.BENCH_STEPS ?? 6);
  const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-capacity-'));
  try {
    const { modelPath, config } = await qwen3Bundle(root, format, layers);
    const rows = await capacityRows(modelPath, config, held, capacities, rounds, steps);
    const [first] = rows;
    console.log(`\nKV capacity against a decode step: Qwen3-0.6B shapes (${layers} layers), ${format}, native backend, ${held} tokens held; ${rounds} interleaved rounds × ${steps} steps, medians (load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
    return rows.map((r) => [String(r.capacity), `${r.stepMs.toFixed(2)} ms`, `${(r.stepMs / first.stepMs).toFixed(3)}×`, `${r.attentionMs.toFixed(2)} ms`, `${(r.attentionMs / first.attentionMs).toFixed(3)}×`]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** Column heads of `capacitySection`'s rows. */
export const CAPACITY_HEAD = ['KV capacity', 'decode step', 'ratio', 'attention nodes / step', 'ratio'];
