/**
 * The engine's turn-taking: one generation at a time, the others wait in a bounded FIFO queue
 * (window answers and API requests alike) instead of being refused. A waiter whose signal aborts
 * (Stop in the window, a client that disconnects) leaves the queue at once; past `limit` waiters a
 * request is refused with QUEUE_FULL (the API answers 503 with Retry-After).
 */
import { ServiceError } from './errors.ts';

/** Most requests waiting for the engine (the one generating not counted). */
export const QUEUE_LIMIT = 64;

interface Waiter {
  grant: () => void;
  refuse: (e: Error) => void;
}


/** A FIFO of requests for the engine; `acquire` resolves with the release function of the turn. */
export class EngineQueue {
  private holder = false;
  private readonly waiters: Waiter[] = [];

  constructor(private readonly limit = QUEUE_LIMIT) {}

  /** Whether a turn is held. */
  get busy(): boolean {
    return this.holder;
  }

  /** How many wait. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Waits for the turn. `onWait(ahead)` is called once, before waiting, when the turn is not free.
   * @returns the release function (idempotent) that hands the turn to the next waiter.
   * @throws ServiceError QUEUE_FULL when `limit` requests already wait; CANCELLED when `signal`
   *   aborts before the turn comes (the request has then left the queue).
   */
  async acquire(signal?: AbortSignal, onWait?: (ahead: number) => void): Promise<() => void> {
    if (signal?.aborted) throw cancelled();
    if (this.holder) {
      if (this.waiters.length >= this.limit) {
        throw new ServiceError('QUEUE_FULL', `${this.waiters.length} requests are already waiting for the engine; try again later`);
      }
      onWait?.(this.waiters.length + 1);
      await new Promise<void>((resolve, refuse) => {
        const leave = () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          refuse(cancelled());
        };
        const waiter: Waiter = {
          grant: () => {
            signal?.removeEventListener('abort', leave);
            resolve();
          },
          refuse,
        };
        this.waiters.push(waiter);
        signal?.addEventListener('abort', leave, { once: true });
      });
    }
    this.holder = true;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next.grant();
      else this.holder = false;
    };
  }
}

function cancelled(): ServiceError {
  return new ServiceError('CANCELLED', 'the request was stopped while it waited for the engine');
}
