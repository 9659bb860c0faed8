/**
 * The application menu: File (open a model file or folder, quit), Edit (clipboard roles), View
 * (reload, zoom; developer tools only when not packaged), Window, Help (About).
 *
 * Contract: "Open Model…" asks for a file or folder with the native dialog and calls
 * `openModel(path)` (the router's `openModel`, not IPC); a failure is shown in an error dialog.
 */
import { app, dialog, Menu, type BrowserWindow, type MenuItemConstructorOptions, type OpenDialogOptions } from 'electron';

export interface MenuDeps {
  openModel: (path: string) => Promise<unknown>;
  window: () => BrowserWindow | null;
  isPackaged: boolean;
}

async function pickAndOpen(deps: MenuDeps, kind: 'file' | 'folder'): Promise<void> {
  const options: OpenDialogOptions =
    kind === 'file'
      ? {
          title: 'Open Model',
          properties: ['openFile'],
          filters: [
            { name: 'llama2.c checkpoint', extensions: ['bin'] },
            { name: 'All files', extensions: ['*'] },
          ],
        }
      : { title: 'Open Model Folder', message: 'A Hugging Face checkpoint folder or a Ropewalk bundle', properties: ['openDirectory'] };
  const win = deps.window();
  const picked = win && !win.isDestroyed() ? await dialog.showOpenDialog(win, options) : await dialog.showOpenDialog(options);
  const path = picked.filePaths[0];
  if (picked.canceled || !path) return;
  try {
    await deps.openModel(path);
  } catch (e) {
    const detail = e instanceof Error ? e.message : String(e);
    const box = { type: 'error' as const, message: 'The model could not be opened.', detail };
    if (win && !win.isDestroyed()) await dialog.showMessageBox(win, box);
    else await dialog.showMessageBox(box);
  }
}

/** Builds the menu (set it with `Menu.setApplicationMenu`). */
export function buildAppMenu(deps: MenuDeps): Menu {
  const isMac = process.platform === 'darwin';
  const open = (kind: 'file' | 'folder') => () => void pickAndOpen(deps, kind);
  const template: MenuItemConstructorOptions[] = [
    ...(isMac ? [{ role: 'appMenu' as const }] : []),
    {
      label: '&File',
      submenu: [
        { label: 'Open Model…', accelerator: 'CmdOrCtrl+O', click: open('file') },
        { label: 'Open Model Folder…', accelerator: 'CmdOrCtrl+Shift+O', click: open('folder') },
        { type: 'separator' },
        isMac ? { role: 'close' } : { role: 'quit' },
      ],
    },
    {
      label: '&Edit',
      submenu: [{ role: 'undo' }, { role: 'redo' }, { type: 'separator' }, { role: 'cut' }, { role: 'copy' }, { role: 'paste' }, { role: 'selectAll' }],
    },
    {
      label: '&View',
      submenu: [
        { role: 'reload' },
        ...(deps.isPackaged ? [] : [{ role: 'forceReload' as const }, { role: 'toggleDevTools' as const }]),
        { type: 'separator' },
        { role: 'resetZoom' },
        { role: 'zoomIn' },
        { role: 'zoomOut' },
        { type: 'separator' },
        { role: 'togglefullscreen' },
      ],
    },
    { role: 'windowMenu' },
    {
      role: 'help',
      submenu: [{ label: 'About Ropewalk', click: () => app.showAboutPanel() }],
    },
  ];
  return Menu.buildFromTemplate(template);
}
