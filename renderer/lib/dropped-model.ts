/**
 * A `.gguf` dropped on the window opens as the model (any other file stays a document). A page
 * is never told a dropped file's path, so the file is found in the model library by its name and
 * size (a model in Ropewalk's folder or another app's); one the library does not list gets a
 * notice saying where to put it or to type its path.
 */
import type { Stores } from '../stores/index.ts';

/** Whether a dropped file is opened as a model rather than attached: GGUF, by its extension. */
export function isModelFile(name: string): boolean {
  return /\.gguf$/i.test(name);
}

/** The library entry a dropped file is: same file name and size (null: not listed). */
export function findDropped(models: ReadonlyArray<{ path: string; fileBytes: number }>, file: { name: string; size: number }): string | null {
  const base = (p: string) => p.slice(Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\')) + 1);
  return models.find((m) => base(m.path) === file.name && m.fileBytes === file.size)?.path ?? null;
}

/** Opens a dropped GGUF file as the model, or reports why it cannot. */
export async function openDroppedModel(stores: Stores, file: { name: string; size: number }): Promise<void> {
  const lib = stores.library.getState();
  if (!lib.library) await lib.refresh();
  let path = findDropped(stores.library.getState().library?.models ?? [], file);
  if (!path) {
    await stores.library.getState().refresh(); // it may have just been put there
    path = findDropped(stores.library.getState().library?.models ?? [], file);
  }
  if (path) {
    await stores.model.getState().open(path);
    return;
  }
  const folder = stores.library.getState().library?.roots.find((r) => r.source === 'ropewalk')?.path ?? 'Ropewalk’s models folder';
  stores.notices.getState().report(new Error(`${file.name} is not in a folder Ropewalk looks in, and a dropped file's path is not shown to the window: put it in ${folder} and drop it again, or type its path under Model → Model path.`));
}
