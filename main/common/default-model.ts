/**
 * Where the embedded default model (stories260K, a llama2.c checkpoint) lies. It is never copied
 * into the repository: in a checkout it is read from `../shared/models/stories260K` beside the
 * project root; in a packaged app electron-builder copies it into the resources folder
 * (`process.resourcesPath/models/stories260K`). `ROPEWALK_DEFAULT_MODEL` overrides both.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Project root: the folder holding package.json (this file is main/common/default-model.ts or dist/main/…). */
export function projectRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    dir = path.dirname(dir);
  }
  return process.cwd();
}

/** Path of the default model's checkpoint file. */
export function defaultModelPath(): string {
  if (process.env.ROPEWALK_DEFAULT_MODEL) return process.env.ROPEWALK_DEFAULT_MODEL;
  const resources = (process as { resourcesPath?: string }).resourcesPath;
  if (resources) {
    const packaged = path.join(resources, 'models', 'stories260K', 'stories260K.bin');
    if (existsSync(packaged)) return packaged;
  }
  return path.resolve(projectRoot(), '..', 'shared', 'models', 'stories260K', 'stories260K.bin');
}
