/**
 * Where ONNX Runtime ran a session's nodes, read from its profiler (`enableProfiling`): the
 * profile is a Chrome-trace JSON array whose node events (`cat: "Node"`, `name:
 * "<node>_kernel_time"`) carry `args.provider` ("CPUExecutionProvider",
 * "WebGpuExecutionProvider", "CUDAExecutionProvider") and `args.op_name` (ONNX Runtime's
 * profiler.cc / sequential_executor.cc). A session profiles its first run only, so a load
 * measures placement once, not per step.
 *
 * `nodesOnCpu` counts the distinct compute nodes on the CPU provider: the copies ONNX Runtime
 * inserts between devices (MemcpyFromHost / MemcpyToHost) are not compute, and a node on the
 * CPU provider of a CPU session counts too (every node, there).
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ModelLoadError } from '../errors.ts';

const COPY_OPS = new Set(['MemcpyFromHost', 'MemcpyToHost']);

/** Nodes per provider, and the CPU provider's compute nodes. */
export interface Placement {
  nodesOnCpu: number;
  /** provider → distinct nodes seen (copies included), e.g. { WebGpuExecutionProvider: 226 }. */
  byProvider: Record<string, number>;
}

/**
 * Counts a parsed profile's nodes by provider.
 * @param events the profile's JSON (an array of trace events).
 * @throws ModelLoadError when it is not an array of events, quoting what it is.
 */
export function placementFromProfile(events: unknown): Placement {
  if (!Array.isArray(events)) throw new ModelLoadError(`ONNX Runtime's profile is not a list of events (got ${typeof events})`);
  const seen = new Map<string, { provider: string; op: string }>();
  for (const e of events as { cat?: unknown; name?: unknown; args?: { provider?: unknown; op_name?: unknown } }[]) {
    if (e?.cat !== 'Node' || typeof e.name !== 'string' || typeof e.args?.provider !== 'string') continue;
    const node = e.name.replace(/_(kernel_time|fence_before|fence_after)$/, '');
    seen.set(node, { provider: e.args.provider, op: String(e.args.op_name ?? '') });
  }
  const byProvider: Record<string, number> = {};
  let nodesOnCpu = 0;
  for (const { provider, op } of seen.values()) {
    byProvider[provider] = (byProvider[provider] ?? 0) + 1;
    if (provider === 'CPUExecutionProvider' && !COPY_OPS.has(op)) nodesOnCpu++;
  }
  return { nodesOnCpu, byProvider };
}

/** A fresh folder for one session's profile, and the prefix to give ONNX Runtime. */
export async function profileFolder(): Promise<{ dir: string; prefix: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-profile-'));
  return { dir, prefix: path.join(dir, 'profile') };
}

/**
 * Reads the one profile ONNX Runtime wrote in `dir` (or `file` when it said which), then
 * removes the folder.
 * @throws ModelLoadError when no profile is there or it is not valid JSON.
 */
export async function readPlacement(dir: string, file?: string): Promise<Placement> {
  try {
    const name = file ?? (await readdir(dir)).filter((f) => f.endsWith('.json')).map((f) => path.join(dir, f))[0];
    if (!name) throw new ModelLoadError(`ONNX Runtime wrote no profile in ${dir}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(name, 'utf8'));
    } catch (e) {
      throw new ModelLoadError(`ONNX Runtime's profile ${name} cannot be read: ${(e as Error).message}`, undefined, { cause: e });
    }
    return placementFromProfile(parsed);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * One session's first-run profile: created before the session (its `prefix` goes into the
 * session options), finished after the first run. Both backends use it.
 */
export class FirstRunProfile {
  private done = false;
  private constructor(readonly dir: string, readonly prefix: string) {}

  static async create(): Promise<FirstRunProfile> {
    const { dir, prefix } = await profileFolder();
    return new FirstRunProfile(dir, prefix);
  }

  /** True until `finish` or `discard`: the next run is the one to measure. */
  get pending(): boolean {
    return !this.done;
  }

  /**
   * Stops the profiler (`end`, which returns the file when the runtime says it) and counts.
   * @returns the CPU provider's compute nodes, or null when the profile could not be had (a
   *   placement count must never fail an answer).
   */
  async finish(end: () => string | void): Promise<number | null> {
    this.done = true;
    try {
      const file = end();
      return (await readPlacement(this.dir, typeof file === 'string' && file !== '' ? file : undefined)).nodesOnCpu;
    } catch {
      await rm(this.dir, { recursive: true, force: true });
      return null;
    }
  }

  /** Removes the folder of a profile never finished (the session closed first). */
  async discard(): Promise<void> {
    this.done = true;
    await rm(this.dir, { recursive: true, force: true });
  }
}
