/**
 * The float16 agreement of a model's CUDA graph: the CUDA float16 graph (rewritten, by default to
 * CUDA's arithmetic: cuda-arithmetic.ts) against the same CUDA graph in float32
 * (`CUDA_FLOAT32_REFERENCE`), both on the CPU EP and the JS backend (host KV of the graph's dtype),
 * teacher-forced along the float32 graph's greedy path after a prompt. Used by
 * test/integration/graph-float16.test.ts (the bound) and test/bench/float16-parts.ts (which part
 * of the graph costs what); `engineAgreement` compares two loaded engines the same way (the CPU's
 * float16 KV cache against float32 KV: kv-float16-cpu.test.ts, attention-sinks.test.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { CUDA_FLOAT32_REFERENCE, graphTarget, type GraphTarget } from '../../main/engine/model/graph-target.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';
import { withCudaArithmetic } from './cuda-arithmetic.ts';
import { argmax } from './onnx-runner.ts';

export interface Agreement {
  /** Share of steps whose float16 top-1 token is the float32 one, 0..1. */
  agree: number;
  /** Largest |Δ log p| (natural log) over the float32 top-8 of every step. */
  maxDiff: number;
  /** Where `maxDiff` was: step, rank in the float32 top-8 (0 = top-1), its float32 log p. */
  worst: { step: number; rank: number; logProb: number };
  /** Dtype of each graph's KV cache as its bundle says ('float32', 'float16'). */
  dtypes: { reference: string; float16: string };
}

export interface AgreementOptions {
  steps?: number;
  prompt?: string;
  /** The float16 graph's model bytes as they run (default `withCudaArithmetic`). */
  rewrite?: (model: Uint8Array) => Uint8Array;
}

/** log softmax of logits, in float64. */
export function logSoftmax(l: Float32Array): Float64Array {
  let m = -Infinity;
  for (const x of l) m = Math.max(m, x);
  let s = 0;
  for (const x of l) s += Math.exp(x - m);
  const lse = m + Math.log(s);
  return Float64Array.from(l, (x) => x - lse);
}

/**
 * One target's bundle of `source` stepped on the CPU EP; `rewrite` replaces its graph (written as
 * `rewritten.onnx` beside the bundle's data file, which it reads).
 */
async function open(source: string, cacheDir: string, target: GraphTarget, rewrite?: (model: Uint8Array) => Uint8Array) {
  const bundle = await resolveModel(source, cacheDir, undefined, { target });
  const c = bundle.manifest.config;
  let modelPath = bundle.modelPath;
  if (rewrite) {
    modelPath = path.join(path.dirname(bundle.modelPath), 'rewritten.onnx');
    writeFileSync(modelPath, rewrite(readFileSync(bundle.modelPath)));
  }
  const session = await DecoderSession.create(modelPath, c, 'cpu');
  const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: c.trainedContext, hostBuffers: true, dtype: bundle.manifest.dtype === 'float16' ? 'float16' : 'float32' });
  const rope = new RopeCache(c.rope, c.trainedContext, c.localRope);
  return {
    dtype: bundle.manifest.dtype,
    session,
    /** Runs `ids` at the next positions; the last position's logits (a copy). */
    async run(ids: number[]): Promise<Float32Array> {
      const at = kv.length;
      rope.ensure(at + ids.length);
      kv.ensure(at + ids.length);
      const logits = (await session.run(ids, rope.tables, kv)).slice();
      kv.commit(ids.length);
      return logits;
    },
  };
}

/**
 * The agreement of `source`'s CUDA float16 graph with its float32 reference (see the file
 * comment), `steps` (default 64) teacher-forced steps after `prompt` (default 'Once upon a time').
 * Bundles are built into `cacheDir`.
 */
export async function float16Agreement(source: string, cacheDir: string, opts: AgreementOptions = {}): Promise<Agreement> {
  const steps = opts.steps ?? 64;
  const engine = await Engine.load(source, { cacheDir }); // only for the prompt's token ids
  const ids = engine.encodeRequest({ prompt: opts.prompt ?? 'Once upon a time' });
  await engine.dispose();
  const f32 = await open(source, cacheDir, CUDA_FLOAT32_REFERENCE);
  const f16 = await open(source, cacheDir, graphTarget('cuda'), opts.rewrite ?? withCudaArithmetic);
  try {
    const r = await teacherForced((x) => f32.run(x), (x) => f16.run(x), ids, steps);
    return { agree: r.agree, maxDiff: r.maxDiff, worst: r.worst, dtypes: { reference: f32.dtype, float16: f16.dtype } };
  } finally {
    await f32.session.dispose();
    await f16.session.dispose();
  }
}

/**
 * Two engines teacher-forced along `reference`'s greedy path for `steps` steps after `prompt`
 * (token ids), both reset first: `teacherForced`'s measures.
 */
export async function engineAgreement(reference: Engine, underTest: Engine, prompt: number[], steps: number): Promise<{ agree: number; maxDiff: number; meanDiff: number }> {
  reference.reset();
  underTest.reset();
  const copy = (e: Engine) => async (ids: number[]) => (await e.prefill(ids)).slice();
  return teacherForced(copy(reference), copy(underTest), prompt, steps);
}

/**
 * Two runners (ids at the next positions → the last position's logits, a copy) teacher-forced
 * along the first's greedy path for `steps` steps after `prompt`: the share of steps whose top-1
 * token is the first's, the largest |Δ log p| over the first's top-8 and where it was, and the
 * mean over steps of each step's largest.
 */
async function teacherForced(runA: (ids: number[]) => Promise<Float32Array>, runB: (ids: number[]) => Promise<Float32Array>, prompt: number[], steps: number) {
  let a = await runA(prompt);
  let b = await runB(prompt);
  let agree = 0;
  let maxDiff = 0;
  let sum = 0;
  let worst = { step: -1, rank: -1, logProb: 0 };
  for (let step = 0; step < steps; step++) {
    const next = argmax(a);
    if (argmax(b) === next) agree++;
    const la = logSoftmax(a);
    const lb = logSoftmax(b);
    let stepMax = 0;
    [...a.keys()].sort((i, j) => a[j] - a[i]).slice(0, 8).forEach((i, rank) => {
      const d = Math.abs(la[i] - lb[i]);
      stepMax = Math.max(stepMax, d);
      if (d > maxDiff) [maxDiff, worst] = [d, { step, rank, logProb: la[i] }];
    });
    sum += stepMax;
    a = await runA([next]);
    b = await runB([next]);
  }
  return { agree: agree / steps, maxDiff, meanDiff: sum / steps, worst };
}
