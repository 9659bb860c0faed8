/**
 * The bundle cache keys on the graph target: stories260K resolved for cpu, webgpu and cuda gives
 * three bundles, each recorded in its manifest (cpu: no `graphTarget`, dtype float32, as bundles
 * were before targets), and resolving a target again finds its bundle in the cache.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { resolveModel, type ImportProgressEvent } from '../../main/engine/model/bundle.ts';
import { CPU_TARGET, graphTarget } from '../../main/engine/model/graph-target.ts';
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
