/**
 * Where a decode step goes, by ONNX Runtime's profiler: one native-addon session of a bundle's
 * `model.onnx` with profiling on, `steps` decode steps at position `held` with the KV capacity at
 * `capacity` (the values held do not change a step's cost), then the profile's node events
 * (`cat: "Node"`, `name: "<node>_kernel_time"`, `args.op_name`; ONNX Runtime's
 * sequential_executor.cc) summed per op type and divided by the steps. Node time is far less
 * sensitive to a loaded machine than wall time is (a preempted thread stretches one node, not the
 * share of all of them), so compare shares and per-op sums of one run, not wall times of two.
 * A bench helper, not a test: it asserts nothing.
 */
import { readFile, rm } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { intraOpThreadsFor } from '../../main/engine/model/cpu-threads.ts';
import { profileFolder } from '../../main/engine/model/placement.ts';

/** One op type's time in a step: µs per step (summed over its nodes) and how many nodes ran. */
export interface OpShare {
  op: string;
  usPerStep: number;
  nodes: number;
}

/** A profiled decode: per-op node time, their sum, and the median wall time of a step (ms). */
export interface StepProfile {
  ops: OpShare[];
  nodeUsPerStep: number;
  wallMsPerStep: number;
}

/**
 * Node events of a parsed Chrome-trace profile, summed per op type over `steps` steps. With
 * `vocabSize`, the node whose output is the logits [1, vocabSize] (the classifier: MatMulNBits, MatMulQ8 or
 * Gemm) is its own row, `<op> (classifier)`, told by `args.output_type_shape`.
 */
export function opShares(events: unknown, steps: number, vocabSize?: number): OpShare[] {
  if (!Array.isArray(events)) throw new Error(`ONNX Runtime's profile is not a list of events (got ${typeof events})`);
  const byOp = new Map<string, { us: number; nodes: Set<string> }>();
  for (const e of events as { cat?: string; name?: string; dur?: number; args?: { op_name?: string; output_type_shape?: Record<string, number[]>[] } }[]) {
    if (e?.cat !== 'Node' || typeof e.name !== 'string' || !e.name.endsWith('_kernel_time')) continue;
    const shape = Object.values(e.args?.output_type_shape?.[0] ?? {})[0];
    const classifier = vocabSize !== undefined && shape?.length === 2 && shape[1] === vocabSize && /^(MatMulNBits|MatMulQ8|Gemm|MatMul|FusedMatMul)$/.test(String(e.args?.op_name));
    const op = `${String(e.args?.op_name ?? '?')}${classifier ? ' (classifier)' : ''}`;
    const slot = byOp.get(op) ?? byOp.set(op, { us: 0, nodes: new Set() }).get(op)!;
    slot.us += e.dur ?? 0;
    slot.nodes.add(e.name);
  }
  return [...byOp].map(([op, s]) => ({ op, usPerStep: s.us / steps, nodes: s.nodes.size })).sort((a, b) => b.usPerStep - a.usPerStep);
}

/**
 * Profiles `steps` decode steps (after one unprofiled-for-timing warm-up step, which is where the
 * KV blocks are allocated) of the native backend at `held` tokens and KV capacity `capacity`.
 * @throws Error when the native addon is unavailable.
 */
export async function profileDecode(modelPath: string, c: ModelConfig, held: number, capacity: number, steps: number, onProfile?: (file: string) => void): Promise<StepProfile> {
  const status = loadNativeAddon();
  if (!status.available) throw new Error(status.reason);
  const { dir, prefix } = await profileFolder();
  const logits = new Float32Array(c.vocabSize);
  const decoder = new status.addon.NativeDecoder(modelPath, {
    executionProvider: 'cpu', numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim,
    vocabSize: c.vocabSize, rotaryHalf: c.rope.rotaryDim / 2, logits, profilePrefix: prefix,
    intraOpThreads: intraOpThreadsFor(Number(process.env.BENCH_THREADS ?? 0)),
  });
  try {
    const rope = new RopeCache(c.rope, capacity);
    rope.ensure(held + 1);
    decoder.resize(capacity, 0);
    decoder.setRope(rope.tables.cos, rope.tables.sin, rope.tables.rows);
    const ids = Int32Array.of(7);
    const wall: number[] = [];
    for (let s = 0; s <= steps; s++) {
      const t = performance.now();
      await decoder.run(ids, held);
      wall.push(performance.now() - t);
    }
    const file = decoder.endProfiling();
    onProfile?.(file);
    const events = JSON.parse(await readFile(file, 'utf8'));
    // The first run is in the profile too; it is a decode step like the others once the blocks exist.
    const ops = opShares(events, steps + 1, c.vocabSize);
    return { ops, nodeUsPerStep: ops.reduce((a, o) => a + o.usPerStep, 0), wallMsPerStep: [...wall.slice(1)].sort((a, b) => a - b)[Math.floor(steps / 2)] };
  } finally {
    decoder.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `BENCH_SECTIONS=profile`: where a quantized decode step goes, per op type, on Qwen3-0.6B-shaped
 * GGUFs (BENCH_PROFILE_FORMATS, default Q8_0,Q4_0; random weights) at 16 and 1,072 tokens held
 * (KV capacity 2,048): µs per step and share of the step's node time, the top op types and the
 * rest summed. Shares, not wall times, are what a loaded machine leaves comparable.
 */
export async function profileSection(bundleOf: (format: 'Q8_0' | 'Q4_0') => Promise<{ modelPath: string; config: ModelConfig }>): Promise<{ head: string[]; rows: string[][] }> {
  const formats = (process.env.BENCH_PROFILE_FORMATS ?? 'Q8_0,Q4_0').split(',') as ('Q8_0' | 'Q4_0')[];
  const steps = Number(process.env.BENCH_STEPS ?? 6);
  const top = Number(process.env.BENCH_PROFILE_TOP ?? 8);
  const rows: string[][] = [];
  for (const format of formats) {
    const { modelPath, config } = await bundleOf(format);
    for (const held of [16, 1072]) {
      const p = await profileDecode(modelPath, config, held, 2048, steps);
      const shown = p.ops.slice(0, top);
      const rest = p.ops.slice(top);
      const restUs = rest.reduce((a, o) => a + o.usPerStep, 0);
      for (const o of shown) rows.push([format, String(held), o.op, String(o.nodes), `${(o.usPerStep / 1000).toFixed(2)} ms`, `${((100 * o.usPerStep) / p.nodeUsPerStep).toFixed(1)} %`]);
      rows.push([format, String(held), `${rest.length} other op types`, String(rest.reduce((a, o) => a + o.nodes, 0)), `${(restUs / 1000).toFixed(2)} ms`, `${((100 * restUs) / p.nodeUsPerStep).toFixed(1)} %`]);
      rows.push([format, String(held), 'all nodes (wall step)', String(p.ops.reduce((a, o) => a + o.nodes, 0)), `${(p.nodeUsPerStep / 1000).toFixed(2)} ms (${p.wallMsPerStep.toFixed(2)} ms)`, '100 %']);
    }
  }
  return { head: ['format', 'held', 'op type', 'nodes', 'per step', 'share'], rows };
}
