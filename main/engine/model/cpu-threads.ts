/**
 * How many intra-op threads a session gets when the user asks for none in particular (threads 0):
 * this machine's physical cores, counted here and handed to ONNX Runtime as a number.
 *
 * Why not ONNX Runtime's own default for 0 (meant to be the physical cores too): on a 2-core AMD
 * EPYC VM (family 26, 2 cores, 1 thread each, sysfs topology intact) it came to one thread — a
 * session opened with 0 started no intra-op pool thread (counted in /proc/self/task) where one
 * opened with 2 started one — and a decode step (Qwen3-0.6B-shaped Q4_0, native backend, 40 steps
 * at 16–56 held) took a median 19.1 ms against 11.0–12.4 ms with 2 given as a number
 * (docs/benchmarks.md). Counting the cores ourselves makes the default the same on every machine.
 *
 * Contract: `physicalCores()` is, on Linux, the distinct (physical_package_id, core_id) pairs of
 * the CPUs under `sysCpuDir` (SMT siblings count once), at most the CPUs this process may run on
 * (`os.availableParallelism()`: the affinity mask), ≥ 1; null elsewhere or where sysfs has no
 * topology, and then `intraOpThreadsFor(0)` is 0: ONNX Runtime's own count (which knows SMT on
 * Windows and macOS; `availableParallelism` would count each SMT sibling). Reads the file system
 * once per call; throws nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * This machine's physical cores (see the file comment), for ONNX Runtime's intra-op pool; null
 * where sysfs does not say.
 * @param sysCpuDir the sysfs CPU folder (tests point it at a fixture tree).
 * @param available the CPUs this process may run on (default `os.availableParallelism()`).
 */
export function physicalCores(sysCpuDir = '/sys/devices/system/cpu', available = os.availableParallelism()): number | null {
  const cap = Math.max(1, available);
  let cpus: string[];
  try {
    cpus = readdirSync(sysCpuDir).filter((d) => /^cpu\d+$/.test(d));
  } catch {
    return null;
  }
  const cores = new Set<string>();
  for (const cpu of cpus) {
    const topology = path.join(sysCpuDir, cpu, 'topology');
    try {
      const pkg = readFileSync(path.join(topology, 'physical_package_id'), 'utf8').trim();
      const core = readFileSync(path.join(topology, 'core_id'), 'utf8').trim();
      cores.add(`${pkg}:${core}`);
    } catch {
      // an offline CPU has no topology folder: not one this process runs on
    }
  }
  return cores.size === 0 ? null : Math.min(cores.size, cap);
}

/**
 * The intra-op thread count to open a session with: `asked` when it is positive, else
 * `physicalCores()`, else 0 (ONNX Runtime's own count, where sysfs does not say).
 */
export function intraOpThreadsFor(asked: number): number {
  return asked > 0 ? asked : (physicalCores() ?? 0);
}
