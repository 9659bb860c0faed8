/**
 * Test helper: where ONNX Runtime 1.30 places a model's nodes when it opens it on WebGPU, read
 * from its own verbose placement log (a child process, so the log goes to its stderr): the
 * compute nodes on the CPU provider and on WebGPU (Memcpy nodes not counted). Independent of the
 * profiler that `nodesOnCpu` reads.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

/** `model`'s compute nodes per provider on WebGPU. @throws AssertionError when the child fails (its ERR line). */
export function placementLog(model: string): { cpu: number; webgpu: number } {
  const script = `const ort = require('onnxruntime-node'); ort.InferenceSession.create(${JSON.stringify(model)}, { executionProviders: ['webgpu'], logSeverityLevel: 0, logVerbosityLevel: 0, graphOptimizationLevel: 'all' }).then(() => process.exit(0), (e) => { console.error('ERR ' + e.message); process.exit(1); });`;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', maxBuffer: 1 << 28, env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR || '/tmp' } });
  assert.equal(r.status, 0, r.stderr.split('\n').find((l) => l.startsWith('ERR ')) ?? 'the placement child failed');
  let where = '';
  const n = { cpu: 0, webgpu: 0 };
  for (const line of `${r.stdout}${r.stderr}`.split('\n')) {
    const placed = /Node\(s\) placed on \[(\w+)\]/.exec(line);
    const all = /All nodes placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
    if (all && all[1] === 'WebGpuExecutionProvider') n.webgpu += Number(all[2]);
    if (placed) where = placed[1];
    else if (/VerifyEachNodeIsAssignedToAnEp\]   (\w+) /.test(line) && !/Memcpy(From|To)Host/.test(line)) {
      if (where === 'CPUExecutionProvider') n.cpu++;
      if (where === 'WebGpuExecutionProvider') n.webgpu++;
    }
  }
  return n;
}

