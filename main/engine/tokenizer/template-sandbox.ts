/**
 * Chat templates rendered where a hostile one costs nothing: a dedicated worker thread
 * (template-worker.ts) with a small heap, that no other request shares and that is terminated
 * and started afresh when a render passes its time limit.
 *
 * Contract: `renderInSandbox(source, variables, limits)` is synchronous (the tokenizer's callers
 * are): it posts the request, blocks in `Atomics.wait` for at most `limits.timeMs` plus a grace,
 * and reads the reply with `receiveMessageOnPort`. Inside, `renderBounded` enforces the step,
 * size and time limits itself; the wait and the heap cap are the backstop for what it cannot
 * see (one library call that never returns, or runs out of memory). Worker start-up (loading the
 * library, up to `BOOT_MS`) does not count against the template's time.
 * @throws TemplateLimitError past a limit (the worker is replaced), TemplateError when the template
 *   fails, TokenizerError when the sandbox itself cannot start.
 */
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import { TemplateError, TemplateLimitError, TokenizerError } from '../errors.ts';
import { workerThread } from '../../common/worker-thread.ts';
import type { RenderLimits } from './jinja-compat.ts';
import { STATE_BUSY, STATE_IDLE, type SandboxReply, type SandboxRequest } from './template-worker.ts';

/** Worker start-up allowance: a loaded 2-core machine takes ~0.5 s to load tsx and the library. */
const BOOT_MS = 15_000;
/** Time past the template's own limit before the worker is given up on. */
const GRACE_MS = 400;
/** The worker's V8 heap (MB): a template that tries to build gigabytes dies here, not the app. */
const HEAP_MB = 128;

interface Sandbox {
  worker: Worker;
  port: MessagePort;
  state: Int32Array;
}

let sandbox: Sandbox | null = null;

function start(): Sandbox {
  const { port1, port2 } = new MessageChannel();
  const state = new Int32Array(new SharedArrayBuffer(4));
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const worker = workerThread(new URL(`./template-worker.${ext}`, import.meta.url), {
    workerData: { ropewalkTemplateSandbox: true, port: port2, state },
    transferList: [port2],
    resourceLimits: { maxOldGenerationSizeMb: HEAP_MB, maxYoungGenerationSizeMb: 16 },
  });
  // The sandbox never keeps a process alive, and a dead one is simply replaced.
  worker.unref();
  port1.unref();
  const forget = () => {
    if (sandbox?.worker === worker) sandbox = null;
  };
  worker.on('error', forget);
  worker.on('exit', forget);
  return { worker, port: port1, state };
}

function stop(sb: Sandbox): void {
  if (sandbox === sb) sandbox = null;
  sb.port.close();
  void sb.worker.terminate();
}

/**
 * Starts the sandbox worker now, if none runs, without waiting for it: a model load calls this
 * first so the worker boots while the model is read, and the load-time probe does not wait.
 */
export function prestartTemplateSandbox(): void {
  sandbox ??= start();
}

/**
 * Renders `source` with `variables` in the sandbox worker (see the file comment).
 * @param limits steps, characters and wall time (ms) of this render.
 */
export function renderInSandbox(source: string, variables: Record<string, unknown>, limits: RenderLimits): string {
  const sb = (sandbox ??= start());
  Atomics.store(sb.state, 0, STATE_IDLE);
  sb.worker.postMessage({ source, variables, limits } satisfies SandboxRequest);
  if (Atomics.wait(sb.state, 0, STATE_IDLE, BOOT_MS) === 'timed-out') {
    stop(sb);
    throw new TokenizerError(`the chat template sandbox did not start within ${BOOT_MS} ms`);
  }
  if (Atomics.wait(sb.state, 0, STATE_BUSY, limits.timeMs + GRACE_MS) === 'timed-out') {
    stop(sb);
    throw new TemplateLimitError(`ran longer than ${limits.timeMs} ms`);
  }
  const reply = receiveMessageOnPort(sb.port)?.message as SandboxReply | undefined;
  if (!reply) {
    // DONE without a reply: the worker died mid-render (its heap cap).
    stop(sb);
    throw new TemplateLimitError(`used more than ${HEAP_MB} MB of memory`);
  }
  if (reply.ok) return reply.text;
  if (reply.kind === 'limit') throw new TemplateLimitError(reply.detail!);
  if (reply.kind) throw new TemplateError(reply.kind, reply.detail!);
  throw new TokenizerError(reply.message);
}
