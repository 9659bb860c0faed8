/**
 * The `serve` mode WebSocket protocol (path `/ws` on the same origin as the page). JSON text
 * frames. The renderer's WebSocket client and main/serve speak exactly this.
 *   client → server: { kind: 'call', id, method, payload }
 *   server → client: { kind: 'result', id, ok: true, value } | { kind: 'result', id, ok: false, error }
 *                    { kind: 'event', event, data }   (pushed to every connected client)
 */
import type { EventName, MethodName } from './names.ts';
import type { WireError } from './types.ts';

export const WS_PATH = '/ws';

export interface WireCall {
  kind: 'call';
  id: number;
  method: MethodName;
  payload: unknown;
}

export type WireResult = { kind: 'result'; id: number; ok: true; value: unknown } | { kind: 'result'; id: number; ok: false; error: WireError };

export interface WireEvent {
  kind: 'event';
  event: EventName;
  data: unknown;
}

export type ServerFrame = WireResult | WireEvent;
