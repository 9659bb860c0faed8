/**
 * Things with a lifetime (IPC handlers, event forwarding, protocol handlers) are Disposables kept
 * in a store, so shutdown and re-registration leave nothing behind. Pure; no `electron` import.
 */

export interface Disposable {
  dispose(): void;
}

/** Wraps a cleanup function; disposing twice runs it once. */
export function toDisposable(fn: () => void): Disposable {
  let done = false;
  return {
    dispose() {
      if (done) return;
      done = true;
      fn();
    },
  };
}

/**
 * Holds Disposables and disposes them in reverse order of addition. Adding to a disposed store
 * disposes the newcomer at once (it would otherwise leak).
 */
export class DisposableStore implements Disposable {
  private readonly items: Disposable[] = [];
  private disposed = false;

  /** Adds `d` and returns it. */
  add<T extends Disposable>(d: T): T {
    if (this.disposed) d.dispose();
    else this.items.push(d);
    return d;
  }

  /** Disposes everything held; an item that throws does not stop the others. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const d of this.items.splice(0).reverse()) {
      try {
        d.dispose();
      } catch (e) {
        console.error('ropewalk: dispose failed', e);
      }
    }
  }
}
