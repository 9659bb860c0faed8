/**
 * Bench section `isolation`: what the engine's own process costs against a worker thread
 * (main/engine-host/channel.ts), measured where the services see it — on the host's side of the
 * channel, so the token events' trip across the process boundary is inside the figures: TTFT (from
 * `generate` to the first token event received) and decode tok/s (token events received between
 * the first and the last), on the same model, prompt and greedy settings, the two isolations
 * interleaved round by round so both see the same load. Medians; the ratio process / thread.
 *
 * Beside the wall times, what tells a cost of the boundary from the OS's scheduling on a loaded
 * machine: the engine's own TTFT (its stats, timed inside the engine) and the gap to the host's
 * (the request's and the first token's trip), and, until the first token, the CPU time and the
 * run-queue wait summed over every thread of both processes (Linux /proc/PID/task/TID/schedstat:
 * ns on a CPU, ns runnable but waiting), so each isolation is charged alike whichever engine works.
 * Same CPU time and same gap with a different TTFT: the difference is the scheduler's, not ours.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { EngineHost } from '../../main/engine-host/host.ts';
import type { EngineIsolation } from '../../main/engine-host/channel.ts';
import type { GenerationRequest } from '../../main/engine/generate/types.ts';

export interface IsolationRow {
  isolation: EngineIsolation;
  ttftMs: number;
  decodeTokPerSec: number;
  /** TTFT as the engine timed it (its stats), ms. */
  engineTtftMs: number;
  /** Host's TTFT − the engine's, ms: the request's and the first token's trip across the channel. */
  gapMs: number;
  /** Until the first token, over every thread of both processes: ms on a CPU and ms runnable but waiting (null off Linux). */
  cpuMs: number | null;
  runQueueMs: number | null;
}

/** [ns on a CPU, ns waiting on a run queue] summed over a process's threads; null where /proc has no schedstat. */
function schedstat(pid: number | 'self'): [number, number] | null {
  try {
    let run = 0;
    let wait = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const [a, b] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      run += a;
      wait += b;
    }
    return [run, wait];
  } catch {
    return null;
  }
}

/** schedstat summed over `pids`. */
function schedOf(pids: (number | 'self')[]): [number, number] | null {
  const all = pids.map(schedstat);
  return all.every((x) => x !== null) ? all.reduce((a, x) => [a[0] + x![0], a[1] + x![1]], [0, 0]) : null;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One answer through `host`, timed on the host's side; `pids`: the processes whose threads' CPU is counted. */
async function timedAnswer(host: EngineHost, request: GenerationRequest, pids: (number | 'self')[] = ['self']): Promise<Omit<IsolationRow, 'isolation'>> {
  const s0 = schedOf(pids);
  let s1: [number, number] | null = null;
  const t0 = performance.now();
  let first = 0;
  let last = 0;
  let tokens = 0;
  let engineTtftMs = NaN;
  for await (const ev of host.generate(request)) {
    if (ev.type === 'done') engineTtftMs = ev.stats.ttftMs;
    if (ev.type !== 'token') continue;
    last = performance.now();
    if (tokens++ === 0) {
      first = last;
      s1 = schedOf(pids);
    }
  }
  const ttftMs = first - t0;
  const cpu = s0 && s1 ? [(s1[0] - s0[0]) / 1e6, (s1[1] - s0[1]) / 1e6] : null;
  return { ttftMs, decodeTokPerSec: ((tokens - 1) * 1000) / (last - first), engineTtftMs, gapMs: ttftMs - engineTtftMs, cpuMs: cpu?.[0] ?? null, runQueueMs: cpu?.[1] ?? null };
}

/**
 * Loads `model` in a thread-isolated and a process-isolated host and times `rounds` answers of
 * `maxTokens` greedy tokens each after a `promptTokens`-token prompt (prefix reuse off: each round resets).
 */
export async function isolationCost(model: string, cacheDir: string, opts: { rounds?: number; maxTokens?: number; prompt?: string } = {}): Promise<IsolationRow[]> {
  const rounds = opts.rounds ?? 5;
  const request: GenerationRequest = {
    prompt: opts.prompt ?? 'the rope walk is long '.repeat(50),
    maxTokens: opts.maxTokens ?? 64,
    sampler: { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 },
    ignoreEos: true,
  };
  const hosts = (['thread', 'process'] as const).map((isolation) => ({ isolation, host: new EngineHost({ isolation }), runs: [] as Omit<IsolationRow, 'isolation'>[] }));
  try {
    for (const h of hosts) {
      await h.host.load(model, { cacheDir });
      await timedAnswer(h.host, { ...request, maxTokens: 4 }); // warm-up: sessions and caches
    }
    // Both processes' threads, whichever engine works: this one and the engine's child.
    const pids: (number | 'self')[] = ['self', ...hosts.map((h) => h.host.enginePid).filter((p): p is number => p !== null)];
    for (let r = 0; r < rounds; r++) {
      for (const h of r % 2 === 0 ? hosts : [...hosts].reverse()) {
        await h.host.reset();
        h.runs.push(await timedAnswer(h.host, request, pids));
      }
    }
  } finally {
    for (const h of hosts) await h.host.dispose();
  }
  const med = (runs: Omit<IsolationRow, 'isolation'>[], k: keyof Omit<IsolationRow, 'isolation'>) => (runs[0][k] === null ? null : median(runs.map((x) => x[k] as number)));
  return hosts.map(({ isolation, runs }) => ({
    isolation,
    ttftMs: med(runs, 'ttftMs')!,
    decodeTokPerSec: med(runs, 'decodeTokPerSec')!,
    engineTtftMs: med(runs, 'engineTtftMs')!,
    gapMs: med(runs, 'gapMs')!,
    cpuMs: med(runs, 'cpuMs'),
    runQueueMs: med(runs, 'runQueueMs'),
  }));
}
