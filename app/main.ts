/**
 * The Electron main process: one instance, one window, the services, and the bridge between them.
 *
 * Contract:
 * - Before `ready`: the `app:` scheme is registered privileged, the sandbox is forced on for every
 *   renderer, and a second instance hands over to the first (which focuses its window) and quits.
 * - On `ready`: services start (`startBackend({ dataDir: userData })`, a remote engine's API key
 *   encrypted with safeStorage: secrets.ts); the renderer is served
 *   on `app://ropewalk/` from `dist/renderer` (beside this bundle, inside the asar when packaged);
 *   the router is registered on `ipcMain` (one handler per contract method, every sender checked)
 *   and its events are forwarded to the window; the menu is set; the window is created.
 * - On quit: IPC handlers and forwarding are removed, then services are disposed (bounded wait),
 *   then the app exits.
 *
 * Built by app/build.ts into dist/app/main.js (ESM, `import.meta.url` is the bundle's URL); the
 * engine worker is dist/app/worker.js beside it, which is where main/engine-host/host.ts looks.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { app, BrowserWindow, dialog, Menu, safeStorage, session, utilityProcess } from 'electron';
import type { Router } from '../main/composition/router.ts';
import { startBackend } from '../main/composition/start-backend.ts';
import { forwardEvents, registerIpc } from './ipc.ts';
import { DisposableStore } from './lifecycle.ts';
import { buildAppMenu } from './menu.ts';
import { registerAppScheme, serveRenderer } from './scheme.ts';
import { safeStorageCipher } from './secrets.ts';
import { utilityEngineSpawn } from './utility-engine.ts';
import { createMainWindow, hardenSession, hardenWebContents } from './window.ts';

type Services = Awaited<ReturnType<typeof startBackend>>;

const APP_DIR = path.dirname(fileURLToPath(import.meta.url));
const PRELOAD_PATH = path.join(APP_DIR, 'preload.cjs');
const RENDERER_DIR = path.join(APP_DIR, '..', 'renderer');
/** How long quitting waits for the services (worker, database) to close. */
const SHUTDOWN_TIMEOUT_MS = 5000;

registerAppScheme();
app.enableSandbox();

if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  runApp();
}

function runApp(): void {
  // The engine's worker thread finds the packaged native addon under the resources folder
  // (main/engine/model/native-addon.ts); a worker copies process.env when it starts.
  if (app.isPackaged) process.env.ROPEWALK_RESOURCES_PATH ??= process.resourcesPath;
  let window: BrowserWindow | null = null;
  let services: Promise<Services> | null = null;
  let shutdown: 'running' | 'stopping' | 'stopped' = 'running';
  const store = new DisposableStore();
  const currentWindow = () => (window && !window.isDestroyed() ? window : null);
  const router = async (): Promise<Router> => {
    if (!services) throw new Error('the services have not started');
    return (await services).router;
  };

  const openWindow = () => {
    window = createMainWindow({ preload: PRELOAD_PATH, devTools: !app.isPackaged });
    window.on('closed', () => (window = null));
  };

  app.on('second-instance', () => {
    const win = currentWindow();
    if (!win) return;
    if (win.isMinimized()) win.restore();
    win.focus();
  });
  app.on('web-contents-created', (_event, contents) => hardenWebContents(contents));
  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit();
  });
  app.on('activate', () => {
    if (app.isReady() && shutdown === 'running' && BrowserWindow.getAllWindows().length === 0) openWindow();
  });

  app.on('before-quit', (event) => {
    if (shutdown === 'stopped') return;
    event.preventDefault();
    if (shutdown === 'stopping') return;
    shutdown = 'stopping';
    store.dispose();
    void disposeServices(services).finally(() => {
      shutdown = 'stopped';
      app.quit();
    });
  });

  app.whenReady().then(
    () => {
      if (!existsSync(path.join(RENDERER_DIR, 'index.html'))) {
        fatal(`The window's files are missing (${RENDERER_DIR}). Run "npm run build:app" first.`);
        return;
      }
      app.setAboutPanelOptions({ applicationName: 'Ropewalk', applicationVersion: app.getVersion() });
      hardenSession(session.defaultSession);
      store.add(serveRenderer(RENDERER_DIR));
      // safeStorage is usable only after `ready`.
      const started = startBackend({
        dataDir: app.getPath('userData'),
        localServer: true,
        secretCipher: safeStorageCipher(safeStorage),
        chooseModelFile: () => chooseModelFile(currentWindow()),
        // The engine in a utility process (app/utility-engine.ts); Electron's own fork is typed against electron.d.ts here.
        engineSpawn: utilityEngineSpawn((modulePath, args, options) => utilityProcess.fork(modulePath, args, options)),
      });
      services = started;
      store.add(registerIpc(router, currentWindow));
      started.then(
        (s) => {
          if (shutdown === 'running') store.add(forwardEvents(s.router, currentWindow));
          // A damaged database was moved aside and a fresh one started: say so, naming both files.
          if (s.storeRecovery) void dialog.showMessageBox({ type: 'warning', title: 'Ropewalk', message: 'Your conversations could not be opened', detail: s.storeRecovery.message });
        },
        (e: unknown) => fatal(`The app's services could not start: ${e instanceof Error ? e.message : String(e)}`),
      );
      Menu.setApplicationMenu(
        buildAppMenu({
          openModel: async (modelPath) => (await router()).call('openModel', { path: modelPath }),
          window: currentWindow,
          isPackaged: app.isPackaged,
        }),
      );
      openWindow();
    },
    (e: unknown) => fatal(`Ropewalk could not start: ${e instanceof Error ? e.message : String(e)}`),
  );
}

/** Disposes the services if they started, waiting at most SHUTDOWN_TIMEOUT_MS. Never rejects. */
async function disposeServices(services: Promise<Services> | null): Promise<void> {
  if (!services) return;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      console.warn('ropewalk: services did not stop in time; quitting anyway');
      resolve();
    }, SHUTDOWN_TIMEOUT_MS);
  });
  const dispose = services.then(
    (s) => s.dispose(),
    () => undefined, // never started: nothing to dispose
  );
  try {
    await Promise.race([dispose, timeout]);
  } catch (e) {
    console.error('ropewalk: disposing the services failed', e);
  } finally {
    clearTimeout(timer);
  }
}

/** Shows one readable sentence and quits. */
function fatal(message: string): void {
  console.error(`ropewalk: ${message}`);
  dialog.showErrorBox('Ropewalk', message);
  app.quit();
}

/**
 * The native open dialog for a model file (GGUF, a llama2.c .bin, or any file: a bundle or
 * Hugging Face folder is typed or chosen from the library). @returns the path, or null when cancelled.
 */
async function chooseModelFile(parent: BrowserWindow | null): Promise<string | null> {
  const options: Electron.OpenDialogOptions = {
    title: 'Open a model',
    properties: ['openFile'],
    filters: [
      { name: 'Models (GGUF, llama2.c)', extensions: ['gguf', 'bin'] },
      { name: 'All files', extensions: ['*'] },
    ],
  };
  const r = parent ? await dialog.showOpenDialog(parent, options) : await dialog.showOpenDialog(options);
  return r.canceled || r.filePaths.length === 0 ? null : r.filePaths[0];
}
