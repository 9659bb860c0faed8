/**
 * A REAL Ropewalk `serve` in this process (services, engine worker, stories260K, the HTTP server
 * on 127.0.0.1 port 0 with a placeholder window), for tests that need an OpenAI-compatible server
 * to talk to: the remote engine's integration and e2e tests. `close()` stops both.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import { startServer, type RunningServer } from '../../main/serve/server.ts';
import { STORIES_BIN } from './paths.ts';

export interface ApiServer {
  backend: Backend;
  server: RunningServer;
  /** `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  close(): Promise<void>;
}

/**
 * Starts the services over `dir` (data and static files go below it; the cache too unless
 * `opts.cacheDir`) with `opts.defaultModel` (stories260K by default) and serves them; resolves once
 * the model is loaded.
 */
export async function startApiServer(dir: string, opts: { defaultModel?: string; cacheDir?: string } = {}): Promise<ApiServer> {
  mkdirSync(path.join(dir, 'static'), { recursive: true });
  writeFileSync(path.join(dir, 'static', 'index.html'), '<!doctype html><title>Ropewalk</title>');
  const backend = await startBackend({ dataDir: path.join(dir, 'data'), cacheDir: opts.cacheDir ?? path.join(dir, 'cache'), defaultModel: opts.defaultModel ?? STORIES_BIN });
  const server = await startServer({ router: backend.router, port: 0, staticDir: path.join(dir, 'static'), completions: backend.completions });
  await backend.modelLoaded;
  return {
    backend,
    server,
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    async close() {
      await server.close();
      await backend.dispose();
    },
  };
}
