/**
 * A cheap identity of a model's source files, so a start finds the imported bundle without
 * reading gigabytes of weights: SHA-256 over each file's absolute path, device, inode, size,
 * modification time and status-change time (nanoseconds), plus a salt (the bundle builder's
 * version). Editing a file in place changes its size or times; replacing it (rename over it)
 * changes its inode; even a write that restores the old mtime changes ctime, which user space
 * cannot set. Any change sends the caller back to hashing the content, which stays the key of
 * the bundle itself (`content-hash.ts`).
 *
 * Racy files (git's term): file times have a granularity (a kernel tick, up to 2 s on FAT), so a
 * file written within that window of its fingerprint could change again without its times
 * changing. A fingerprint is `settled` only when every file's mtime and ctime are older than
 * RACY_WINDOW_MS; callers record only settled ones.
 */
import { stat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { ModelLoadError } from '../errors.ts';

/** Times closer than this to now may not change on the next write (FAT's 2 s mtime, plus margin). */
export const RACY_WINDOW_MS = 2_500;

export interface SourceFingerprint {
  /** SHA-256 hex of the files' identities and the salt. */
  key: string;
  /** Every file's mtime and ctime are older than RACY_WINDOW_MS (safe to record). */
  settled: boolean;
}

/**
 * Fingerprints `files` (a stable order, as the caller lists them) from `stat` alone.
 * @param salt mixed in, so a new bundle builder never matches an old fingerprint.
 * @param clock now, ms since the epoch, for the racy-file check (default `Date.now`; tests pass
 *   one ahead of the wall clock instead of waiting out the window).
 * @throws ModelLoadError naming a file that cannot be stat'ed.
 */
export async function fingerprintFiles(files: readonly string[], salt: string, clock: () => number = Date.now): Promise<SourceFingerprint> {
  const h = createHash('sha256').update(`${salt}\n`);
  const now = BigInt(Math.floor(clock())) * 1_000_000n;
  const window = BigInt(RACY_WINDOW_MS) * 1_000_000n;
  let settled = true;
  for (const f of files) {
    const abs = path.resolve(f);
    const st = await stat(abs, { bigint: true }).catch((e: Error) => {
      throw new ModelLoadError(`cannot read the model file: ${e.message}`, abs, { cause: e });
    });
    h.update(`${abs}\0${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}\n`);
    if (now - st.mtimeNs < window || now - st.ctimeNs < window) settled = false;
  }
  return { key: h.digest('hex'), settled };
}
