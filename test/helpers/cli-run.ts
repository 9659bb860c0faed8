/**
 * Runs the terminal chat (`main/cli/chat.ts`) as a subprocess, as `npm run chat` does, with its
 * import cache in a folder the test owns; plus an independent llama2.c decoder (tok512.bin read
 * here, not through the engine) to check the token ids the CLI reports.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT, STORIES_TOKENIZER } from './paths.ts';

export interface ChatRun {
  args: string[];
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A fresh, empty import cache folder for one test. */
export function freshCacheDir(): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), 'ropewalk-cli-cache-'));
}

/**
 * `npm run chat -- ...args` with ROPEWALK_CACHE_DIR = cacheDir; never throws on a non-zero exit.
 * Without an `--ep` in `args` the run gets `--ep cpu` (before them; `args` stay as reported):
 * the default, auto, depends on the machine and says so on stderr (a software Vulkan driver
 * here), which the tests of other notes would see; the auto tests pass `--ep auto` themselves.
 * `env` adds to (or with undefined removes from) the child's environment.
 */
export function runChat(args: string[], cacheDir: string, timeoutMs = 60_000, extraEnv: NodeJS.ProcessEnv = {}): Promise<ChatRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, ROPEWALK_CACHE_DIR: cacheDir, ...extraEnv };
  for (const [k, v] of Object.entries(extraEnv)) if (v === undefined) delete env[k];
  const pinned = args.some((a) => a === '--ep' || a.startsWith('--ep=')) ? [] : ['--ep', 'cpu'];
  delete env.ROPEWALK_DEFAULT_MODEL;
  delete env.NODE_TEST_CONTEXT; // the child is the CLI, not a test file
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'main/cli/chat.ts', ...pinned, ...args],
      { cwd: PROJECT_ROOT, env, timeout: timeoutMs, maxBuffer: 64 << 20, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null) : 0;
        resolve({ args, code, stdout, stderr });
      },
    );
  });
}

/** Runs `fn` over `items` with at most `limit` running at once; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * Runs several chats on one cache folder: the first alone (it imports the model into the cache),
 * the rest `limit` at a time. Concurrent first starts on an empty cache are a separate concern
 * (see bad-inputs.test.ts), so they are not mixed into unrelated checks.
 */
export async function runBatch(argsList: readonly string[][], cacheDir: string, limit = 3): Promise<ChatRun[]> {
  if (argsList.length === 0) return [];
  const first = await runChat(argsList[0], cacheDir);
  return [first, ...(await mapLimit(argsList.slice(1), limit, (a) => runChat(a, cacheDir)))];
}

/** Describes a run for assertion messages. */
export function describeRun(r: ChatRun): string {
  return `chat ${JSON.stringify(r.args)} → exit ${r.code}\nstdout: ${r.stdout.slice(0, 400)}\nstderr: ${r.stderr}`;
}

/**
 * The run failed the user-facing way: exit `code`, exactly one non-empty line on stderr,
 * starting "error:", matching `re`, and no stack frames.
 */
export function assertOneLineError(r: ChatRun, code: number, re: RegExp): string {
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  assert.equal(r.code, code, describeRun(r));
  assert.equal(lines.length, 1, `stderr must be exactly one line: ${describeRun(r)}`);
  assert.doesNotMatch(r.stderr, /\n\s+at /, `stack frame on stderr: ${describeRun(r)}`);
  assert.doesNotMatch(r.stderr, /^\s+at /m, `stack frame on stderr: ${describeRun(r)}`);
  assert.match(lines[0], /^error: /, describeRun(r));
  assert.match(lines[0], re, describeRun(r));
  return lines[0];
}

/** What `--json` prints. */
export interface ChatJson {
  text: string;
  promptTokens: number[];
  tokens: number[];
  finishReason: 'stop' | 'length' | 'context-full' | 'cancelled' | 'error';
  stats: {
    backend: 'native' | 'js';
    executionProvider: 'cpu' | 'webgpu' | 'cuda';
    nodesOnCpu: number | null;
    ttftMs: number;
    prefillTokensPerSec: number;
    decodeTokensPerSec: number;
    contextUsed: number;
    contextShifts: number;
    droppedTokens: number;
    maxContext: number;
    rope: { capacity: number; rowsComputed: number; growths: number; bytes: number };
    kv: { capacity: number; growths: number; bytes: number };
  };
  model: { name: string; weights: { formats: string; bundleBytes: number; residentBytes: number }; kvCacheDtype?: 'float32' | 'float16' };
}

/** A successful `--json` run: exit 0, stdout is exactly one JSON object (one line). */
export function parseJsonRun(r: ChatRun): ChatJson {
  assert.equal(r.code, 0, describeRun(r));
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, `--json must print one line: ${describeRun(r)}`);
  return JSON.parse(lines[0]) as ChatJson;
}

let pieces: Uint8Array[] | null = null;

/** Piece bytes of tok512.bin by id, read with the llama2.c layout (independent of the engine). */
function tok512Pieces(): Uint8Array[] {
  if (pieces) return pieces;
  const buf = readFileSync(STORIES_TOKENIZER);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: Uint8Array[] = [];
  for (let off = 4; off < buf.length; ) {
    const len = v.getInt32(off + 4, true);
    const bytes = buf.subarray(off + 8, off + 8 + len);
    const m = /^<0x([0-9A-F]{2})>$/.exec(bytes.toString('latin1'));
    out.push(m ? Uint8Array.of(parseInt(m[1], 16)) : new Uint8Array(bytes));
    off += 8 + len;
  }
  return (pieces = out);
}

/**
 * Decodes stories260K token ids like llama2.c run.c: byte pieces → raw bytes, then UTF-8. The
 * control tokens (0 <unk>, 1 BOS, 2 EOS) render as nothing, as in the engine's text.
 */
export function decodeTok512(ids: readonly number[]): string {
  const p = tok512Pieces();
  const parts = ids.map((id) => {
    assert.ok(Number.isInteger(id) && id >= 0 && id < p.length, `token id ${id} out of range`);
    return id <= 2 ? new Uint8Array(0) : p[id];
  });
  return Buffer.concat(parts).toString('utf8');
}
