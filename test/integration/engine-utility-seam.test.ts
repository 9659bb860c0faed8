/**
 * The desktop app's engine process seam, run for real except for Electron itself (which cannot
 * start here): the engine host speaks through app/utility-engine.ts to a stand-in for
 * `utilityProcess.fork` — a forked Node child whose preload (test/helpers/utility-process-shim.mjs)
 * gives it Electron's `process.parentPort` and hides `process.send` — so the real engine worker
 * takes its utility-process branch. The real stories260K model answers the same greedy tokens as
 * through child_process.fork, and a SIGKILL mid-answer is a crash the host reports and recovers
 * from. Not run here: Electron's own utilityProcess, its asar support, its exit codes after a signal.
 */
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { utilityEngineSpawn, type UtilityChild, type UtilityFork } from '../../app/utility-engine.ts';
import { EngineHost } from '../../main/engine-host/host.ts';
import { WorkerCrashedError } from '../../main/engine/errors.ts';
import type { GenerationRequest } from '../../main/engine/generate/types.ts';
import { PROJECT_ROOT, STORIES_BIN } from '../helpers/paths.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-utility-seam-'));
after(() => rmSync(root, { recursive: true, force: true }));
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const greedy = (maxTokens: number): GenerationRequest => ({ prompt: 'Once upon a time', maxTokens, sampler: GREEDY, ignoreEos: true });
const SHIM = path.join(PROJECT_ROOT, 'test/helpers/utility-process-shim.mjs');

/** `utilityProcess.fork` stood in by child_process.fork with the shim: Electron's UtilityProcess surface over Node's IPC. */
const standInFork: UtilityFork = (modulePath, args, options) => {
  const child = fork(modulePath, args, { execArgv: [...options.execArgv, '--import', SHIM], serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const utility: UtilityChild = {
    postMessage: (m) => void (child.connected && child.send(m as object)),
    on: ((event: string, listener: (...a: unknown[]) => void) => {
      if (event === 'exit') child.on('exit', (code, signal) => listener(code ?? (signal === 'SIGKILL' ? 137 : 1)));
      else if (event === 'message') child.on('message', listener);
      return utility;
    }) as UtilityChild['on'],
    kill: () => child.kill('SIGKILL'),
    get pid() {
      return child.pid;
    },
  };
  return utility;
};

async function tokensOf(h: EngineHost, request: GenerationRequest): Promise<number[]> {
  for await (const ev of h.generate(request)) if (ev.type === 'done') return ev.tokens;
  throw new Error('no done event');
}

test('the engine behind the utility-process seam: the same greedy answer as through fork; a SIGKILL mid-answer is a reported crash, the next answer the same', { timeout: 180_000 }, async () => {
  const forked = new EngineHost();
  const utility = new EngineHost({ spawn: utilityEngineSpawn(standInFork) });
  try {
    await forked.load(STORIES_BIN, { cacheDir: path.join(root, 'cache'), maxContext: 2048 });
    const reference = await tokensOf(forked, greedy(40));
    await forked.dispose();
    await utility.load(STORIES_BIN, { cacheDir: path.join(root, 'cache'), maxContext: 2048 });
    assert.ok(utility.enginePid && utility.enginePid !== process.pid);
    assert.deepEqual(await tokensOf(utility, greedy(40)), reference, 'the same protocol, the same tokens');

    const crashes: WorkerCrashedError[] = [];
    utility.onCrash((e) => crashes.push(e));
    const seen: number[] = [];
    const firstPid = utility.enginePid!;
    await assert.rejects(
      (async () => {
        for await (const ev of utility.generate(greedy(1800))) {
          if (ev.type !== 'token') continue;
          seen.push(ev.id);
          if (seen.length === 5) process.kill(firstPid, 'SIGKILL');
        }
      })(),
      (e: unknown) => e instanceof WorkerCrashedError && /exit code 137/.test(e.message),
    );
    assert.ok(seen.length >= 5);
    assert.equal(crashes.length, 1, 'the host reports the crash');
    assert.deepEqual(seen.slice(0, 5), reference.slice(0, 5), 'what streamed before the kill');
    assert.deepEqual(await tokensOf(utility, greedy(40)), reference, 'a new engine process with the last model answers the same');
    assert.notEqual(utility.enginePid, firstPid);
  } finally {
    await forked.dispose();
    await utility.dispose();
  }
});
