/**
 * The preload bridge's logic, free of `electron` and zod so it can be bundled into the sandboxed
 * preload and tested under plain Node with fakes.
 *
 * Contract:
 * - Main answers every `ropewalk:<method>` invoke with an `IpcResult`: `{ ok: true, value }` or
 *   `{ ok: false, error: { code, message } }` (Electron keeps only the message of an Error thrown
 *   by an invoke handler, so errors travel as values).
 * - `buildApi(invoke, subscribe)` returns exactly the contract's `RopewalkApi`: one function per
 *   METHOD_NAME, which unwraps the result (a failure rejects with a plain `RopewalkError`
 *   object `{ name, code, message }`: contextBridge copies only the message of an Error into the
 *   page, electron/electron#25596, but clones plain objects whole; renderer/api.ts turns it back
 *   into an Error with `.code`), plus `on(event, listener)`, which accepts only EVENT_NAMES, gives the listener the
 *   event's data and nothing else, and returns an unsubscribe function. Nothing else is exposed.
 */
import type { RopewalkApi } from '../main/contract/channels.ts';
import { channelOf, EVENT_NAMES, METHOD_NAMES, type EventName } from '../main/contract/names.ts';
import type { WireError } from '../main/contract/types.ts';

/** What main returns for every invoke. */
export type IpcResult = { ok: true; value: unknown } | { ok: false; error: WireError };

/** What pushes every event on EVENT_CHANNEL carry. */
export interface IpcEventMessage {
  event: EventName;
  data: unknown;
}

/** `ipcRenderer.invoke` narrowed to one request argument. */
export type Invoke = (channel: string, request: unknown) => Promise<unknown>;
/** Listens on EVENT_CHANNEL; the callback gets the message only. Returns the unsubscribe function. */
export type Subscribe = (onMessage: (message: unknown) => void) => () => void;

/** A failed call as it crosses contextBridge: a stable `code` and one readable sentence. */
export interface RopewalkError {
  name: 'RopewalkError';
  code: string;
  message: string;
}

/** A RopewalkError object for `code` and one readable sentence. */
export function ropewalkError(code: string, message: string): RopewalkError {
  return { name: 'RopewalkError', code, message };
}

/** Whether `x` is a RopewalkError object (as it arrives across contextBridge). */
export function isRopewalkError(x: unknown): x is RopewalkError {
  return isObject(x) && x.name === 'RopewalkError' && typeof x.code === 'string' && typeof x.message === 'string';
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null;

/** Whether `x` is one of the contract's event names. */
export function isEventName(x: unknown): x is EventName {
  return typeof x === 'string' && (EVENT_NAMES as readonly string[]).includes(x);
}

/**
 * Turns main's tagged result into the value, or throws a RopewalkError object (`IPC_PROTOCOL` when the
 * result is not an IpcResult at all).
 */
export function unwrapResult(result: unknown): unknown {
  if (isObject(result) && result.ok === true && 'value' in result) return result.value;
  if (isObject(result) && result.ok === false && isObject(result.error)) {
    const { code, message } = result.error;
    throw ropewalkError(typeof code === 'string' ? code : 'INTERNAL', typeof message === 'string' ? message : 'the call failed');
  }
  throw ropewalkError('IPC_PROTOCOL', 'the app answered with something that is not a result');
}

/**
 * Builds `window.ropewalk`. `invoke` and `subscribe` are the only ways out; the returned object is
 * frozen and holds exactly METHOD_NAMES plus `on`.
 */
export function buildApi(invoke: Invoke, subscribe: Subscribe): RopewalkApi {
  const api: Record<string, unknown> = {};
  for (const method of METHOD_NAMES) {
    const channel = channelOf(method);
    api[method] = async (request: unknown) => unwrapResult(await invoke(channel, request));
  }

  // One IPC subscription, opened with the first listener and closed with the last.
  const listeners = new Map<EventName, Set<(data: unknown) => void>>();
  let count = 0;
  let unsubscribeIpc: (() => void) | null = null;
  const dispatch = (message: unknown) => {
    if (!isObject(message) || !isEventName(message.event)) return;
    for (const listener of [...(listeners.get(message.event) ?? [])]) {
      try {
        listener(message.data);
      } catch (e) {
        // One broken listener must not starve the others.
        console.error(`ropewalk: a listener of ${message.event} threw`, e);
      }
    }
  };

  api.on = (event: unknown, listener: unknown): (() => void) => {
    if (!isEventName(event)) throw new TypeError(`unknown event ${String(event).slice(0, 80)}`);
    if (typeof listener !== 'function') throw new TypeError('the listener must be a function');
    // Wrap so that identical functions registered twice are two subscriptions.
    const entry = (data: unknown) => (listener as (data: unknown) => void)(data);
    let set = listeners.get(event);
    if (!set) listeners.set(event, (set = new Set()));
    set.add(entry);
    if (count++ === 0) unsubscribeIpc = subscribe(dispatch);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      set.delete(entry);
      if (--count === 0) {
        unsubscribeIpc?.();
        unsubscribeIpc = null;
      }
    };
  };
  return Object.freeze(api) as RopewalkApi;
}
