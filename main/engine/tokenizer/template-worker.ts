/**
 * The chat-template sandbox's worker thread (started by template-sandbox.ts): renders one
 * template per message with `renderBounded` and answers on the port it was given, then flips the
 * shared state word so the caller, blocked in `Atomics.wait`, wakes. Its death costs nothing: it
 * holds no state but the last compiled template.
 *
 * Protocol: parentPort message `SandboxRequest` → state BUSY → port message `SandboxReply` →
 * state DONE (both with `Atomics.notify`).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { TemplateError, type TemplateFailure } from '../errors.ts';
import { renderBounded, type RenderLimits } from './jinja-compat.ts';

export interface SandboxRequest {
  source: string;
  variables: Record<string, unknown>;
  limits: RenderLimits;
}

/** `text` on success; a TemplateError's kind and detail, or the message of anything else thrown. */
export type SandboxReply = { ok: true; text: string } | { ok: false; kind?: TemplateFailure; detail?: string; message: string };

export const STATE_IDLE = 0;
export const STATE_BUSY = 1;
export const STATE_DONE = 2;

if (parentPort && workerData?.ropewalkTemplateSandbox) {
  const { port, state } = workerData as { port: MessagePort; state: Int32Array };
  parentPort.on('message', (req: SandboxRequest) => {
    Atomics.store(state, 0, STATE_BUSY);
    Atomics.notify(state, 0);
    port.postMessage(render(req));
    Atomics.store(state, 0, STATE_DONE);
    Atomics.notify(state, 0);
  });
}

function render(req: SandboxRequest): SandboxReply {
  try {
    return { ok: true, text: renderBounded(req.source, req.variables, req.limits) };
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    return e instanceof TemplateError ? { ok: false, kind: e.kind, detail: e.detail, message } : { ok: false, message };
  }
}
