/**
 * One debounce rule for the stores (the budget's getBudget after typing, the conversation search's
 * listConversations): `schedule(fn)` runs `fn` once the calls have been quiet for `quietMs`; a new
 * call restarts the wait. The timers are injected (`Timers`), so tests advance them by hand
 * (`ManualTimers` in test/unit/renderer-fakes.ts) instead of sleeping; the window uses the DOM's.
 */

/** Where a store's timers come from: the platform's setTimeout/clearTimeout, or a test's hand-driven clock. */
export interface Timers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** The platform's timers (window or Node). */
export const platformTimers: Timers = {
  set: (callback, ms) => setTimeout(callback, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Runs the last scheduled function after `quietMs` ms without another `schedule`. */
export class Debouncer {
  private handle: unknown = null;

  constructor(
    private readonly quietMs: number,
    private readonly timers: Timers = platformTimers,
  ) {}

  /** A call is waiting for its quiet period. */
  get pending(): boolean {
    return this.handle !== null;
  }

  /** (Re)starts the quiet period; `fn` runs at its end unless scheduled again or cancelled. */
  schedule(fn: () => void): void {
    this.cancel();
    this.handle = this.timers.set(() => {
      this.handle = null;
      fn();
    }, this.quietMs);
  }

  /** Drops the waiting call, if any. */
  cancel(): void {
    if (this.handle !== null) this.timers.clear(this.handle);
    this.handle = null;
  }
}
