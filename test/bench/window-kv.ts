/**
 * `npx tsx test/bench/window-kv.ts`: KV bytes and decode speed of a Gemma 3 shaped model at a long
 * context with the sliding-window layers' KV bounded by their window (cache/kv-window.ts) against
 * every layer holding the whole context (as before). A random-weight gemma3_text checkpoint with
 * Gemma 3 1B's attention (window 512, 1 KV head of 256, every 6th layer global) and small other
 * sizes (12 layers, hidden 256), imported once; per backend and held length, the KV
 * cache is filled to `held` positions without running the graph (rows are zeros: a decode step's
 * cost does not depend on their values; the bounded cache still drops rows as it fills), then
 * BENCH_STEPS (24) real decode steps run. Prints per case: KV bytes (the cache's own figure), the
 * windowed layers' capacity, median step ms and tok/s. It asserts nothing. Env: BENCH_HELD
 * (comma list, default 4096,16384,32000), BENCH_BACKENDS (default js,native).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { windowGroup } from '../../main/engine/cache/kv-window.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import type { BackendKind, DecoderBackend } from '../../main/engine/model/backend.ts';
import { importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { OnnxRunner } from '../helpers/onnx-runner.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const MAX = 32768;
const held = (process.env.BENCH_HELD ?? '4096,16384,32000').split(',').map(Number);
const backends = (process.env.BENCH_BACKENDS ?? 'js,native').split(',') as BackendKind[];
const STEPS = Number(process.env.BENCH_STEPS ?? 24);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-window-'));
try {
  const dir = path.join(root, 'gemma3');
  await writeSyntheticCheckpoint(dir, { family: 'gemma3_text', seed: 3, layers: 12, hidden: 256, heads: 4, kvHeads: 1, headDim: 256, inter: 512, configOverrides: { max_position_embeddings: MAX } });
  const model = await importHuggingFace(dir);
  const c = model.manifest.config;
  // One graph for both backends, written once (OnnxRunner builds it; its session is not used).
  const runner = await OnnxRunner.create(c, model.weights, MAX);
  const modelPath = path.join(runner.dir, 'model.onnx');
  console.log(`gemma3-shaped: ${c.numLayers} layers (${c.slidingWindow!.filter((w) => w > 0).length} sliding, window ${c.slidingWindow![0]}), ${c.numKvHeads} KV head of ${c.headDim}, float32 KV; max context ${MAX}; load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  for (const backend of backends) {
    const session: DecoderBackend = backend === 'native' ? await NativeDecoderSession.create(modelPath, c) : await DecoderSession.create(modelPath, c);
    for (const n of held) {
      for (const bounded of [false, true]) {
        const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext: MAX, hostBuffers: session.kvOnHost, window: bounded ? windowGroup(c.slidingWindow, MAX) : null });
        const rope = new RopeCache(c.rope, MAX, c.localRope);
        for (let p = 0; p < n; p += 256) {
          kv.ensure(Math.min(n, p + 256));
          kv.commit(Math.min(n, p + 256) - p);
        }
        const times: number[] = [];
        for (let s = 0; s <= STEPS; s++) {
          rope.ensure(kv.length + 1);
          kv.ensure(kv.length + 1);
          const t0 = performance.now();
          await session.run([s], rope.tables, kv);
          if (s > 0) times.push(performance.now() - t0); // the first step binds (a growth)
          kv.commit(1);
        }
        const ms = median(times);
        console.log(`${backend.padEnd(6)} held ${String(n).padStart(5)} ${bounded ? 'bounded' : 'whole  '}: KV ${mib(kv.stats.bytes).padStart(10)} (window layers' capacity ${bounded ? kv.windowCapacity : kv.capacity}), decode ${ms.toFixed(2)} ms/step = ${(1000 / ms).toFixed(1)} tok/s`);
      }
    }
    await session.dispose();
  }
  await runner.dispose();
} finally {
  rmSync(root, { recursive: true, force: true });
}
