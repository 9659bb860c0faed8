/**
 * Paths in a packaged Electron app: electron-builder puts the app in `resources/app.asar` and the
 * files listed in electron-builder.yml `asarUnpack` beside it in `resources/app.asar.unpacked`.
 * Electron's fs reads inside the archive; the dynamic loader and a new process's entry point cannot,
 * so those are given the unpacked path. Pure string work, platform-free.
 */

/**
 * The real path of a file that electron-builder unpacked beside the archive: `…/app.asar/x` is
 * `…/app.asar.unpacked/x`. Other paths are returned as they are.
 */
export function unpackedPath(p: string): string {
  return p.replace(/([\\/])app\.asar([\\/])/, '$1app.asar.unpacked$2');
}
