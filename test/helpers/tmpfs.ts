/**
 * A small real filesystem that a test can fill: a tmpfs of `bytes` mounted on a fresh folder (root
 * only: `mount -t tmpfs`), `fill()` writes a filler file until the kernel says ENOSPC, `free()`
 * removes it, `unmount()` (call it in `finally`) unmounts (lazily if something still holds it) and
 * removes the folder. `TMPFS_SKIP` is the reason to skip when this process cannot mount.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, rmdirSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Why tmpfs tests cannot run here (false when they can). */
export const TMPFS_SKIP: string | false = process.getuid?.() === 0 ? false : 'mounting a tmpfs needs root (CI runs as root)';

export interface Tmpfs {
  dir: string;
  /** Fills the filesystem up; @returns the filler's size in bytes. */
  fill(): number;
  /** Removes the filler (space is back). */
  free(): void;
  unmount(): void;
}

/** Mounts a tmpfs of `bytes` bytes on a new folder under the OS temp folder. */
export function mountTmpfs(bytes: number): Tmpfs {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-tmpfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir]);
  const filler = path.join(dir, 'filler');
  return {
    dir,
    fill() {
      const fd = openSync(filler, 'a');
      let written = 0;
      try {
        // Big blocks first, then single pages, so the disk ends with no page free.
        for (const block of [Buffer.alloc(1 << 16), Buffer.alloc(4096)]) {
          try {
            for (;;) written += writeSync(fd, block);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
          }
        }
      } finally {
        closeSync(fd);
      }
      return written;
    },
    free() {
      rmSync(filler, { force: true });
    },
    unmount() {
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir]);
      }
      rmdirSync(dir);
    },
  };
}
