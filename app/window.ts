/**
 * The main window and the rules every webContents lives by.
 *
 * Contract: the window is isolated, sandboxed and Node-free (security.ts buildWebPreferences),
 * loads only `app://ropewalk/index.html`, cannot navigate away (will-navigate / will-redirect are
 * prevented unless the target is the page itself), opens no windows (http(s) links go to the
 * system browser after the scheme check), attaches no <webview>, and the session grants no
 * permission except clipboard writes from our origin, and starts no downloads.
 */
import { BrowserWindow, shell, type Session, type WebContents, type WebPreferences } from 'electron';
import { buildWebPreferences, externalLinkTarget, isAllowedNavigation, isPermissionAllowed, RENDERER_ENTRY_URL, isAllowedDownload } from './security.ts';

/** Opens an http(s) link in the system browser; anything else is dropped. */
function openExternally(url: string): void {
  const target = externalLinkTarget(url);
  if (!target) return;
  shell.openExternal(target).catch((e: unknown) => console.warn('ropewalk: could not open a link', e));
}

/**
 * Rules for every webContents the app creates (call from `app.on('web-contents-created')`): no new
 * windows, no <webview>.
 */
export function hardenWebContents(contents: WebContents): void {
  contents.setWindowOpenHandler(({ url }) => {
    openExternally(url);
    return { action: 'deny' };
  });
  contents.on('will-attach-webview', (event) => event.preventDefault());
}

/** Navigation rules of the main window's page. */
function lockNavigation(contents: WebContents): void {
  const guard = (event: { url: string; preventDefault(): void }) => {
    if (isAllowedNavigation(event.url, contents.getURL())) return;
    event.preventDefault();
    openExternally(event.url);
  };
  contents.on('will-navigate', guard);
  contents.on('will-redirect', guard);
}

/** Session-wide rules: permissions (security.ts isPermissionAllowed), no downloads but the window's own exports (a save dialog asks where). */
export function hardenSession(ses: Session): void {
  ses.setPermissionRequestHandler((_contents, permission, callback, details) => {
    callback(isPermissionAllowed(permission, details.requestingUrl));
  });
  ses.setPermissionCheckHandler((_contents, permission, requestingOrigin) => isPermissionAllowed(permission, requestingOrigin));
  ses.setDevicePermissionHandler(() => false);
  ses.on('will-download', (event, item) => {
    if (!isAllowedDownload(item.getURL())) event.preventDefault();
  });
}

/**
 * Creates the main window and loads the renderer. `preload` is the bundled preload (.cjs);
 * `devTools` is true only when not packaged.
 */
export function createMainWindow(opts: { preload: string; devTools: boolean }): BrowserWindow {
  const webPreferences: WebPreferences = buildWebPreferences(opts);
  const win = new BrowserWindow({
    width: 1100,
    height: 760,
    minWidth: 560,
    minHeight: 420,
    show: false,
    title: 'Ropewalk',
    webPreferences,
  });
  lockNavigation(win.webContents);
  win.once('ready-to-show', () => win.show());
  win.loadURL(RENDERER_ENTRY_URL).catch((e: unknown) => console.error('ropewalk: the window could not load', e));
  return win;
}
