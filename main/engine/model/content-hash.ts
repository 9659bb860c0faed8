/**
 * Content hashes of model files, for a model's identity in its manifest and as a cache key.
 * The hash depends only on the files' bytes and their order, not on their names or paths, so a
 * checkpoint folder that is moved or renamed keeps its hash. Files are streamed, never read
 * whole, so multi-gigabyte weights hash in constant memory.
 */
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { ModelLoadError } from '../errors.ts';

/**
 * SHA-256 of one file's bytes, hex.
 * @param signal stops between chunks (rethrows its reason).
 * @param buffers where the file is read, chunk by chunk (default: fresh ones).
 * @throws ModelLoadError naming the file if it cannot be read.
 */
export async function hashFile(file: string, signal?: AbortSignal, buffers: HashBuffers = hashBuffers()): Promise<string> {
  const h = createHash('sha256');
  try {
    const fh = await open(file, 'r');
    // Two buffers: the next chunk is read (in libuv's threads) while this one is hashed.
    const read = (b: Uint8Array, at: number) => fh.read(b, 0, b.length, at).then((r) => r.bytesRead);
    try {
      let at = 0;
      let pending = read(buffers[0], at);
      for (let i = 0; ; i ^= 1) {
        const bytesRead = await pending;
        signal?.throwIfAborted();
        if (bytesRead === 0) break;
        at += bytesRead;
        pending = read(buffers[i ^ 1], at);
        h.update(buffers[i].subarray(0, bytesRead));
      }
      await pending;
    } finally {
      await fh.close();
    }
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new ModelLoadError(`cannot read file to hash it: ${(e as Error).message}`, file, { cause: e });
  }
  return h.digest('hex');
}

/**
 * Two read buffers for hashing, reused for every read of every file: a read stream's fresh 4 MiB
 * buffers cost page faults and zeroing each time.
 */
export type HashBuffers = [Uint8Array, Uint8Array];
const hashBuffers = (): HashBuffers => [new Uint8Array(4 * 1024 * 1024), new Uint8Array(4 * 1024 * 1024)];

/**
 * SHA-256 (hex) over an ordered list of files: the hash of the concatenated per-file SHA-256
 * hex digests, each followed by a newline. Hashing digests rather than raw bytes keeps file
 * boundaries unambiguous ("ab"+"c" differs from "a"+"bc"). Callers pass a stable order.
 * @param signal stops between chunks (rethrows its reason).
 * @throws ModelLoadError naming the first file that cannot be read.
 */
export async function hashFiles(files: string[], signal?: AbortSignal): Promise<string> {
  const h = createHash('sha256');
  const buffers = hashBuffers();
  for (const f of files) h.update(`${await hashFile(f, signal, buffers)}\n`);
  return h.digest('hex');
}
