/**
 * Waiting on a condition instead of a guessed sleep: `until(what, probe)` polls `probe` (sync or async)
 * every 25 ms and resolves as soon as it holds, or throws naming `what` after `timeoutMs`. Tests wait for
 * the state they assert on (a row in SQLite, an event), never for a fixed time.
 */

/** Polls `probe` until it returns true; throws `timed out waiting until <what>` after `timeoutMs` (ms). */
export async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
