/**
 * The window's small persistent memory (localStorage in the window, nothing in tests): what the
 * stores need of it, and reads and writes that never throw — storage can be denied (opaque
 * origin) or full, and then a choice or a draft is simply not kept past the window's life.
 */

/** What the stores need of localStorage. */
export interface KeyValueStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

export function readKey(storage: KeyValueStorage | undefined, key: string): string | null {
  try {
    return storage?.getItem(key) ?? null;
  } catch {
    return null;
  }
}

export function writeKey(storage: KeyValueStorage | undefined, key: string, value: string): void {
  try {
    storage?.setItem(key, value);
  } catch {
    // Denied or full: kept until the window closes.
  }
}
