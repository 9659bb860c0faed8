/**
 * The engine's own process in the desktop app: Electron's `utilityProcess` seen as the engine
 * host's `EngineProcess` (main/common/engine-process.ts), so the host speaks the same protocol to
 * it as to `child_process.fork` under serve and the CLI. Why not fork: the packaged app's fuses
 * turn ELECTRON_RUN_AS_NODE off (electron-builder.yml), so forking the Electron binary would start
 * a second app rather than Node; a utility process is Electron's own child for this.
 * Pure: the caller passes Electron's `utilityProcess.fork` in (app/main.ts), so this module loads
 * under plain Node and is tested with a stand-in (test/unit/utility-engine.test.ts).
 */
import type { EngineProcess, EngineSpawn } from '../main/common/engine-process.ts';

/** The part of Electron's `UtilityProcess` used here (electron.d.ts; app/main.ts checks the real one fits). */
export interface UtilityChild {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'exit', listener: (code: number) => void): unknown;
  on(event: 'error', listener: (type: string, location: string, report: string) => void): unknown;
  kill(): boolean;
  readonly pid: number | undefined;
}

/** Electron's `utilityProcess.fork`, as far as this module calls it. */
export type UtilityFork = (
  modulePath: string,
  args: string[],
  options: { execArgv: string[]; serviceName: string; stdio: Array<'pipe' | 'ignore' | 'inherit'> },
) => UtilityChild;

/** A utility process as an EngineProcess: messages both ways, one end (a fatal V8 error or the exit), kill. */
export function utilityEngineProcess(child: UtilityChild): EngineProcess {
  let ended = false;
  const endListeners: ((why: string) => void)[] = [];
  const end = (why: string) => {
    if (ended) return;
    ended = true;
    for (const l of endListeners) l(why);
  };
  child.on('exit', (code) => end(`exit code ${code}`));
  child.on('error', (type, location) => end(`${type}${location ? ` at ${location}` : ''}`));
  return {
    send: (m) => {
      if (!ended) child.postMessage(m);
    },
    onMessage: (l) => void child.on('message', l),
    onEnd: (l) => void endListeners.push(l),
    kill: () => void child.kill(),
    get pid() {
      return child.pid ?? null;
    },
    get ended() {
      return ended;
    },
  };
}

/**
 * The engine spawn of the desktop app over `fork` (Electron's `utilityProcess.fork`): stdout
 * ignored like the forked engine's, stderr inherited so a native crash report reaches the log.
 */
export function utilityEngineSpawn(fork: UtilityFork): EngineSpawn {
  return (modulePath, { execArgv }) => utilityEngineProcess(fork(modulePath, [], { execArgv, serviceName: 'Ropewalk engine', stdio: ['ignore', 'ignore', 'inherit'] }));
}
