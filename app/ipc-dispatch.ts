/**
 * Main's side of the bridge, free of `electron` so plain Node tests can drive it with fakes:
 * one invoke handler per contract method that checks the sender, bounds the payload, calls the
 * router and answers with an `IpcResult` (never throws, so no error detail is lost in transit).
 *
 * Contract: an untrusted sender gets `{ ok: false, error: { code: 'FORBIDDEN' } }` and the router
 * is never called; an oversized payload gets `PAYLOAD_TOO_LARGE`; otherwise the router's value, or
 * its error as `{ code, message }` (RouterError codes as they are, anything else `INTERNAL`).
 */
import type { MethodName } from '../main/contract/names.ts';
import { toRouterError } from '../main/composition/router.ts';
import type { IpcResult } from './bridge.ts';
import { isPayloadWithinLimits } from './security.ts';

/** The part of the Router the bridge uses. */
export interface CallableRouter {
  call(method: unknown, payload: unknown): Promise<unknown>;
}

export interface InvokeHandlerDeps<Event> {
  /** Resolves once services have started (calls made before then wait). */
  router: () => Promise<CallableRouter>;
  /** The sender check (security.ts `isTrustedSender` over the event's facts). */
  isTrustedSender: (event: Event) => boolean;
  /** Told about refused calls (for the log); never about payload contents. */
  onRefused?: (method: MethodName, code: string) => void;
}

/** Builds the `ipcMain.handle` listener of one method. */
export function createInvokeHandler<Event>(method: MethodName, deps: InvokeHandlerDeps<Event>): (event: Event, payload: unknown) => Promise<IpcResult> {
  return async (event, payload) => {
    if (!deps.isTrustedSender(event)) {
      deps.onRefused?.(method, 'FORBIDDEN');
      return { ok: false, error: { code: 'FORBIDDEN', message: 'this window is not allowed to call the app' } };
    }
    if (!isPayloadWithinLimits(payload)) {
      deps.onRefused?.(method, 'PAYLOAD_TOO_LARGE');
      return { ok: false, error: { code: 'PAYLOAD_TOO_LARGE', message: `the ${method} request is too large` } };
    }
    try {
      const router = await deps.router();
      return { ok: true, value: await router.call(method, payload) };
    } catch (e) {
      return { ok: false, error: toRouterError(e).toWire() };
    }
  };
}
