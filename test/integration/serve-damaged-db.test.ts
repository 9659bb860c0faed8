/**
 * `serve` with a damaged database (the issue: random bytes stopped it with exit 1 and "error:
 * file is not a database", naming no file): it starts, says in one `warning:` line which file was
 * moved where, and serves; a database from a newer version exits 2 with one line, as the README
 * says of an unusable --data folder.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { ConversationStore, DB_FILE } from '../../main/services/store.ts';
import { PROJECT_ROOT, STORIES_BIN } from '../helpers/paths.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-serve-damaged-'));
after(() => rmSync(root, { recursive: true, force: true }));
const CLI = path.join(PROJECT_ROOT, 'main/serve/cli.ts');
const INDEX = '<!doctype html><title>Ropewalk</title>';
writeFileSync(path.join(root, 'index.html'), INDEX);

function spawnServe(data: string): { child: ChildProcess; stderr: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, '--port', '0', '--data', data, '--static', root], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ROPEWALK_CACHE_DIR: path.join(root, 'cache'), ROPEWALK_DEFAULT_MODEL: STORIES_BIN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stderr: () => err, exit };
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout! });
    rl.once('line', (line) => (rl.close(), resolve(line)));
    child.once('exit', (code) => reject(new Error(`exited ${code} before printing a line`)));
  });
}

test('serve moves a database of random bytes aside, says so in one line, and serves', async () => {
  const data = path.join(root, 'junk');
  mkdirSync(data);
  const file = path.join(data, DB_FILE);
  writeFileSync(file, randomBytes(32 * 1024));
  const s = spawnServe(data);
  try {
    const url = await firstLine(s.child);
    const page = await fetch(url);
    assert.equal(page.status, 200);
    assert.equal(await page.text(), INDEX);
  } finally {
    s.child.kill('SIGTERM');
  }
  assert.equal(await s.exit, 0, s.stderr());
  const moved = readdirSync(data).filter((f) => /^ropewalk\.db\.corrupt-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ$/.test(f));
  assert.equal(moved.length, 1, readdirSync(data).join(', '));
  const warnings = s.stderr().split('\n').filter((l) => l.startsWith('warning: '));
  assert.deepEqual(warnings, [
    `warning: the conversations database ${file} could not be opened (file is not a database); it was moved to ${path.join(data, moved[0])} and a new, empty one was started`,
  ]);
  const fresh = new ConversationStore(data);
  assert.equal(fresh.listConversations().length, 0);
  fresh.close();
});

test('serve exits 2 with one line for a database from a newer version, leaving it in place', async () => {
  const data = path.join(root, 'newer');
  new ConversationStore(data).close();
  const db = new Database(path.join(data, DB_FILE));
  db.pragma('user_version = 999');
  db.close();
  const s = spawnServe(data);
  assert.equal(await s.exit, 2, s.stderr());
  const lines = s.stderr().trimEnd().split('\n');
  assert.equal(lines.length, 1, s.stderr());
  assert.match(lines[0], /^error: .*ropewalk\.db was written by a newer version of Ropewalk \(schema 999/);
  assert.ok(existsSync(path.join(data, DB_FILE)));
});
