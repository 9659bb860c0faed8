#!/usr/bin/env node
/**
 * Builds the native/ addon (native/build/Release/ropewalk_native.node) with nothing but npm and
 * Debian's package mirror. Run by the root package's `prepare` (npm ci / npm install) and
 * `pretest` (npm test), and by `npm run build:native`. Steps:
 *   1. ONNX Runtime's C API headers: $ROPEWALK_ORT_INCLUDE, else /usr/include/onnxruntime (apt
 *      install libonnxruntime-dev on Debian trixie or later), else native/.deps (extracted from
 *      trixie's libonnxruntime-dev 1.21 .deb, downloaded once from $DEBIAN_MIRROR or else the
 *      Debian mirror this machine's apt already uses (its sources lists), and checked against its
 *      SHA-256 from the trixie Packages index). No host is named here: the mirror is the machine's.
 *   2. cmake-js compile (Node-API headers from npm's node-api-headers and node-addon-api; CMake
 *      and a C++17 compiler on the PATH). Skipped when the addon is newer than every source.
 * When a step fails it prints one line and exits 0: the engine then runs on the JS backend and
 * says why. `--strict` (or ROPEWALK_NATIVE_STRICT=1) exits 1 instead.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const NATIVE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.dirname(NATIVE);
const ADDON = path.join(NATIVE, 'build', 'Release', 'ropewalk_native.node');
const DEPS = path.join(NATIVE, '.deps');
const DEB = {
  path: 'pool/main/o/onnxruntime/libonnxruntime-dev_1.21.0+dfsg-1_amd64.deb',
  sha256: '14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08',
};
const strict = process.argv.includes('--strict') || process.env.ROPEWALK_NATIVE_STRICT === '1';

class StepError extends Error {}

async function ortHeaders() {
  const candidates = [process.env.ROPEWALK_ORT_INCLUDE, '/usr/include/onnxruntime', path.join(DEPS, 'usr/include/onnxruntime')];
  for (const dir of candidates) if (dir && existsSync(path.join(dir, 'onnxruntime_c_api.h'))) return dir;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new StepError(`no onnxruntime_c_api.h; set ROPEWALK_ORT_INCLUDE to ONNX Runtime's include folder (${process.platform}-${process.arch})`);
  }
  const mirror = (process.env.DEBIAN_MIRROR ?? aptMirror()).replace(/\/$/, '');
  const url = `${mirror}/${DEB.path}`;
  let bytes;
  try {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    bytes = Buffer.from(await res.arrayBuffer());
  } catch (e) {
    throw new StepError(`cannot download ${url} (${e.message})`);
  }
  const sha = createHash('sha256').update(bytes).digest('hex');
  if (sha !== DEB.sha256) throw new StepError(`${url} has SHA-256 ${sha}, expected ${DEB.sha256}`);
  mkdirSync(DEPS, { recursive: true });
  const debFile = path.join(DEPS, path.basename(DEB.path));
  writeFileSync(debFile, bytes);
  try {
    execFileSync('dpkg-deb', ['-x', debFile, DEPS], { stdio: 'pipe' });
  } catch {
    // No dpkg: a .deb is an ar archive whose data.tar.* holds the files.
    run('sh', ['-c', `cd "${DEPS}" && ar x "${debFile}" && tar -xf data.tar.* && rm -f data.tar.* control.tar.* debian-binary`]);
  }
  rmSync(debFile);
  const dir = path.join(DEPS, 'usr/include/onnxruntime');
  if (!existsSync(path.join(dir, 'onnxruntime_c_api.h'))) throw new StepError(`${DEB.path} held no onnxruntime_c_api.h`);
  return dir;
}

/** The main Debian archive URI in this machine's apt sources (deb822 `URIs:` or one-line `deb`), not
 *  the security archive. Throws StepError when none is configured (then set DEBIAN_MIRROR). */
function aptMirror() {
  const files = ['/etc/apt/sources.list'];
  try {
    for (const f of readdirSync('/etc/apt/sources.list.d').sort()) {
      if (f.endsWith('.sources') || f.endsWith('.list')) files.push(path.join('/etc/apt/sources.list.d', f));
    }
  } catch { /* no sources.list.d */ }
  for (const f of files) {
    let text;
    try { text = readFileSync(f, 'utf8'); } catch { continue; }
    for (const line of text.split('\n')) {
      const m = line.match(/^\s*(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(https?:\/\/\S+?\/debian)\/?(?:\s|$)/);
      if (m) return m[1];
    }
  }
  throw new StepError('no Debian mirror in this machine\'s apt sources; set DEBIAN_MIRROR to one');
}

function newestSource() {
  let newest = 0;
  const files = [path.join(NATIVE, 'CMakeLists.txt'), path.join(NATIVE, 'build.mjs'),
    ...readdirSync(path.join(NATIVE, 'src')).map((f) => path.join(NATIVE, 'src', f))];
  for (const f of files) newest = Math.max(newest, statSync(f).mtimeMs);
  return newest;
}

function run(cmd, args) {
  try {
    execFileSync(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const out = `${e.stdout ?? ''}${e.stderr ?? ''}`.split('\n').filter((l) => /error|not found|No such/i.test(l));
    throw new StepError(`${path.basename(cmd)} failed: ${(out[0] ?? e.message).trim()}`);
  }
}

async function main() {
  if (existsSync(ADDON) && statSync(ADDON).mtimeMs > newestSource()) return;
  const include = await ortHeaders();
  const cmakeJs = path.join(ROOT, 'node_modules', 'cmake-js', 'bin', 'cmake-js');
  run(process.execPath, [cmakeJs, 'compile', '--log-level', 'error', '-d', NATIVE, '-O', path.join(NATIVE, 'build'), `--CDORT_INCLUDE_DIR=${include}`]);
  console.error(`native: built ${path.relative(ROOT, ADDON)}`);
}

main().catch((e) => {
  const why = e instanceof StepError ? e.message : String(e?.stack ?? e);
  console.error(`native: addon not built (${why}); the engine will use the JS backend`);
  process.exit(strict ? 1 : 0);
});
