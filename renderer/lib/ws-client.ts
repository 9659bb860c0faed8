/**
 * The `serve` mode transport: a `RopewalkApi` over one WebSocket speaking `main/contract/wire.ts`
 * (client → { kind: 'call', id, method, payload }; server → results and pushed events).
 *   - Calls made before the socket opens (or while it reconnects) are queued and sent on open.
 *   - When the socket drops, calls already sent reject with ApiError('DISCONNECTED') and the
 *     client reconnects with exponential backoff; event listeners stay subscribed.
 *   - A failed result rejects with ApiError(code, message).
 * The socket is created by an injected factory (the browser's WebSocket, or `ws` in tests), so
 * this module needs no DOM types.
 */
import type { EventTypes, RopewalkApi } from '../../main/contract/channels.ts';
import { METHOD_NAMES, type EventName, type MethodName } from '../../main/contract/names.ts';
import type { ServerFrame, WireCall } from '../../main/contract/wire.ts';
import { platformTimers, type Timers } from './debounce.ts';
import { ApiError } from './errors.ts';

/** The part of a WebSocket this client uses (browser WebSocket and `ws` both fit). */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(): void;
  // Handlers take `never` so both the DOM's and `ws`'s event types fit; ours read only `data`.
  onopen: ((event: never) => void) | null;
  onclose: ((event: never) => void) | null;
  onerror: ((event: never) => void) | null;
  onmessage: ((event: never) => void) | null;
}

export type ConnectionStatus = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface WsClientOptions {
  /** First reconnect delay, doubled per failed attempt up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** The reconnect timer's clock (the platform's by default; tests drive it by hand). */
  timers?: Timers;
}

/** The contract plus what only this transport has: connection status and closing. */
export type WsApi = RopewalkApi & {
  onStatus(listener: (status: ConnectionStatus) => void): () => void;
  readonly status: ConnectionStatus;
  close(): void;
};

const OPEN = 1;

interface PendingCall {
  frame: string;
  sent: boolean;
  resolve(value: unknown): void;
  reject(error: Error): void;
}

export function createWsApi(url: string, createSocket: (url: string) => SocketLike, options: WsClientOptions = {}): WsApi {
  const initialDelayMs = options.initialDelayMs ?? 250;
  const maxDelayMs = options.maxDelayMs ?? 5000;
  const timers = options.timers ?? platformTimers;
  const pending = new Map<number, PendingCall>();
  const listeners = new Map<EventName, Set<(data: never) => void>>();
  const statusListeners = new Set<(status: ConnectionStatus) => void>();
  let nextId = 1;
  let socket: SocketLike | null = null;
  let status: ConnectionStatus = 'connecting';
  let attempt = 0;
  let reconnectTimer: unknown = null;
  let closedByUs = false;

  function setStatus(next: ConnectionStatus): void {
    if (status === next) return;
    status = next;
    for (const l of statusListeners) l(next);
  }

  function connect(): void {
    let s: SocketLike;
    try {
      s = createSocket(url);
    } catch {
      scheduleReconnect();
      return;
    }
    socket = s;
    s.onopen = () => {
      attempt = 0;
      setStatus('open');
      for (const call of pending.values()) {
        if (!call.sent) {
          s.send(call.frame);
          call.sent = true;
        }
      }
    };
    s.onmessage = (event: { data: unknown }) => onFrame(event.data);
    s.onerror = () => {
      // A close event follows; reconnecting happens there.
    };
    s.onclose = () => {
      if (socket !== s) return;
      socket = null;
      for (const [id, call] of pending) {
        if (call.sent) {
          pending.delete(id);
          call.reject(new ApiError('DISCONNECTED', 'The connection to Ropewalk was lost before it answered; it is reconnecting, please try again.'));
        }
      }
      if (closedByUs) setStatus('closed');
      else scheduleReconnect();
    };
  }

  function scheduleReconnect(): void {
    setStatus('reconnecting');
    const delay = Math.min(maxDelayMs, initialDelayMs * 2 ** attempt);
    attempt++;
    reconnectTimer = timers.set(() => {
      reconnectTimer = null;
      if (!closedByUs) connect();
    }, delay);
  }

  function onFrame(data: unknown): void {
    let frame: ServerFrame;
    try {
      frame = JSON.parse(typeof data === 'string' ? data : String(data)) as ServerFrame;
    } catch {
      return; // Not ours; the protocol is JSON text frames only.
    }
    if (frame.kind === 'result') {
      const call = pending.get(frame.id);
      if (!call) return;
      pending.delete(frame.id);
      if (frame.ok) call.resolve(frame.value);
      else call.reject(new ApiError(frame.error?.code ?? 'ERROR', frame.error?.message ?? 'The call failed.'));
    } else if (frame.kind === 'event') {
      const set = listeners.get(frame.event);
      if (!set) return;
      for (const l of [...set]) {
        try {
          l(frame.data as never);
        } catch (e) {
          // One broken listener must not stop the others or the socket.
          console.error(e);
        }
      }
    }
  }

  function call(method: MethodName, payload: unknown): Promise<unknown> {
    if (closedByUs) return Promise.reject(new ApiError('CLOSED', 'The connection to Ropewalk is closed.'));
    const id = nextId++;
    const frame: WireCall = { kind: 'call', id, method, payload: payload ?? {} };
    return new Promise((resolve, reject) => {
      const entry: PendingCall = { frame: JSON.stringify(frame), sent: false, resolve, reject };
      pending.set(id, entry);
      if (socket && socket.readyState === OPEN) {
        socket.send(entry.frame);
        entry.sent = true;
      }
    });
  }

  const api = {
    on<E extends EventName>(event: E, listener: (payload: EventTypes[E]) => void): () => void {
      let set = listeners.get(event);
      if (!set) listeners.set(event, (set = new Set()));
      const l = listener as (data: never) => void;
      set.add(l);
      return () => void set.delete(l);
    },
    onStatus(listener: (status: ConnectionStatus) => void): () => void {
      statusListeners.add(listener);
      return () => void statusListeners.delete(listener);
    },
    get status(): ConnectionStatus {
      return status;
    },
    close(): void {
      closedByUs = true;
      if (reconnectTimer !== null) timers.clear(reconnectTimer);
      reconnectTimer = null;
      for (const [id, c] of pending) {
        pending.delete(id);
        c.reject(new ApiError('CLOSED', 'The connection to Ropewalk is closed.'));
      }
      if (socket) socket.close();
      else setStatus('closed');
    },
  } as Record<string, unknown>;
  for (const method of METHOD_NAMES) api[method] = (request: unknown) => call(method, request);

  connect();
  return api as unknown as WsApi;
}
