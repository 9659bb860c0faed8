/**
 * Registers the typed router on `ipcMain` and forwards its events to the window.
 *
 * Contract: one `ipcMain.handle('ropewalk:<method>')` per METHOD_NAME, nothing else. Each checks
 * the sender (our window's webContents, its main frame, on `app://ropewalk`) before the router
 * sees the payload, and answers with an IpcResult (ipc-dispatch.ts). Router events go to the
 * window as `webContents.send(EVENT_CHANNEL, { event, data })`, only while the window is alive
 * and showing our page.
 */
import { ipcMain, type BrowserWindow, type IpcMainInvokeEvent } from 'electron';
import { channelOf, EVENT_CHANNEL, METHOD_NAMES } from '../main/contract/names.ts';
import type { Router } from '../main/composition/router.ts';
import type { IpcEventMessage } from './bridge.ts';
import { createInvokeHandler, type CallableRouter } from './ipc-dispatch.ts';
import { DisposableStore, toDisposable, type Disposable } from './lifecycle.ts';
import { isTrustedRendererUrl, isTrustedSender, type SenderFacts } from './security.ts';

type WindowRef = () => BrowserWindow | null;

function liveWindow(window: WindowRef): BrowserWindow | null {
  const win = window();
  return win && !win.isDestroyed() && !win.webContents.isDestroyed() ? win : null;
}

/** Reads what the sender check needs from the event; a frame that is gone yields null facts. */
function senderFacts(event: IpcMainInvokeEvent): SenderFacts {
  try {
    const frame = event.senderFrame;
    return { webContentsId: event.sender.id, frameUrl: frame?.url ?? null, isMainFrame: frame !== null && frame.parent === null };
  } catch {
    // Accessing a disposed frame throws; such a sender is not trusted.
    return { webContentsId: -1, frameUrl: null, isMainFrame: false };
  }
}

/**
 * Registers one invoke handler per contract method. `router` resolves when services have started.
 * Disposing removes every handler.
 */
export function registerIpc(router: () => Promise<CallableRouter>, window: WindowRef): Disposable {
  const store = new DisposableStore();
  const isTrusted = (event: IpcMainInvokeEvent) => isTrustedSender(senderFacts(event), liveWindow(window)?.webContents.id ?? null);
  for (const method of METHOD_NAMES) {
    const channel = channelOf(method);
    ipcMain.handle(
      channel,
      createInvokeHandler<IpcMainInvokeEvent>(method, {
        router,
        isTrustedSender: isTrusted,
        onRefused: (m, code) => console.warn(`ropewalk: refused ${m} (${code})`),
      }),
    );
    store.add(toDisposable(() => ipcMain.removeHandler(channel)));
  }
  return store;
}

/** Forwards every router event to the window while it shows our page. */
export function forwardEvents(router: Router, window: WindowRef): Disposable {
  return toDisposable(
    router.onEvent((event, data) => {
      const win = liveWindow(window);
      if (!win || !isTrustedRendererUrl(win.webContents.getURL())) return;
      win.webContents.send(EVENT_CHANNEL, { event, data } satisfies IpcEventMessage);
    }),
  );
}
