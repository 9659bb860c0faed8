/**
 * Where the engine runs, behind one small interface the host talks through (`EngineChannel`): a
 * child process of its own (`processChannel`, the default: `child_process.fork` with Node's
 * structured-clone serialization), or a `worker_threads` worker of this process (`threadChannel`).
 * Both carry the same messages (protocol.ts) and report the same deaths.
 *
 * Why a process: since native/ the engine runs C++ (ONNX Runtime, the addon). A segfault, an abort
 * or an out-of-memory kill inside a worker thread ends the whole process — window, services and
 * the conversation's last second with it. In a child process it ends only the engine: the host sees
 * `exit` with the signal, fails what was pending with WorkerCrashedError and starts a new one (LM
 * Studio isolates inference the same way). The process itself comes from an `EngineSpawn`: under
 * plain Node (serve, the CLI, the tests) `forkEngine` (`child_process.fork`); in the desktop app
 * Electron's `utilityProcess.fork` (app/engine-process.ts), because the packaged app's fuses turn
 * ELECTRON_RUN_AS_NODE off, so a forked Electron binary would start a second app, not Node. Both
 * are seen through one small seam, `EngineProcess` (send, messages, exit, kill, pid).
 *
 * The engine side of a channel is `enginePort()`: the worker's `parentPort`, Electron's
 * `process.parentPort` in a utility process, or the forked child's IPC.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parentPort, type Worker } from 'node:worker_threads';
import { CodedError } from '../common/errors.ts';
import { workerThread } from '../common/worker-thread.ts';
import { unpackedPath } from '../common/asar-path.ts';
import type { EngineProcess as GenericEngineProcess, EngineSpawn } from '../common/engine-process.ts';
import type { HostToWorker, WorkerToHost } from './protocol.ts';

/** Where the engine runs: its own process (default) or a thread of this one. */
export type EngineIsolation = 'process' | 'thread';

/** The host's end of the engine's message channel. */
export interface EngineChannel {
  /** Sends a request (structured clone). A message to a dead engine is dropped. */
  post(message: HostToWorker): void;
  onMessage(listener: (message: WorkerToHost) => void): void;
  /** Called once when the engine ends for any reason, with why in words ("exit code 70", "signal SIGSEGV", an error's message). */
  onDeath(listener: (why: string) => void): void;
  /** The engine has ended. */
  readonly ended: boolean;
  /** Resolves when the engine has ended. */
  readonly whenEnded: Promise<void>;
  /** Ends the engine at once, wherever it is (the last resort after a graceful shutdown timed out). */
  kill(): void;
  /** The engine's process id: its own process's, or null for a thread. */
  readonly pid: number | null;
}

/** The engine's process, in this protocol's messages (the seam: main/common/engine-process.ts). */
export type EngineProcess = GenericEngineProcess<HostToWorker, WorkerToHost>;
export type { EngineSpawn };

/**
 * `child_process.fork` as an EngineSpawn. Its stdout is not inherited (the CLI's stdout carries
 * the answer); its stderr is, so a native crash report still reaches the terminal.
 */
export const forkEngine = (modulePath: string, { execArgv }: { execArgv: string[] }): EngineProcess => {
  // Under Electron (unpackaged), process.execPath is the app itself: ELECTRON_RUN_AS_NODE makes the child plain Node.
  const env = process.versions.electron ? { ...process.env, ELECTRON_RUN_AS_NODE: '1' } : process.env;
  const child = fork(modulePath, [], { execArgv, env, serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return {
    send: (m) => {
      if (child.connected) child.send(m);
    },
    onMessage: (fn) => void child.on('message', (m) => fn(m as WorkerToHost)),
    onEnd: (fn) => {
      child.once('error', (e) => fn(e.message));
      child.once('exit', (code, signal) => fn(signal ? `signal ${signal}` : `exit code ${code}`));
    },
    kill: () => void child.kill('SIGKILL'),
    get pid() {
      return child.pid ?? null;
    },
    get ended() {
      return child.exitCode !== null || child.signalCode !== null;
    },
  };
};

/**
 * Starts the engine module at `url` in a process of its own through `spawn` (`.ts` under tsx's
 * loader in source runs). A module inside app.asar is started from app.asar.unpacked, where
 * electron-builder.yml unpacks it: a process's entry point and what it loads must be real files.
 */
export function processChannel(url: URL, spawn: EngineSpawn = forkEngine): EngineChannel {
  // tsx's loader by its resolved URL, so the child finds it whatever its working directory.
  const execArgv = url.pathname.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [];
  const child = spawn(unpackedPath(fileURLToPath(url)), { execArgv }) as EngineProcess;
  return channelOver({
    post: (m) => child.send(m),
    listen: (fn) => child.onMessage(fn),
    deaths: (fn) => child.onEnd(fn),
    kill: () => child.kill(),
    pid: () => child.pid,
    alreadyEnded: () => child.ended,
  });
}

/** Starts the engine module at `url` in a worker thread of this process (the engine before it had a process of its own). */
export function threadChannel(url: URL): EngineChannel {
  // ONNX Runtime's session creation needs more native stack than a worker's default 4 MiB in
  // some processes (measured: a segfault while creating stories260K's session when the process
  // had a 16 kB command-line argument, e.g. a long `npm run chat` prompt; fine with 8 MiB).
  // Thread stacks are reserved, not committed, so a generous bound costs nothing.
  const w: Worker = workerThread(url, { resourceLimits: { stackSizeMb: 64 } });
  return channelOver({
    post: (m) => w.postMessage(m),
    listen: (fn) => w.on('message', fn),
    deaths: (fn) => {
      w.once('error', (e) => fn(e.message));
      w.once('exit', (code) => fn(`exit code ${code}`));
    },
    kill: () => void w.terminate(),
    pid: () => null,
    alreadyEnded: () => w.threadId === -1,
  });
}

interface ChannelParts {
  post(m: HostToWorker): void;
  listen(fn: (m: WorkerToHost) => void): void;
  deaths(fn: (why: string) => void): void;
  kill(): void;
  pid(): number | null;
  alreadyEnded(): boolean;
}

/** One death per channel, whichever of `error` and `exit` comes first. */
function channelOver(parts: ChannelParts): EngineChannel {
  let ended = false;
  const deathListeners: ((why: string) => void)[] = [];
  let resolveEnded!: () => void;
  const whenEnded = new Promise<void>((r) => (resolveEnded = r));
  parts.deaths((why) => {
    if (ended) return;
    ended = true;
    resolveEnded();
    for (const l of deathListeners) l(why);
  });
  return {
    post: (m) => {
      if (!ended) parts.post(m);
    },
    onMessage: parts.listen,
    onDeath: (l) => void deathListeners.push(l),
    get ended() {
      return ended || parts.alreadyEnded();
    },
    whenEnded,
    kill: parts.kill,
    get pid() {
      return parts.pid();
    },
  };
}

/** The engine's end of the channel: a worker's `parentPort`, or a forked child's IPC. */
export interface EnginePort {
  post(message: WorkerToHost): void;
  onMessage(listener: (message: HostToWorker) => void): void;
  /** The host went away (its process ended): the engine should stop. Never called in a thread. */
  onHostGone(listener: () => void): void;
}

/** Electron's `process.parentPort` in a utility process: messages arrive as `{ data }` (electron.d.ts ParentPort). */
export interface UtilityParentPort {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (event: { data: unknown }) => void): unknown;
}

/**
 * This engine's port to its host.
 * @throws EngineChannelError when this module runs neither in a worker thread, nor in a utility
 *   process, nor in a forked child.
 */
export function enginePort(): EnginePort {
  if (parentPort) {
    const port = parentPort;
    return { post: (m) => port.postMessage(m), onMessage: (l) => void port.on('message', l), onHostGone: () => undefined };
  }
  const utility = (process as { parentPort?: UtilityParentPort }).parentPort;
  if (utility) return utilityPort(utility);
  if (process.send) {
    const send = process.send.bind(process);
    return {
      post: (m) => {
        if (process.connected) send(m);
      },
      onMessage: (l) => void process.on('message', (m) => l(m as HostToWorker)),
      onHostGone: (l) => void process.once('disconnect', l),
    };
  }
  throw new EngineChannelError();
}

/**
 * The engine's end in an Electron utility process. Electron ends a utility process with the app,
 * so there is no host-gone signal to wait for.
 */
export function utilityPort(port: UtilityParentPort): EnginePort {
  return {
    post: (m) => port.postMessage(m),
    onMessage: (l) => void port.on('message', (e) => l(e.data as HostToWorker)),
    onHostGone: () => undefined,
  };
}

/** The engine module was started directly, not by an engine host. */
export class EngineChannelError extends CodedError<'ENGINE_CHANNEL'> {
  constructor() {
    super('ENGINE_CHANNEL', 'the engine must be started by the engine host (a worker thread, a utility process or a forked child process)');
  }
}
