/**
 * Content hashes of model files, for a model's identity in its manifest and as a cache key.
 * The hash depends only on the files' bytes and their order, not on their names or paths, so a
 * checkpoint folder that is moved or renamed keeps its hash. Files are streamed, never read
 * whole, so multi-gigabyte weights hash in constant memory.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { ModelLoadError } from '../errors.ts';

/**
 * SHA-256 of one file's bytes, hex.
 * @param signal stops between chunks (rethrows its reason).
 * @throws ModelLoadError naming the file if it cannot be read.
 */
export async function hashFile(file: string, signal?: AbortSignal): Promise<string> {
  const h = createHash('sha256');
  try {
    for await (const chunk of createReadStream(file, { highWaterMark: 4 * 1024 * 1024 })) {
      signal?.throwIfAborted();
      h.update(chunk as Buffer);
    }
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new ModelLoadError(`cannot read file to hash it: ${(e as Error).message}`, file, { cause: e });
  }
  return h.digest('hex');
}

/**
 * SHA-256 (hex) over an ordered list of files: the hash of the concatenated per-file SHA-256
 * hex digests, each followed by a newline. Hashing digests rather than raw bytes keeps file
 * boundaries unambiguous ("ab"+"c" differs from "a"+"bc"). Callers pass a stable order.
 * @param signal stops between chunks (rethrows its reason).
 * @throws ModelLoadError naming the first file that cannot be read.
 */
export async function hashFiles(files: string[], signal?: AbortSignal): Promise<string> {
  const h = createHash('sha256');
  for (const f of files) h.update(`${await hashFile(f, signal)}\n`);
  return h.digest('hex');
}
