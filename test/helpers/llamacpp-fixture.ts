/**
 * The llama.cpp oracle for a test file: node-llama-cpp's prebuilt CPU build (never built here),
 * loaded once before the file's tests and disposed after, with a temp folder for the GGUF files
 * the tests write, removed after.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { getLlama, type Llama } from 'node-llama-cpp';

/**
 * Registers the file's before/after hooks; `onLoaded` gets the Llama instance before the first
 * test. @returns the temp folder (under the OS's, named `prefix…`).
 */
export function useLlamaCpp(prefix: string, onLoaded: (llama: Llama) => void): string {
  const tmp = mkdtempSync(path.join(os.tmpdir(), prefix));
  let llama: Llama | null = null;
  before(async () => {
    llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' as never });
    onLoaded(llama);
  });
  after(async () => {
    await llama?.dispose();
    rmSync(tmp, { recursive: true, force: true });
  });
  return tmp;
}
