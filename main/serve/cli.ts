/**
 * `npm run serve -- [--port N] [--data DIR] [--static DIR] [--cors ORIGIN]`: the whole app in a browser. Serves
 * the built renderer and the router (WebSocket) on 127.0.0.1, with the same services as the
 * desktop app, plus `/health` and the OpenAI-compatible `/v1` (see openai.ts).
 *
 * The first line printed to stdout is the URL (`http://127.0.0.1:PORT/`); notes go to stderr (the
 * model's ready line, then, once, the caution when the max context is above the trained context).
 * Exit codes: 0 after SIGINT/SIGTERM (answer stopped and kept, worker stopped, database closed),
 * 130 after a second one (at once, once the engine worker is at a safe point: exitProcess; ended
 * by that signal instead when one native run outlasts 3 s),
 * 1 when the server cannot start (an unreadable database), 2 for a bad option, a port taken, an
 * unusable data folder or a database from a newer version (one line on stderr). A damaged
 * database is moved aside and a fresh one started, with one `warning:` line on stderr.
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import { maxContextCaution } from '../contract/context-caution.ts';
import { firstLine, ServiceError } from '../services/errors.ts';
import { startBackend } from '../composition/start-backend.ts';
import { exitProcess } from '../engine-host/host.ts';
import { parseServeOptions, USAGE, UsageError } from './options.ts';
import { startServer } from './server.ts';

async function main(argv: string[]): Promise<void> {
  const opts = parseServeOptions(argv);
  if (opts === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const services = await startBackend({ dataDir: opts.dataDir, loadModel: false, ...(opts.ep ? { executionProvider: opts.ep } : {}), ...(opts.threads !== null ? { threads: opts.threads } : {}) });
  let server;
  try {
    server = await startServer({ router: services.router, port: opts.port, staticDir: opts.staticDir, completions: services.completions, cors: opts.cors });
  } catch (e) {
    await services.dispose();
    throw listenError(e, opts.port);
  }
  // The URL is the first line on stdout: scripts and tests read it.
  process.stdout.write(`${server.url}\n`);
  if (statSync(path.join(opts.staticDir, 'index.html'), { throwIfNoEntry: false }) === undefined) {
    process.stderr.write(`note: ${opts.staticDir} has no index.html; build the renderer (npm run serve builds it)\n`);
  }
  process.stderr.write(`data: ${services.store.file}\n`);
  if (services.storeRecovery) process.stderr.write(`warning: ${services.storeRecovery.message}\n`);
  // A crash of the engine's process is said where the operator looks (the services restart it).
  services.host.onCrash((e) => process.stderr.write(`warning: ${e.message}\n`));
  void services.models.start().then(() => {
    const s = services.models.state;
    if (s.error) process.stderr.write(`model: ${s.error}\n`);
    else if (s.info) {
      process.stderr.write(`model: ${s.info.name} ready (${s.info.executionProvider}, max context ${s.info.maxContext})\n`);
      // Why the provider (or backend) is not the one asked for, as the chat CLI says it.
      if (s.info.fallbackReason) process.stderr.write(`note: ${s.info.fallbackReason}\n`);
      // The chat CLI's caution (main/contract/context-caution.ts), once: with the ready line, not on reloads
      // (the window that changes the max context shows it at the field).
      const caution = maxContextCaution(s.info.maxContext, s.info.trainedContext);
      if (caution) process.stderr.write(`note: ${caution}\n`);
    }
  });

  let stopping = false;
  let exitCode = 0;
  const stop = (signal: NodeJS.Signals) => {
    // A second signal: out now, without waiting for the answer to be stored or the database to
    // close, but never while the engine worker is inside ONNX Runtime (that aborted: exit 134).
    // The first signal's shutdown may still finish first: it exits with 130 too.
    if (stopping) return void exitProcess((exitCode = 130), signal);
    stopping = true;
    process.stderr.write(`${signal}: shutting down\n`);
    void (async () => {
      await server.close();
      await services.dispose();
      process.exit(exitCode);
    })();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

/** A port that cannot be listened on, in words that say what to do (a UsageError: exit 2); other errors as they are. */
function listenError(e: unknown, port: number | undefined): unknown {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return new UsageError(`port ${port} is already in use on 127.0.0.1: choose another with --port N, or --port 0 for any free port`);
  if (code === 'EACCES') return new UsageError(`port ${port} needs privileges on this system: choose one above 1023, or --port 0 for any free port`);
  return e;
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`error: ${firstLine(e)}\n`);
  process.exit(e instanceof UsageError || isDataError(e) ? 2 : 1);
});

/** An unusable data folder or a database from a newer version: exit 2, as docs/serve.md says. */
function isDataError(e: unknown): boolean {
  return e instanceof ServiceError && (e.code === 'DATA_DIR' || e.code === 'SCHEMA_TOO_NEW');
}
