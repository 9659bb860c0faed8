/**
 * The typed router: the one object both transports expose (Electron `ipcMain` in app/, the
 * WebSocket in `serve` mode). `call` validates the method name and the payload with the
 * contract's zod schemas before any handler runs; errors come out as `RouterError` with a
 * stable `code` and one readable sentence (the services' `ServiceError` and the engine's
 * `EngineError` keep their codes). Events come from the services' `EventHub` and go to every
 * subscriber.
 */
import type { EventName, EventTypes, Handlers } from '../contract/channels.ts';
import { isMethodName, requestSchemas } from '../contract/channels.ts';
import type { WireError } from '../contract/types.ts';
import { DocumentError } from '../documents/errors.ts';
import { EngineError } from '../engine/errors.ts';
import { ServiceError, firstLine } from '../services/errors.ts';
import { EventHub, type EventListener } from '../services/events.ts';

export { firstLine };
export type { Handlers, EventListener };

/** An error that crosses the boundary as { code, message }. */
export class RouterError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'RouterError';
  }
  toWire(): WireError {
    return { code: this.code, message: this.message };
  }
}

/** Validates and dispatches contract calls to `Handlers`; fans events out to every transport. */
export class Router {
  constructor(
    private readonly handlers: Handlers,
    private readonly events: EventHub = new EventHub(),
  ) {}

  /**
   * Calls a method. @throws RouterError: UNKNOWN_METHOD, INVALID_REQUEST (zod's first issue, with
   * its path), or the handler's own error converted (EngineError keeps its code; anything else
   * becomes INTERNAL with its message's first line).
   */
  async call(method: unknown, payload: unknown): Promise<unknown> {
    if (!isMethodName(method)) throw new RouterError('UNKNOWN_METHOD', `unknown method ${String(method).slice(0, 80)}`);
    const parsed = requestSchemas[method].safeParse(payload ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue.path.length ? `${issue.path.join('.')}: ` : '';
      throw new RouterError('INVALID_REQUEST', `invalid ${method} request: ${where}${issue.message}`);
    }
    try {
      return await (this.handlers[method] as (r: unknown) => Promise<unknown>)(parsed.data);
    } catch (e) {
      throw toRouterError(e);
    }
  }

  /** Subscribes to every event; returns the unsubscribe function. */
  onEvent(listener: EventListener): () => void {
    return this.events.onEvent(listener);
  }

  /** Pushes an event to every subscriber (a throwing subscriber does not stop the others). */
  emit<E extends EventName>(event: E, data: EventTypes[E]): void {
    this.events.emit(event, data);
  }
}

/** Any thrown value as a RouterError: typed errors keep their code, others become INTERNAL. */
export function toRouterError(e: unknown): RouterError {
  if (e instanceof RouterError) return e;
  if (e instanceof ServiceError || e instanceof EngineError || e instanceof DocumentError) return new RouterError(e.code, e.message);
  return new RouterError('INTERNAL', firstLine(e));
}

