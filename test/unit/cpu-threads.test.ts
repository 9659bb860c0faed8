/**
 * model/cpu-threads.ts: the thread count a session opens with when none is asked. Fixture sysfs
 * trees (written here, as Linux lays /sys/devices/system/cpu out) for SMT siblings, two packages,
 * an offline CPU and an unreadable folder (null: ONNX Runtime counts, as on Windows and macOS); the
 * affinity cap; an asked count kept as it is. And on this machine (Linux): the count is what the
 * kernel's topology files say, never 0 (0 is ONNX Runtime's own default, which came to one thread
 * on a 2-core VM: a decode step 1.6× slower).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { intraOpThreadsFor, physicalCores } from '../../main/engine/model/cpu-threads.ts';

/** A sysfs CPU folder with one entry per [package, core] (null: an offline CPU, no topology). */
function sysTree(cpus: ([number, number] | null)[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-sysfs-'));
  cpus.forEach((c, i) => {
    const cpu = path.join(dir, `cpu${i}`);
    mkdirSync(cpu);
    if (!c) return;
    mkdirSync(path.join(cpu, 'topology'));
    writeFileSync(path.join(cpu, 'topology', 'physical_package_id'), `${c[0]}\n`);
    writeFileSync(path.join(cpu, 'topology', 'core_id'), `${c[1]}\n`);
  });
  mkdirSync(path.join(dir, 'cpufreq')); // sysfs holds other folders beside cpuN
  return dir;
}

test('physicalCores counts (package, core) pairs: SMT siblings once, cores of two packages apart, offline CPUs not at all', () => {
  const cases: [([number, number] | null)[], number, string][] = [
    [[[0, 0], [0, 1]], 2, 'two cores, no SMT (this VM\'s layout)'],
    [[[0, 0], [0, 1], [0, 0], [0, 1]], 2, 'two cores with two threads each'],
    [[[0, 0], [0, 1], [1, 0], [1, 1]], 4, 'two packages with the same core ids'],
    [[[0, 0], null, [0, 1]], 2, 'an offline CPU'],
  ];
  for (const [cpus, want, what] of cases) {
    const dir = sysTree(cpus);
    try {
      assert.equal(physicalCores(dir, 64), want, what);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('physicalCores: at most the CPUs this process may run on; null where sysfs says nothing (ONNX Runtime counts then)', () => {
  const dir = sysTree([[0, 0], [0, 1], [0, 2], [0, 3]]);
  try {
    assert.equal(physicalCores(dir, 2), 2, 'an affinity mask of 2 CPUs caps 4 cores');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(physicalCores(path.join(os.tmpdir(), 'ropewalk-no-such-sysfs'), 3), null, 'no sysfs folder (Windows, macOS)');
  const empty = sysTree([null, null]);
  try {
    assert.equal(physicalCores(empty, 5), null, 'no topology files');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test('intraOpThreadsFor keeps an asked count and turns 0 into this machine\'s physical cores (on Linux a positive number)', () => {
  assert.equal(intraOpThreadsFor(3), 3);
  const here = intraOpThreadsFor(0);
  assert.equal(here, physicalCores() ?? 0);
  if (process.platform === 'linux') assert.ok(here >= 1 && here <= os.availableParallelism(), `${here} threads for ${os.availableParallelism()} CPUs`);
  const dir = sysTree([[0, 0]]);
  try {
    assert.equal(physicalCores(dir, 0), 1, 'an affinity of 0 CPUs still gives one');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
