/**
 * The platform's user-data folder for Ropewalk: the folder Electron's `app.getPath('userData')`
 * gives for productName "Ropewalk", so `serve` mode and the desktop app share one database.
 *   Linux: $XDG_CONFIG_HOME/Ropewalk or ~/.config/Ropewalk
 *   macOS: ~/Library/Application Support/Ropewalk
 *   Windows: %APPDATA%\Ropewalk (or ~\AppData\Roaming\Ropewalk)
 */
import os from 'node:os';
import path from 'node:path';

export const PRODUCT_NAME = 'Ropewalk';

/** The user-data folder for `platform` (default: this one) and environment. */
export function userDataDir(platform: NodeJS.Platform = process.platform, env: NodeJS.ProcessEnv = process.env, home = os.homedir()): string {
  if (platform === 'darwin') return path.join(home, 'Library', 'Application Support', PRODUCT_NAME);
  if (platform === 'win32') return path.join(env.APPDATA || path.join(home, 'AppData', 'Roaming'), PRODUCT_NAME);
  return path.join(env.XDG_CONFIG_HOME || path.join(home, '.config'), PRODUCT_NAME);
}
