/**
 * `npm run bench`: decode-step costs at KV lengths 256, 2K, 8K and 32K on a synthetic model with
 * real attention shapes (Qwen3-0.6B's heads: 16 query heads, 8 KV heads, head dim 128, hidden
 * 1024; 2 layers and a 4K vocabulary so it fits these machines), real ONNX Runtime, CPU EP.
 *
 * For each length it prints, next to a baseline measured in the same run:
 *   - RoPE path per step: ours (`ensure(P+1)` + `rows(P, 1)`, warm) vs the baseline that
 *     recomputes the cos/sin rows [0, P+1) every step (the `setdefault` bug), as a ratio;
 *   - the whole decode step (session.run + caches) and decode tokens/s;
 *   - what the KV capacity costs a step: the same capacity holding only 16 tokens (attention
 *     reads almost nothing), and the step with present_* bound to the past buffers ('in-place')
 *     instead of fetching only the new rows ('rows', the default): onnxruntime-node copies every
 *     fetched output into a fresh buffer, so bound present_* move the whole
 *     [1, Hkv, capacity, hd] buffers each step, which V8 then collects.
 * Figures are medians over repeated steps. It is a benchmark, not a test: it asserts nothing.
 * `-- --ep webgpu` (or cuda) adds that provider's rows beside the CPU's in the decode-step table
 * (on lavapipe they check the timing code, not GPU speed; `BENCH_LENGTHS=256,2048` keeps it short).
 */
import { isolationCost } from './engine-isolation.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFile, spawn } from 'node:child_process';
import { mkdir, readFile, stat, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { constants, performance, PerformanceObserver } from 'node:perf_hooks';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { inverseFrequencies } from '../../main/engine/cache/inv-freq.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { buildDecoderGraph, EXTERNAL_DATA_FILE } from '../../main/engine/model/decoder-graph.ts';
import { writeExternalData } from '../../main/engine/model/onnx-builder.ts';
import { layerWeight, type ModelConfig, type ModelWeights } from '../../main/engine/model/manifest.ts';
import { DecoderSession, type KvOutputs } from '../../main/engine/model/js-session.ts';
import type { ExecutionProvider } from '../../main/engine/model/backend.ts';
import { parseExecutionProvider } from '../../main/engine/model/ep-choice.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { hashFiles } from '../../main/engine/model/content-hash.ts';
import { expectedWeights, hfSourceFiles, parseHfConfig } from '../../main/engine/model/import-hf.ts';
import { RACY_WINDOW_MS } from '../../main/engine/model/source-fingerprint.ts';
import { writeSyntheticCheckpoint, type SyntheticSpec } from '../helpers/synthetic-hf.ts';
import { defaultModelPath } from '../../main/common/default-model.ts';
import { backendRows, storiesDecodeRates } from './backend-steps.ts';
import { constrainedRows } from './constrained.ts';
import { CAPACITY_HEAD, capacitySection } from './capacity.ts';
import { profileSection } from './step-profile.ts';
import { qwen3Bundle } from './capacity.ts';
import { KV_STEP_HEAD, KV_STORAGE_HEAD, kvStepRows, kvStorageSection } from './kv-dtype.ts';

const LENGTHS = (process.env.BENCH_LENGTHS ?? '256,2048,8192,32768').split(',').map(Number);
const STEPS = Number(process.env.BENCH_STEPS ?? 12);
const MAX_CONTEXT = Math.max(...LENGTHS) + STEPS + 8;
/** The decode-step table's providers: the CPU, and `--ep X` beside it. */
const EP_FLAG = process.argv.indexOf('--ep');
const BENCH_EPS: ExecutionProvider[] = ['cpu', ...(EP_FLAG > 0 ? [parseExecutionProvider(process.argv[EP_FLAG + 1])] : [])].filter(
  (e, i, all): e is ExecutionProvider => e !== 'auto' && all.indexOf(e) === i,
);

const config: ModelConfig = {
  architecture: 'qwen3',
  hiddenSize: 1024,
  intermediateSize: 3072,
  numLayers: 2,
  numHeads: 16,
  numKvHeads: 8,
  headDim: 128,
  vocabSize: 4096,
  rmsNormEps: 1e-6,
  tiedEmbeddings: true,
  attentionBias: false,
  qkNorm: true,
  rope: { theta: 1_000_000, rotaryDim: 128, layout: 'half' },
  trainedContext: 40960,
};

function randomWeights(c: ModelConfig): ModelWeights {
  let s = 12345;
  const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 0.04;
  const t = (shape: number[], fill?: number) => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = fill ?? rnd();
    return { shape, data };
  };
  const w: ModelWeights = new Map();
  const D = c.hiddenSize;
  w.set('model.embed_tokens.weight', t([c.vocabSize, D]));
  w.set('model.norm.weight', t([D], 1));
  for (let i = 0; i < c.numLayers; i++) {
    const L = (n: string) => layerWeight(i, n);
    w.set(L('input_layernorm.weight'), t([D], 1));
    w.set(L('post_attention_layernorm.weight'), t([D], 1));
    w.set(L('self_attn.q_proj.weight'), t([c.numHeads * c.headDim, D]));
    w.set(L('self_attn.k_proj.weight'), t([c.numKvHeads * c.headDim, D]));
    w.set(L('self_attn.v_proj.weight'), t([c.numKvHeads * c.headDim, D]));
    w.set(L('self_attn.o_proj.weight'), t([D, c.numHeads * c.headDim]));
    w.set(L('self_attn.q_norm.weight'), t([c.headDim], 1));
    w.set(L('self_attn.k_norm.weight'), t([c.headDim], 1));
    w.set(L('mlp.gate_proj.weight'), t([c.intermediateSize, D]));
    w.set(L('mlp.up_proj.weight'), t([c.intermediateSize, D]));
    w.set(L('mlp.down_proj.weight'), t([D, c.intermediateSize]));
  }
  return w;
}

/** The baseline RoPE path: recompute rows [0, end) every step, as the `setdefault` bug did. */
function recomputeTable(invFreq: Float64Array, end: number): { cos: Float32Array; sin: Float32Array } {
  const h = invFreq.length;
  const cos = new Float32Array(end * h);
  const sin = new Float32Array(end * h);
  for (let p = 0; p < end; p++) {
    for (let i = 0; i < h; i++) {
      const a = p * invFreq[i];
      cos[p * h + i] = Math.cos(a);
      sin[p * h + i] = Math.sin(a);
    }
  }
  return { cos, sin };
}

/**
 * The Hugging Face folder the loop, start and import sections use: Qwen3's tokenizer, full
 * vocabulary (151,669) and attention shapes (16 query / 8 KV heads × 128), narrowed elsewhere
 * (hidden 512, 8 layers, tied embeddings; about 480 MB float32, the embedding 310 MB of it) so it
 * imports in seconds here.
 */
const BENCH_HF_MODEL: SyntheticSpec = { family: 'qwen3', hidden: 512, heads: 16, kvHeads: 8, headDim: 128, inter: 1536, layers: 8, tied: true };

/**
 * `BENCH_IMPORT_MODEL=qwen3-0.6b`: the import section on a folder with all of Qwen3-0.6B's shapes
 * instead (hidden 1024, 28 layers, intermediate 3072, tied; 2.2 GiB float32, the model),
 * written for that section alone; the before-this-work baseline then needs about 4.2 GiB.
 */
const QWEN3_06B: SyntheticSpec = { family: 'qwen3', hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, inter: 3072, layers: 28, tied: true };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (ms: number) => (ms < 0.01 ? `${(ms * 1000).toFixed(2)} µs` : `${ms.toFixed(3)} ms`);

async function kvSteps(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-'));
  try {
    const built = buildDecoderGraph(config, randomWeights(config));
    writeFileSync(path.join(dir, 'model.onnx'), built.model);
    await writeExternalData(path.join(dir, EXTERNAL_DATA_FILE), built);
    const { invFreq } = inverseFrequencies(config.rope, MAX_CONTEXT);
    console.log(`synthetic ${config.architecture}: ${config.numLayers} layers, ${config.numHeads}/${config.numKvHeads} heads × ${config.headDim}, hidden ${config.hiddenSize}, vocab ${config.vocabSize}; ${STEPS} steps per length, medians\n`);
    const rows: string[][] = [];
    for (const ep of BENCH_EPS) {
      const session = await DecoderSession.create(path.join(dir, 'model.onnx'), config, ep);
      if (session.info.executionProvider !== ep) console.log(`${ep}: ${session.info.fallbackReason}`);
      for (const L of LENGTHS) {
        const rope = new RopeCache(config.rope, MAX_CONTEXT);
        const kv = new KvCache({ numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: config.headDim, maxContext: MAX_CONTEXT });
        // Pretend L tokens are cached: the values do not change the cost of a step.
        kv.ensure(L);
        kv.commit(L);
        rope.ensure(L);
        const ours: number[] = [];
        const baseline: number[] = [];
        const step: number[] = [];
        const bound: number[] = [];
        const shortKv: number[] = [];
        for (let s = 0; s < STEPS + 2; s++) {
          const P = kv.length;
          let t = performance.now();
          rope.ensure(P + 1);
          const tables = rope.tables;
          const tOurs = performance.now() - t;
          t = performance.now();
          const table = recomputeTable(invFreq, P + 1);
          const tBase = performance.now() - t;
          if (table.cos.length === 0) throw new Error('unreachable');
          t = performance.now();
          kv.ensure(P + 1);
          await session.run([7], tables, kv);
          kv.commit(1);
          const tStep = performance.now() - t + tOurs;
          // The same step with present_* bound to the past buffers.
          kv.rewindTo(P);
          t = performance.now();
          await session.run([7], tables, kv, 'in-place');
          const tBound = performance.now() - t + tOurs;
          kv.commit(1);
          if (s >= 2) {
            ours.push(tOurs);
            baseline.push(tBase);
            step.push(tStep);
            bound.push(tBound);
          }
        }
        // Same buffers, only 16 tokens held: what the step costs without the attention reads.
        for (let s = 0; s < STEPS; s++) {
          kv.rewindTo(16);
          const t = performance.now();
          await session.run([7], rope.tables, kv);
          shortKv.push(performance.now() - t);
        }
        const [o, b, st, bd, sh] = [median(ours), median(baseline), median(step), median(bound), median(shortKv)];
        rows.push([
          session.info.executionProvider,
          String(L),
          fmt(o),
          fmt(b),
          `${(b / Math.max(o, 1e-6)).toFixed(0)}×`,
          fmt(st),
          (1000 / st).toFixed(1),
          fmt(sh),
          fmt(bd),
          `${(bd / st).toFixed(2)}×`,
          String(kv.capacity),
          `${(kv.stats.bytes / 2 ** 20).toFixed(0)} MiB`,
        ]);
      }
      await session.dispose();
    }
    const head = ['EP', 'KV len', 'RoPE ours', 'RoPE recompute', 'ratio', 'decode step', 'tok/s', 'same cap, 16 tok', 'present bound', 'bound/rows', 'KV cap', 'KV bytes'];
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (r: string[]) => r.map((c, i) => c.padStart(widths[i])).join('  ');
    console.log(line(head));
    for (const r of rows) console.log(line(r));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `--json`: one JSON object, { rows: [{ backend, kvLength, capacity, stepMs, ropeUs }], stories260K:
 * [{ backend, decodeTokensPerSec }] } (backend-steps.ts), nothing else on stdout.
 */
async function backendsJson(): Promise<void> {
  const steps = Number(process.env.BENCH_STEPS ?? 5);
  const rows = await backendRows(config, randomWeights(config), steps);
  const stories260K = await storiesDecodeRates(defaultModelPath(), 200, 3);
  process.stdout.write(`${JSON.stringify({ rows, stories260K })}\n`);
}


/** GC entries seen by a PerformanceObserver, with their start times (ms, performance clock). */
function watchGc(): { between(t0: number, t1: number): { all: number; major: number; ms: number }; stop(): void } {
  const seen: { t: number; kind: number; ms: number }[] = [];
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) seen.push({ t: e.startTime, kind: (e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0, ms: e.duration });
  });
  obs.observe({ entryTypes: ['gc'] });
  return {
    between(t0, t1) {
      const xs = seen.filter((g) => g.t >= t0 && g.t < t1);
      return { all: xs.length, major: xs.filter((g) => g.kind === constants.NODE_PERFORMANCE_GC_MAJOR).length, ms: xs.reduce((a, g) => a + g.ms, 0) };
    },
    stop: () => obs.disconnect(),
  };
}

/** Lets pending PerformanceObserver callbacks run. */
const flushObservers = () => new Promise<void>((r) => setTimeout(r, 20));

/**
 * The decode loop against the session run it wraps: one Engine (JS backend) on a synthetic Qwen3 folder (real
 * Qwen3 tokenizer and vocabulary, so logits are [151,669]) after a prompt of BENCH_LOOP_PROMPT
 * tokens, and a second `DecoderSession` of the same bundle in the same process (same heap) run in
 * a plain loop at the same context and KV capacity. The two are interleaved, one plain step
 * between two engine steps, so both see the same load on a shared machine: an engine step is
 * the interval between its token events minus the plain step run inside it (it covers the
 * sampler, the detokenizer, the event and the forward). GCs per step from PerformanceObserver
 * 'gc' entries, counted where they start. Then, for the record, the same plain loop with present_*
 * bound to the past buffers ('in-place', what both loops did before 'rows'): onnxruntime-node
 * copies every fetched output into a fresh buffer, so that moves the whole KV cache each step.
 */
async function loopVsPlain(model: string, cacheDir: string): Promise<void> {
  const PROMPT = Number(process.env.BENCH_LOOP_PROMPT ?? 1024);
  // The JS backend's engine: the plain loop below is onnxruntime-node's DecoderSession over the
  // engine's own bundle, which the native backend's graph (ropewalk ops) is not.
  const engine = await Engine.load(model, { cacheDir, maxContext: 4 * PROMPT, backend: 'js' });
  const c = engine.manifest.config;
  const session = await DecoderSession.create(path.join(engine.info.bundleDir, 'model.onnx'), c, 'cpu');
  const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: engine.maxContext });
  const rope = new RopeCache(c.rope, engine.maxContext);
  const gc = watchGc();
  type Window = [number, number];
  const engineSteps: number[] = [];
  const plainSteps: number[] = [];
  const engineWindows: Window[] = [];
  const plainWindows: Window[] = [];
  const boundSteps: number[] = [];
  const boundWindows: Window[] = [];
  const plainStep = async (mode: KvOutputs = 'rows'): Promise<void> => {
    const t = performance.now();
    const P = kv.length;
    rope.ensure(P + 1);
    kv.ensure(P + 1);
    await session.run([7], rope.tables, kv, mode);
    kv.commit(1);
    const t1 = performance.now();
    (mode === 'rows' ? plainSteps : boundSteps).push(t1 - t);
    (mode === 'rows' ? plainWindows : boundWindows).push([t, t1]);
  };
  try {
    const sampler = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repetitionPenalty: 1.1, seed: 1 };
    const ids = engine.tokenizer.encode('the rope walk is long '.repeat(Math.ceil(PROMPT / 5)), { addBos: false });
    const prompt = engine.tokenizer.decode(ids.slice(0, PROMPT));
    let tokens = 0;
    let resumed = 0;
    for await (const ev of engine.generate({ prompt, maxTokens: STEPS + 3, sampler, ignoreEos: true })) {
      if (ev.type !== 'token' || ev.id < 0) continue;
      const now = performance.now();
      // From the third token on: the first came with prefill, the second with the KV growth.
      if (++tokens === 2) {
        kv.ensure(engine.kv.capacity);
        kv.commit(engine.kv.length);
      }
      if (tokens > 2) {
        engineSteps.push(now - resumed);
        engineWindows.push([resumed, now]);
      }
      if (tokens >= 2 && tokens < STEPS + 2) await plainStep();
      resumed = performance.now();
    }
    kv.rewindTo(kv.length - plainSteps.length);
    for (let s = 0; s < plainSteps.length; s++) await plainStep('in-place');
    await flushObservers();
    const gcs = (ws: Window[]) => {
      const sum = { all: 0, major: 0, ms: 0 };
      for (const [a, b] of ws) {
        const g = gc.between(a, b);
        sum.all += g.all;
        sum.major += g.major;
        sum.ms += g.ms;
      }
      return `${(sum.all / ws.length).toFixed(1)} (${(sum.major / ws.length).toFixed(1)} major, ${fmt(sum.ms / ws.length)})`;
    };
    const [e, pl] = [median(engineSteps), median(plainSteps)];
    const perStep = (ws: Window[], major: boolean) => ws.reduce((a, [t0, t1]) => a + (major ? gc.between(t0, t1).major : gc.between(t0, t1).all), 0) / ws.length;
    summary.push(
      ['decode step: Engine.generate / plain DecoderSession.run', `${(e / pl).toFixed(2)}×`, '≤ 1.05×'],
      ['full (major) GCs per engine step', perStep(engineWindows, true).toFixed(2), '0'],
      ['GCs per engine step, all kinds', perStep(engineWindows, false).toFixed(2), '—'],
    );
    console.log(`\ndecode loop vs plain session run, interleaved: vocab ${c.vocabSize}, ${c.numLayers} layers, context ${engine.kv.length - engineSteps.length}…${engine.kv.length}, KV capacity ${engine.kv.capacity} (${(engine.kv.stats.bytes / 2 ** 20).toFixed(0)} MiB), ${engineSteps.length} steps, medians`);
    printTable(
      ['loop', 'step', 'GCs per step'],
      [
        ['Engine.generate', fmt(e), gcs(engineWindows)],
        ['plain DecoderSession.run', fmt(pl), gcs(plainWindows)],
        ['ratio', `${(e / pl).toFixed(2)}×`, ''],
        ["plain run, present bound ('in-place')", fmt(median(boundSteps)), gcs(boundWindows)],
        ['bound / rows', `${(median(boundSteps) / pl).toFixed(2)}×`, ''],
      ],
    );
  } finally {
    gc.stop();
    await session.dispose();
    await engine.dispose();
  }
}

/**
 * Start-up: `Engine.load` from the source folder (the cache found by the files' fingerprint, no
 * hashing) against `Engine.load` from the imported bundle folder itself, alternated, medians;
 * plus the content hash of the source files, which every start paid before fingerprints.
 */
async function startFromSource(model: string, cacheDir: string): Promise<void> {
  const first = await Engine.load(model, { cacheDir });
  const bundleDir = first.info.bundleDir;
  await first.dispose();
  // Fingerprints are recorded only once the files are older than the racy window.
  await new Promise((r) => setTimeout(r, RACY_WINDOW_MS));
  await (await Engine.load(model, { cacheDir })).dispose();
  const fromSource: number[] = [];
  const fromBundle: number[] = [];
  const resolveSource: number[] = [];
  const resolveBundle: number[] = [];
  const hashes: number[] = [];
  const phases: string[] = [];
  const time = async (xs: number[], f: () => Promise<unknown>) => {
    const t = performance.now();
    await f();
    xs.push(performance.now() - t);
  };
  for (let i = 0; i < 4; i++) {
    // Alternate which goes first, so neither always follows the other's page-cache warmth.
    const pair = [
      () => time(fromSource, async () => (await Engine.load(model, { cacheDir, onProgress: (p) => phases.push(p.phase) })).dispose()),
      () => time(fromBundle, async () => (await Engine.load(bundleDir, { cacheDir })).dispose()),
    ];
    for (const f of i % 2 ? pair.reverse() : pair) await f();
    await time(resolveSource, () => resolveModel(model, cacheDir));
    await time(resolveBundle, () => resolveModel(bundleDir, cacheDir));
    await time(hashes, async () => hashFiles(await hfSourceFiles(model)));
  }
  const [s, b, h] = [median(fromSource), median(fromBundle), median(hashes)];
  summary.push(['warm start: from the source folder / from the bundle folder', `${(s / b).toFixed(2)}×`, '≤ 1.2×']);
  const mb = (await Promise.all((await hfSourceFiles(model)).map((f) => stat(f)))).reduce((a, st) => a + st.size, 0) / 2 ** 20;
  console.log(`\nstart (Engine.load until ready), ${mb.toFixed(0)} MiB of source files, 4 alternated starts, medians${phases.includes('hash') ? ' (WARNING: a start hashed)' : ''}`);
  printTable(
    ['start', 'time'],
    [
      ['from the source folder (fingerprint)', fmt(s)],
      ['from the bundle folder', fmt(b)],
      ['source / bundle', `${(s / b).toFixed(2)}×`],
      ['resolveModel alone: source (fingerprint)', fmt(median(resolveSource))],
      ['resolveModel alone: bundle', fmt(median(resolveBundle))],
      ['content hash of the source (every start before)', fmt(h)],
    ],
  );
}

/**
 * The commit whose import the bench runs as the baseline: by default the one before issue 11's
 * work on import (bundle builder 4: every weight in memory first); `BENCH_IMPORT_BEFORE` picks
 * another (any commit with `resolveModel` in main/engine/model/bundle.ts).
 */
const IMPORT_BEFORE_COMMIT = process.env.BENCH_IMPORT_BEFORE ?? '0d31777';

/**
 * The engine's sources at `IMPORT_BEFORE_COMMIT`, extracted from this repository's history into
 * `dir` (with this checkout's node_modules linked in), so the bench can run that import itself;
 * null, with the reason printed, when git or the commit is not there (a shallow clone, a tarball).
 */
async function sourcesBefore(dir: string): Promise<string | null> {
  const repo = path.resolve(import.meta.dirname, '../..');
  try {
    await mkdir(dir, { recursive: true });
    const git = spawn('git', ['-C', repo, 'archive', IMPORT_BEFORE_COMMIT, 'main', 'package.json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const tar = spawn('tar', ['-x', '-C', dir], { stdio: ['pipe', 'ignore', 'pipe'] });
    git.stdout.pipe(tar.stdin);
    let err = '';
    git.stderr.on('data', (d) => (err += d));
    const exit = (p: ReturnType<typeof spawn>) => new Promise<number | null>((resolve, reject) => p.on('error', reject).on('close', resolve));
    const [gitCode, tarCode] = await Promise.all([exit(git), exit(tar)]);
    if (gitCode !== 0 || tarCode !== 0) throw new Error(err.trim() || `git archive exit ${gitCode}, tar exit ${tarCode}`);
    await symlink(path.join(repo, 'node_modules'), path.join(dir, 'node_modules'));
    return dir;
  } catch (e) {
    console.log(`\n(no run of the import at ${IMPORT_BEFORE_COMMIT}: ${(e as Error).message.split('\n')[0]})`);
    return null;
  }
}

/**
 * Import: a Hugging Face folder into an empty cache, in a child process each so peak RSS is the
 * import's (import-child.ts): streamed (`resolveModel`: hash, checks, graph from shapes, weights
 * in chunks, bundle read back) against two baselines: the import as it was before this work
 * (`resolveModel` of commit `IMPORT_BEFORE_COMMIT`, from this repository's history, when git has
 * it), and today's code made to import in memory as it did then (every weight in memory as
 * float32, Linear weights transposed in JS, written from memory; it shares today's faster hashing
 * and tokenizer reading, so it understates the old cost); plus an idle child for the runtime's
 * own RSS. BENCH_IMPORT_RUNS (default 3) of each, in rotated order, medians. Throughput = source
 * bytes / time; RSS over the runtime's own against the largest tensor as float32.
 */
async function importThroughput(model: string, root: string): Promise<void> {
  type Run = { ms: number; peakRssBytes: number; phases: Record<string, number> };
  const child = (mode: string, cache: string, extra: string[] = []) =>
    new Promise<Run>((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'import-child.ts'), mode, model, cache, ...extra], { maxBuffer: 1 << 20 }, (err, stdout) =>
        err ? reject(err) : resolve(JSON.parse(stdout.trim().split('\n').at(-1)!)),
      );
    });
  const runs = Number(process.env.BENCH_IMPORT_RUNS ?? 3);
  const before = await sourcesBefore(path.join(root, `sources-${IMPORT_BEFORE_COMMIT}`));
  const idle = await child('idle', path.join(root, 'import-idle'));
  const modes = ['streamed', 'in-memory', ...(before ? ['before'] : [])];
  const results: Record<string, Run[]> = Object.fromEntries(modes.map((m) => [m, []]));
  for (let i = 0; i < runs; i++) {
    for (const mode of [...modes.slice(i % modes.length), ...modes.slice(0, i % modes.length)]) {
      const cache = path.join(root, `import-${mode}`);
      results[mode]!.push(await child(mode, cache, mode === 'before' ? [before!] : []));
      rmSync(cache, { recursive: true, force: true });
    }
  }
  const med = (xs: Run[]): Run => {
    const phases: Record<string, number> = {};
    for (const k of Object.keys(xs[0]!.phases)) phases[k] = median(xs.map((x) => x.phases[k] ?? 0));
    return { ms: median(xs.map((x) => x.ms)), peakRssBytes: median(xs.map((x) => x.peakRssBytes)), phases };
  };
  const [streamed, inMemory] = [med(results.streamed!), med(results['in-memory']!)];
  const old = before ? med(results.before!) : null;
  const sourceBytes = (await Promise.all((await hfSourceFiles(model)).map((f) => stat(f)))).reduce((a, st) => a + st.size, 0);
  const config = parseHfConfig(JSON.parse(await readFile(path.join(model, 'config.json'), 'utf8')), model);
  const largest = Math.max(...[...expectedWeights(config).values()].map((shape) => 4 * shape.reduce((a, b) => a * b, 1)));
  const MiB = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const overLargest = (r: Run) => (r.peakRssBytes - idle.peakRssBytes) / largest;
  const phases = (r: Run) => Object.entries(r.phases).map(([k, ms]) => `${k} ${(ms / 1000).toFixed(2)}`).join(', ');
  const row = (name: string, r: Run) => [
    name,
    fmt(r.ms),
    `${(sourceBytes / 2 ** 20 / (r.ms / 1000)).toFixed(0)} MiB/s`,
    MiB(r.peakRssBytes),
    `${overLargest(r).toFixed(2)}×`,
    phases(r),
  ];
  const ratio = (name: string, r: Run) => [name, `${(r.ms / streamed.ms).toFixed(2)}×`, '', `${(r.peakRssBytes / streamed.peakRssBytes).toFixed(2)}×`, '', ''];
  console.log(`\nimport (empty cache → bundle read back, hash included), ${MiB(sourceBytes)} of source files, largest tensor ${MiB(largest)} as float32, runtime alone ${MiB(idle.peakRssBytes)} peak RSS; ${runs} runs each, rotated, medians`);
  printTable(
    ['import', 'time', 'throughput', 'peak RSS', '(peak − runtime) / largest tensor', 'phases (s)'],
    [
      row('streamed (resolveModel)', streamed),
      ...(old ? [row(`before this work (${IMPORT_BEFORE_COMMIT})`, old), ratio(`${IMPORT_BEFORE_COMMIT} / streamed`, old)] : []),
      row('in memory, today\'s code (builder 5 layout)', inMemory),
      ratio('in memory / streamed', inMemory),
    ],
  );
  if (old) summary.push(['import speed-up over the import before this work', `${(old.ms / streamed.ms).toFixed(2)}×`, '≥ 4×']);
  summary.push(
    ['import speed-up over today\'s code importing in memory', `${(inMemory.ms / streamed.ms).toFixed(2)}×`, '—'],
    ['import (peak RSS − runtime) / largest tensor', `${overLargest(streamed).toFixed(2)}×`, '≤ 1.3×'],
  );
}

/** The targets as measured by the sections that ran: [what, measured, target]. */
const summary: string[][] = [];

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => c.padStart(widths[i])).join('  ');
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}

const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'kv,capacity,kvdtype,profile,loop,start,json,import,isolation').split(','));

/** The engine's own process against a worker thread, on the host's side (engine-isolation.ts). */
async function isolationSection(model: string, cacheDir: string): Promise<void> {
  const rows = await isolationCost(model, cacheDir);
  console.log('\nengine isolation (host side: token events received), medians of 5 interleaved rounds, 64 tokens after a 250-token prompt;');
  console.log('to the first token: the engine\'s own TTFT, the gap to the host\'s, CPU and run-queue wait over all threads of both processes');
  const ms = (x: number | null) => (x === null ? 'n/a' : `${x.toFixed(1)} ms`);
  printTable(
    ['isolation', 'TTFT', 'decode tok/s', 'engine TTFT', 'gap', 'CPU', 'run-queue wait'],
    rows.map((r) => [r.isolation, ms(r.ttftMs), r.decodeTokPerSec.toFixed(1), ms(r.engineTtftMs), ms(r.gapMs), ms(r.cpuMs), ms(r.runQueueMs)]),
  );
  const [thread, proc] = rows;
  summary.push(
    ['engine process / thread: TTFT', `${(proc.ttftMs / thread.ttftMs).toFixed(3)}×`, '≤ 1.01×'],
    ['engine process / thread: decode tok/s', `${(proc.decodeTokPerSec / thread.decodeTokPerSec).toFixed(3)}×`, '≥ 0.99×'],
  );
}

async function main(): Promise<void> {
  if (SECTIONS.has('kv')) await kvSteps();
  if (SECTIONS.has('capacity')) {
    const rows = await capacitySection();
    printTable(CAPACITY_HEAD, rows);
    const worst = Math.max(...rows.map((r) => Number(r[2].slice(0, -1))).map((x) => Math.max(x, 1 / x)));
    summary.push(['decode step, farthest KV capacity from the smallest, same tokens held', `${worst.toFixed(3)}×`, '≤ 1.05×']);
  }
  if (SECTIONS.has('kvdtype')) {
    printTable(KV_STORAGE_HEAD, await kvStorageSection());
    const layers = Number(process.env.BENCH_LAYERS ?? 28);
    const held = Number(process.env.BENCH_CAPACITY_HELD ?? 1072);
    const steps = Number(process.env.BENCH_KV_DTYPE_STEPS ?? 30);
    for (const h of [16, held]) {
      console.log(`\nthe KV cache setting in a whole decode step (native backend, Qwen3-0.6B-shaped Q4_0, ${layers} layers, ${h} tokens held of ${h + 28}; 3 alternating rounds of ${steps} steps, one session at a time; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
      const rows = await kvStepRows(layers, h, steps);
      printTable(KV_STEP_HEAD, rows);
      if (rows.length === 2) summary.push([`decode step with float16 KV, ${h} tokens held (vs float32 KV)`, rows[1][5], '≤ 1.1× to be the default']);
    }
  }
  if (SECTIONS.has('profile')) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-profile-'));
    try {
      const layers = Number(process.env.BENCH_LAYERS ?? 28);
      const { head, rows } = await profileSection(async (f) => {
        return qwen3Bundle(path.join(dir, f), f, layers);
      });
      console.log(`\nwhere a decode step goes (ONNX Runtime profiler, native backend, Qwen3-0.6B shapes, ${layers} layers; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
      printTable(head, rows);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-hf-'));
  try {
    const model = path.join(root, 'qwen3');
    await writeSyntheticCheckpoint(model, BENCH_HF_MODEL);
    const cacheDir = path.join(root, 'cache');
    if (SECTIONS.has('loop')) await loopVsPlain(model, cacheDir);
    if (SECTIONS.has('start')) await startFromSource(model, cacheDir);
    if (SECTIONS.has('json')) {
      console.log('\nconstrained decoding (response_format), test/bench/constrained.ts');
      printTable(['measure', 'this run'], await constrainedRows(model, cacheDir));
    }
    if (SECTIONS.has('isolation')) await isolationSection(model, cacheDir);
    if (SECTIONS.has('import')) {
      let importModel = model;
      if (process.env.BENCH_IMPORT_MODEL === 'qwen3-0.6b') {
        importModel = path.join(root, 'qwen3-0.6b');
        await writeSyntheticCheckpoint(importModel, QWEN3_06B);
      }
      await importThroughput(importModel, root);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  if (summary.length > 0) {
    console.log(`\nthe issue's targets, this run (load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}, ${os.cpus().length} CPUs)`);
    printTable(['measure', 'this run', 'target'], summary);
  }
}

if (process.argv.includes('--json')) await backendsJson();
else await main();
