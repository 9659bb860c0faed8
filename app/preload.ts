/**
 * The sandboxed preload: exposes exactly the IPC contract as `window.ropewalk` and nothing else
 * (no ipcRenderer, no generic invoke). Built by app/build.ts into one CommonJS file,
 * dist/app/preload.cjs, whose only require is `electron` (a sandboxed preload can require nothing
 * else); it must not pull in zod or Node modules.
 *
 * Contract: see app/bridge.ts. Every method invokes `ropewalk:<method>` with its one request and
 * unwraps main's tagged result; `on(event, listener)` accepts only contract event names, hands the
 * listener the event's data (never the IpcRendererEvent) and returns an unsubscribe function.
 */
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import { EVENT_CHANNEL } from '../main/contract/names.ts';
import { buildApi } from './bridge.ts';

const api = buildApi(
  (channel, request) => ipcRenderer.invoke(channel, request),
  (onMessage) => {
    const listener = (_event: IpcRendererEvent, message: unknown) => onMessage(message);
    ipcRenderer.on(EVENT_CHANNEL, listener);
    return () => {
      ipcRenderer.removeListener(EVENT_CHANNEL, listener);
    };
  },
);

contextBridge.exposeInMainWorld('ropewalk', api);
