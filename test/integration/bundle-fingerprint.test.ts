/**
 * A warm start finds its bundle by the source files' fingerprint (path, inode, size, mtime,
 * ctime) without hashing the weights, and a source edited in place is never served from a stale
 * bundle: a touch, a shard renamed over with the same size and mtime, a shard rewritten in place
 * with the same size and its old mtime restored, and a truncated shard each send the start back
 * to hashing the content (and on to a new import, or a typed error). Progress phases tell which
 * path a start took: 'hash' only when the content was hashed, 'import' only when imported.
 */
import assert from 'node:assert/strict';
import { cp, open, readFile, rename, rm, stat, truncate, utimes, writeFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { RACY_WINDOW_MS } from '../../main/engine/model/source-fingerprint.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

let root: string;
let cacheDir: string;
const CASES = ['same', 'touched', 'renamed-over', 'rewritten', 'truncated'] as const;
const folder = (c: (typeof CASES)[number]) => path.join(root, c);
const SHARD = 'model-00002-of-00002.safetensors';
let firstDir: string;
const ROUND_MTIME = new Date('2026-01-02T03:04:05Z');

/** How far ahead of the wall clock resolveModel's clock runs (the racy-file check), ms. */
let clockAhead = 0;

/** resolveModel, with the progress phases it went through. */
async function start(dir: string): Promise<{ dir: string; sha256: string; phases: string[] }> {
  const phases: string[] = [];
  const b = await resolveModel(dir, cacheDir, (p) => phases.push(p.phase), { clock: () => Date.now() + clockAhead });
  return { dir: b.dir, sha256: b.manifest.source.sha256, phases: [...new Set(phases)] };
}

before(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-fingerprint-'));
  cacheDir = path.join(root, 'cache');
  await writeSyntheticCheckpoint(folder('same'), { family: 'qwen3', dtype: 'BF16', sharded: true, tied: true, seed: 11 });
  for (const c of CASES.slice(1)) await cp(folder('same'), folder(c), { recursive: true });
  const imported = await start(folder('same'));
  assert.deepEqual(imported.phases.slice(0, 2), ['hash', 'import']);
  firstDir = imported.dir;
  // A whole-second mtime, so the rewrite below can restore it exactly.
  for (const c of ['rewritten', 'renamed-over'] as const) await utimes(path.join(folder(c), SHARD), ROUND_MTIME, ROUND_MTIME);
  // Until files are older than the racy window no fingerprint is recorded: move the clock past
  // the window instead of waiting it out.
  clockAhead = RACY_WINDOW_MS + 100;
  // Settled: each copy is hashed (same content, same bundle) and its fingerprint recorded.
  for (const c of CASES) assert.equal((await start(folder(c))).dir, firstDir, c);
});
after(() => rm(root, { recursive: true, force: true }));

test('a warm start is served by fingerprint: no hash, no import', async () => {
  for (const c of CASES) assert.deepEqual(await start(folder(c)), { dir: firstDir, sha256: (await start(folder('same'))).sha256, phases: ['cached'] }, c);
});

test('touch: hashed again, same content → same bundle', async () => {
  const f = path.join(folder('touched'), 'config.json');
  const later = new Date(Date.now() + 60_000);
  await utimes(f, later, later);
  assert.deepEqual(await start(folder('touched')).then((s) => [s.dir, s.phases]), [firstDir, ['hash', 'cached']]);
});

test('a shard renamed over by a copy with the same size and mtime (new inode): hashed again', async () => {
  const shard = path.join(folder('renamed-over'), SHARD);
  const st = await stat(shard);
  const copy = `${shard}.new`;
  await writeFile(copy, await readFile(shard));
  await utimes(copy, ROUND_MTIME, ROUND_MTIME);
  await rename(copy, shard);
  assert.deepEqual([(await stat(shard)).size, (await stat(shard)).mtimeMs], [st.size, st.mtimeMs]);
  assert.deepEqual(await start(folder('renamed-over')).then((s) => [s.dir, s.phases]), [firstDir, ['hash', 'cached']]);
});

test('a shard rewritten in place, same size, old mtime restored: hashed, imported anew, never the stale bundle', async () => {
  const shard = path.join(folder('rewritten'), SHARD);
  const st = await stat(shard);
  const fh = await open(shard, 'r+');
  try {
    // Last 64 bytes: weight data (BF16), not the header.
    const tail = Buffer.alloc(64);
    await fh.read(tail, 0, 64, st.size - 64);
    for (let i = 0; i < tail.length; i++) tail[i] ^= 0x5a;
    await fh.write(tail, 0, 64, st.size - 64);
  } finally {
    await fh.close();
  }
  await utimes(shard, ROUND_MTIME, ROUND_MTIME);
  assert.equal((await stat(shard)).size, st.size);
  assert.equal((await stat(shard)).mtimeMs, st.mtimeMs, 'same mtime as when the fingerprint was recorded');
  const s = await start(folder('rewritten'));
  assert.deepEqual(s.phases.slice(0, 2), ['hash', 'import']);
  assert.notEqual(s.dir, firstDir);
  assert.notEqual(s.sha256, (await start(folder('same'))).sha256);
});

test('a truncated shard: hashed again and rejected with a typed error, never the old bundle', async () => {
  const shard = path.join(folder('truncated'), SHARD);
  await truncate(shard, Math.floor((await stat(shard)).size / 2));
  await assert.rejects(start(folder('truncated')), (e: unknown) => e instanceof ModelLoadError && e.message.includes(SHARD));
});
