/**
 * The e2e harness shared by test/e2e/*: builds the renderer, starts `serve` mode on a free port
 * over a fresh data folder (optionally seeded through the real ConversationStore), and launches
 * Debian's headless Chromium with the project's flags. `close()` ends both and removes the folder.
 * Also the small Playwright helpers every e2e needs (poll until, the artifacts folder).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type Browser } from 'playwright-core';
import { ConversationStore } from '../../main/services/store.ts';
import { buildRenderer } from '../../renderer/build.ts';
import { PROJECT_ROOT } from './paths.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = path.join(PROJECT_ROOT, 'test', 'artifacts');

export interface E2eApp {
  url: string;
  browser: Browser;
  dataDir: string;
  /** The serve process's id (its engine runs in a child of it). */
  servePid: number;
  close(): Promise<void>;
}

/**
 * Builds the renderer, starts serve mode (seeded by `seed` before it opens the database; `env`
 * added to its environment, e.g. ROPEWALK_DEFAULT_MODEL) and Chromium. `reuse.dataDir`: serve
 * over that data folder (an earlier app's, for a restart; or one on a small tmpfs), which
 * `close()` then leaves in place.
 */
export async function startE2eApp(seed?: (store: ConversationStore) => void, env: Record<string, string> = {}, reuse: { dataDir?: string } = {}): Promise<E2eApp> {
  assert.ok(existsSync(CHROMIUM), `Debian's chromium is needed at ${CHROMIUM} (apt-get install chromium)`);
  const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-e2e-'));
  const dataDir = reuse.dataDir ?? path.join(root, 'data');
  await buildRenderer({});
  mkdirSync(dataDir, { recursive: true });
  if (seed) {
    const store = new ConversationStore(dataDir);
    seed(store);
    store.close();
  }
  const server: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'main/serve/cli.ts', '--port', '0', '--data', dataDir], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ROPEWALK_CACHE_DIR: path.join(root, 'cache'), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const firstLine = await new Promise<string>((resolve, reject) => {
    createInterface({ input: server.stdout! }).once('line', resolve);
    server.once('exit', (code) => reject(new Error(`serve exited with ${code} before printing its URL`)));
  });
  assert.match(firstLine, /^http:\/\/127\.0\.0\.1:\d+\/$/, 'the first line serve prints is its URL');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    url: firstLine,
    browser,
    dataDir,
    servePid: server.pid!,
    async close() {
      await browser.close();
      if (server.exitCode === null) {
        const exited = new Promise((r) => server.once('exit', r));
        server.kill('SIGTERM');
        await exited;
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Polls `probe` until it returns true (Playwright's own waits, without DOM types in Node): test/helpers/until.ts. */
export { until } from './until.ts';
