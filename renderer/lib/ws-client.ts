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

const DISCONNECTED = 'The connection to Ropewalk was lost before it answered; it is reconnecting, please try again.';
const CLOSED = 'The connection to Ropewalk is closed.';

interface PendingCall {
  frame: string;
  sent: boolean;
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** Calls awaiting their result, by call id: queued until the socket is open, then sent once. */
class PendingCalls {
  private readonly calls = new Map<number, PendingCall>();
  private nextId = 1;

  /** Queues a call (sent now when `socket` is open); settles with its result frame. */
  add(method: MethodName, payload: unknown, socket: SocketLike | null): Promise<unknown> {
    const id = this.nextId++;
    const frame: WireCall = { kind: 'call', id, method, payload: payload ?? {} };
    return new Promise((resolve, reject) => {
      const entry: PendingCall = { frame: JSON.stringify(frame), sent: false, resolve, reject };
      this.calls.set(id, entry);
      if (socket && socket.readyState === OPEN) this.send(socket, entry);
    });
  }

  /** Sends every call not sent yet (the socket just opened). */
  sendQueued(socket: SocketLike): void {
    for (const call of this.calls.values()) if (!call.sent) this.send(socket, call);
  }

  /** Settles the call a result frame answers (unknown ids are ignored). */
  settle(frame: Extract<ServerFrame, { kind: 'result' }>): void {
    const call = this.calls.get(frame.id);
    if (!call) return;
    this.calls.delete(frame.id);
    if (frame.ok) call.resolve(frame.value);
    else call.reject(new ApiError(frame.error?.code ?? 'ERROR', frame.error?.message ?? 'The call failed.'));
  }

  /** Rejects the calls already sent (their answers are lost with the socket), or every call. */
  reject(which: 'sent' | 'all', error: () => Error): void {
    for (const [id, call] of this.calls) {
      if (which === 'all' || call.sent) {
        this.calls.delete(id);
        call.reject(error());
      }
    }
  }

  private send(socket: SocketLike, call: PendingCall): void {
    socket.send(call.frame);
    call.sent = true;
  }
}

/** Pushed-event listeners by event name; one that throws does not stop the others. */
class EventListeners {
  private readonly byEvent = new Map<EventName, Set<(data: never) => void>>();

  on(event: EventName, listener: (data: never) => void): () => void {
    let set = this.byEvent.get(event);
    if (!set) this.byEvent.set(event, (set = new Set()));
    set.add(listener);
    return () => void set.delete(listener);
  }

  dispatch(event: EventName, data: unknown): void {
    for (const l of [...(this.byEvent.get(event) ?? [])]) {
      try {
        l(data as never);
      } catch (e) {
        // One broken listener must not stop the others or the socket.
        console.error(e);
      }
    }
  }
}

/** One socket at a time to `url`, reconnected with exponential backoff until closed by us. */
class WsConnection {
  readonly calls = new PendingCalls();
  readonly events = new EventListeners();
  private readonly statusListeners = new Set<(status: ConnectionStatus) => void>();
  private socket: SocketLike | null = null;
  private current: ConnectionStatus = 'connecting';
  private attempt = 0;
  private reconnectTimer: unknown = null;
  private closedByUs = false;
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timers: Timers;

  constructor(
    private readonly url: string,
    private readonly createSocket: (url: string) => SocketLike,
    options: WsClientOptions,
  ) {
    this.initialDelayMs = options.initialDelayMs ?? 250;
    this.maxDelayMs = options.maxDelayMs ?? 5000;
    this.timers = options.timers ?? platformTimers;
  }

  get status(): ConnectionStatus {
    return this.current;
  }

  onStatus(listener: (status: ConnectionStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => void this.statusListeners.delete(listener);
  }

  call(method: MethodName, payload: unknown): Promise<unknown> {
    if (this.closedByUs) return Promise.reject(new ApiError('CLOSED', CLOSED));
    return this.calls.add(method, payload, this.socket);
  }

  connect(): void {
    let s: SocketLike;
    try {
      s = this.createSocket(this.url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = s;
    s.onopen = () => {
      this.attempt = 0;
      this.setStatus('open');
      this.calls.sendQueued(s);
    };
    s.onmessage = (event: { data: unknown }) => this.onFrame(event.data);
    s.onerror = () => {
      // A close event follows; reconnecting happens there.
    };
    s.onclose = () => this.onClose(s);
  }

  close(): void {
    this.closedByUs = true;
    if (this.reconnectTimer !== null) this.timers.clear(this.reconnectTimer);
    this.reconnectTimer = null;
    this.calls.reject('all', () => new ApiError('CLOSED', CLOSED));
    if (this.socket) this.socket.close();
    else this.setStatus('closed');
  }

  private onClose(s: SocketLike): void {
    if (this.socket !== s) return;
    this.socket = null;
    this.calls.reject('sent', () => new ApiError('DISCONNECTED', DISCONNECTED));
    if (this.closedByUs) this.setStatus('closed');
    else this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.setStatus('reconnecting');
    const delay = Math.min(this.maxDelayMs, this.initialDelayMs * 2 ** this.attempt);
    this.attempt++;
    this.reconnectTimer = this.timers.set(() => {
      this.reconnectTimer = null;
      if (!this.closedByUs) this.connect();
    }, delay);
  }

  private onFrame(data: unknown): void {
    let frame: ServerFrame;
    try {
      frame = JSON.parse(typeof data === 'string' ? data : String(data)) as ServerFrame;
    } catch {
      return; // Not ours; the protocol is JSON text frames only.
    }
    if (frame.kind === 'result') this.calls.settle(frame);
    else if (frame.kind === 'event') this.events.dispatch(frame.event, frame.data);
  }

  private setStatus(next: ConnectionStatus): void {
    if (this.current === next) return;
    this.current = next;
    for (const l of this.statusListeners) l(next);
  }
}

/**
 * The contract over one WebSocket to `url` (see the file's contract): every method of
 * METHOD_NAMES as a call, `on` for pushed events, the connection's status, `close`.
 */
export function createWsApi(url: string, createSocket: (url: string) => SocketLike, options: WsClientOptions = {}): WsApi {
  const connection = new WsConnection(url, createSocket, options);
  const api = {
    on<E extends EventName>(event: E, listener: (payload: EventTypes[E]) => void): () => void {
      return connection.events.on(event, listener as (data: never) => void);
    },
    onStatus: (listener: (status: ConnectionStatus) => void) => connection.onStatus(listener),
    get status(): ConnectionStatus {
      return connection.status;
    },
    close: () => connection.close(),
  } as Record<string, unknown>;
  for (const method of METHOD_NAMES) api[method] = (request: unknown) => connection.call(method, request);
  connection.connect();
  return api as unknown as WsApi;
}
