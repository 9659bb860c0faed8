/**
 * The bundle cache keys on the graph target: stories260K resolved for cpu, webgpu and cuda gives
 * three bundles, each recorded in its manifest (cpu: no `graphTarget`, dtype float32, as bundles
 * were before targets), and resolving a target again finds its bundle in the cache; `--ep cuda`
 * loads the CUDA float16 graph, and the CPU graph where the CUDA session falls back.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Engine } from '../../main/engine/generate/engine.ts';
import { resolveModel, type ImportProgressEvent } from '../../main/engine/model/bundle.ts';
import { CPU_TARGET, NATIVE_CPU_TARGET, graphTarget } from '../../main/engine/model/graph-target.ts';
import { kernelViolations } from '../helpers/graph-kernels.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bundle-target-'));
after(() => rmSync(cacheDir, { recursive: true, force: true }));

test('one bundle per graph target, recorded in the manifest; a second resolve of a target is a cache hit', async () => {
  const cpu = await resolveModel(STORIES_BIN, cacheDir);
  const cpuAgain = await resolveModel(STORIES_BIN, cacheDir, undefined, { target: CPU_TARGET });
  const webgpu = await resolveModel(STORIES_BIN, cacheDir, undefined, { target: graphTarget('webgpu') });
  const cuda = await resolveModel(STORIES_BIN, cacheDir, undefined, { target: graphTarget('cuda') });
  assert.equal(cpuAgain.dir, cpu.dir);
  assert.equal(new Set([cpu.dir, webgpu.dir, cuda.dir]).size, 3);
  assert.equal(cpu.manifest.graphTarget, undefined);
  assert.equal(cpu.manifest.dtype, 'float32');
  assert.deepEqual(webgpu.manifest.graphTarget, { ep: 'webgpu', dtype: 'float32' });
  assert.deepEqual(cuda.manifest.graphTarget, { ep: 'cuda', dtype: 'float16' });
  assert.equal(cuda.manifest.dtype, 'float16');
  for (const [b, ep] of [[cpu, 'cpu'], [webgpu, 'webgpu'], [cuda, 'cuda']] as const) {
    assert.deepEqual(kernelViolations(readFileSync(b.modelPath), ep), [], `${ep} bundle`);
  }
  const events: ImportProgressEvent[] = [];
  const hit = await resolveModel(STORIES_BIN, cacheDir, (e) => events.push(e), { target: graphTarget('webgpu') });
  assert.equal(hit.dir, webgpu.dir);
  assert.deepEqual(events.map((e) => e.phase), ['cached']);
});

test('--ep cuda loads the CUDA float16 graph; where its session falls back to the CPU, the engine loads the CPU graph instead, saying why', async () => {
  // A probe that says CUDA opens (as on a machine with CUDA); the session itself then cannot start
  // the CUDA provider here (its libraries are not installed) and runs on the CPU.
  const claimsCuda = { opens: async () => null, adapters: () => null, cudaDeviceName: () => null };
  const engine = await Engine.load(STORIES_BIN, { cacheDir, executionProvider: 'cuda', providerProbe: claimsCuda });
  try {
    assert.equal(engine.info.executionProvider, 'cpu');
    // The native backend's CPU graph (its float classifier on ropewalk.MatMulF32), not the float16 CUDA graph.
    assert.deepEqual(engine.manifest.graphTarget, { ...NATIVE_CPU_TARGET }, 'the CPU graph, not the float16 CUDA graph, runs on the CPU');
    assert.equal(engine.manifest.dtype, 'float32');
    assert.match(engine.sessionInfo.fallbackReason ?? '', /CUDA/);
    assert.equal(engine.info.backend, 'native', 'the CPU graph runs on the native backend again');
  } finally {
    await engine.dispose();
  }
  // Without the claim, as a user without CUDA runs it: the choice itself says no CUDA, and the CPU graph loads.
  const plain = await Engine.load(STORIES_BIN, { cacheDir, executionProvider: 'cuda' });
  try {
    assert.equal(plain.info.executionProvider, 'cpu');
    assert.deepEqual(plain.manifest.graphTarget, { ...NATIVE_CPU_TARGET });
    assert.match(plain.sessionInfo.fallbackReason ?? '', /CUDA/);
  } finally {
    await plain.dispose();
  }
});
