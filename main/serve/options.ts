/**
 * Command-line options of `npm run serve`: `--port N` (0–65535, 0 = any free port), `--data DIR`
 * (created if missing; must be a writable folder), `--static DIR`, `--cors ORIGIN` (one origin,
 * scheme://host[:port], allowed to call /v1 from a browser), `--ep auto|cpu|webgpu|cuda` (saved as
 * the execution-provider setting before the model loads), `--threads N` (0–1024, saved as the
 * threads setting before the model loads; 0: the physical cores, main/engine/model/cpu-threads.ts). Bad options throw
 * `UsageError` with one sentence (the CLI prints it and exits 2).
 */
import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { ORIGIN_RULE, parseOrigin } from '../contract/origin.ts';
import { EXECUTION_PROVIDER_PREFERENCES, type ExecutionProviderPreference } from '../contract/types.ts';
import { projectRoot } from '../common/default-model.ts';
import { userDataDir } from './user-data.ts';

export const USAGE = `usage: npm run serve -- [--port N] [--data DIR] [--static DIR] [--cors ORIGIN] [--ep auto|cpu|webgpu|cuda] [--threads N]
  --port N      TCP port on 127.0.0.1 (0 = any free port; default 0)
  --data DIR    folder of the database (default: ${userDataDir()})
  --static DIR  folder of the built renderer (default: dist/renderer)
  --cors ORIGIN let this one origin (e.g. http://localhost:3000) call /v1 from a browser (default: none)
  --ep EP       execution provider, saved as the window's setting (default: the setting, first auto:
                CUDA, else WebGPU on a GPU, else CPU; a fallback is said on stderr)
  --threads N   ONNX Runtime's intra-op threads, saved as the window's setting (0: one per physical core)`;

/** A bad command line: serve prints its one-line message and exits with code 2. */
export class UsageError extends Error {}

export interface ServeOptions {
  port: number;
  dataDir: string;
  staticDir: string;
  /** The one origin allowed to call /v1 from a browser, or null. */
  cors: string | null;
  /** `--ep`: stored as the execution-provider setting before the model loads; null: the setting as it is. */
  ep: ExecutionProviderPreference | null;
  /** `--threads`: stored as the threads setting before the model loads; null: the setting as it is. */
  threads: number | null;
}

/** Parses the command line. @returns 'help' for --help. @throws UsageError with one sentence. */
export function parseServeOptions(argv: string[]): ServeOptions | 'help' {
  const o: ServeOptions = { port: 0, dataDir: userDataDir(), staticDir: path.join(projectRoot(), 'dist', 'renderer'), cors: null, ep: null, threads: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') return 'help';
    const eq = arg.indexOf('=');
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (name !== '--port' && name !== '--data' && name !== '--static' && name !== '--cors' && name !== '--ep' && name !== '--threads') throw new UsageError(`unknown option ${arg} (see --help)`);
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') throw new UsageError(`${name} needs a value`);
    if (name === '--port') {
      if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new UsageError(`--port must be an integer from 0 to 65535, got ${JSON.stringify(value)}`);
      o.port = Number(value);
    } else if (name === '--ep') {
      const ep = EXECUTION_PROVIDER_PREFERENCES.find((p) => p === value);
      if (ep === undefined) throw new UsageError(`--ep must be ${EXECUTION_PROVIDER_PREFERENCES.join(', ')}, got ${JSON.stringify(value)}`);
      o.ep = ep;
    } else if (name === '--threads') {
      if (!/^\d{1,4}$/.test(value) || Number(value) > 1024) throw new UsageError(`--threads must be an integer from 0 to 1024 (0: one per physical core), got ${JSON.stringify(value)}`);
      o.threads = Number(value);
    } else if (name === '--cors') {
      o.cors = corsOrigin(value);
    } else if (name === '--data') {
      o.dataDir = path.resolve(value);
    } else {
      o.staticDir = path.resolve(value);
    }
  }
  checkDataDir(o.dataDir);
  return o;
}

/** `--cors`'s value by the shared origin rule (main/contract/origin.ts). @throws UsageError. */
function corsOrigin(value: string): string {
  const origin = parseOrigin(value);
  if (origin === null) throw new UsageError(`--cors must be ${ORIGIN_RULE}, got ${JSON.stringify(value)}`);
  return origin;
}

/** The data folder exists (or is created) and is writable. @throws UsageError naming the folder and the reason. */
function checkDataDir(dir: string): void {
  const why = (e: unknown) => {
    const code = (e as NodeJS.ErrnoException).code;
    const hint = code === 'ENOTDIR' ? ' (a part of the path is a file)' : code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? ' (not writable here)' : '';
    return new UsageError(`--data ${dir} cannot be used: ${code ?? (e as Error).message}${hint}; choose a writable folder`);
  };
  let st;
  try {
    st = statSync(dir, { throwIfNoEntry: false });
  } catch (e) {
    throw why(e);
  }
  if (st && !st.isDirectory()) throw new UsageError(`--data ${dir} is not a folder`);
  try {
    if (!st) makeFolders(path.resolve(dir));
    accessSync(dir, constants.W_OK);
  } catch (e) {
    throw why(e);
  }
}

/**
 * Creates `dir` and its missing parents one level at a time. (Node's `mkdirSync(recursive)`
 * never returns on a path under /proc, where mkdir fails with ENOENT; one level at a time, that
 * ENOENT is thrown.)
 */
function makeFolders(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; !existsSync(d); d = path.dirname(d)) {
    missing.push(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of missing.reverse()) mkdirSync(d);
}
