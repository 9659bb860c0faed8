/**
 * The seam between the engine host and the engine's own process (main/engine-host/channel.ts):
 * what the host needs of a process, which `child_process.fork` (serve, the CLI, the tests) and
 * Electron's `utilityProcess.fork` (the desktop app: app/utility-engine.ts) both provide. Messages
 * are the engine protocol's (main/engine-host/protocol.ts), carried as structured clones by both.
 * Types only, platform-free, so app/ can implement it without importing the engine host.
 */

/** The engine's process as the host sees it. `Out`: what the host sends; `In`: what it receives. */
export interface EngineProcess<Out = unknown, In = unknown> {
  /** Sends a message; a message to a process that has ended is dropped. */
  send(message: Out): void;
  onMessage(listener: (message: In) => void): void;
  /** Called once when the process ends or cannot start, with why in words ("exit code 70", "signal SIGSEGV", an error's message). */
  onEnd(listener: (why: string) => void): void;
  /** Ends it at once (SIGKILL where there are signals). */
  kill(): void;
  /** Its process id, once known (null before it has started). */
  readonly pid: number | null;
  /** Whether it has ended. */
  readonly ended: boolean;
}

/** Starts the engine module at `modulePath` (a file path, never inside app.asar) in a process of its own. */
export type EngineSpawn = (modulePath: string, options: { execArgv: string[] }) => EngineProcess;
