/**
 * A manual clock with one-shot timers for code that takes main/services/answer-stream.ts's
 * `Scheduler`: no real time passes; `advance(ms)` moves time and runs the timers that come due.
 */
import type { Scheduler } from '../../main/services/answer-stream.ts';

/** A manual clock with one-shot timers: `advance(ms)` moves time and runs the timers that come due, in order. */
export class ManualScheduler implements Scheduler {
  time = 0;
  private timers: { at: number; callback: () => void; id: number }[] = [];
  private nextId = 0;
  now = (): number => this.time;
  after(delayMs: number, callback: () => void): unknown {
    const id = this.nextId++;
    this.timers.push({ at: this.time + delayMs, callback, id });
    return id;
  }
  cancel(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.cancel(due.id);
      this.time = due.at;
      due.callback();
    }
    this.time = until;
  }

  /** How many timers wait. */
  get pending(): number {
    return this.timers.length;
  }
}
