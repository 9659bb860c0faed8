/**
 * Telling a text file from a model file by its first bytes, so a document opened as a model is
 * refused as text (detectSource) instead of being read as a llama2.c header.
 */
import { open } from 'node:fs/promises';

/**
 * Whether a file is text, so it cannot be a llama2.c checkpoint (whose 28-byte header is seven
 * int32 sizes far below 2^24, so it holds NUL bytes): its first 512 bytes are UTF-8 without
 * control characters other than tab, line feed, form feed and carriage return (a multi-byte
 * character cut at the end is allowed). Random or binary bytes are not text. Unreadable: false
 * (the llama2.c reader says why).
 */
export async function looksLikeText(file: string): Promise<boolean> {
  const fh = await open(file, 'r').catch(() => null);
  if (!fh) return false;
  try {
    const head = new Uint8Array(512);
    const bytesRead = (await fh.read(head, 0, head.length, 0).catch(() => ({ bytesRead: 0 }))).bytesRead;
    if (bytesRead === 0) return false; // empty, or unreadable (/proc/self/mem: EIO): the llama2.c reader says why
    const bytes = head.subarray(0, bytesRead);
    if (bytes.some((b) => (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0c && b !== 0x0d) || b === 0x7f)) return false;
    for (let cut = 0; cut < 4 && cut < bytes.length; cut++) {
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, bytes.length - cut));
        return true;
      } catch {
        if (bytesRead < head.length) return false; // the whole file was read: no cut character to excuse
      }
    }
    return false;
  } finally {
    await fh.close();
  }
}
