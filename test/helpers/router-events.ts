/** Waiting for and recording the events a `Router` pushes (services tests). */
import type { EventName, EventTypes } from '../../main/contract/channels.ts';
import type { Router } from '../../main/composition/router.ts';

export interface Recorded {
  event: EventName;
  data: unknown;
  /** performance.now() when it was emitted, ms. */
  at: number;
}

/** Records every event from now on; `stop()` unsubscribes. */
export function record(router: Router): { events: Recorded[]; of<E extends EventName>(e: E): EventTypes[E][]; stop(): void } {
  const events: Recorded[] = [];
  const stop = router.onEvent((event, data) => events.push({ event, data, at: performance.now() }));
  return {
    events,
    of: <E extends EventName>(e: E) => events.filter((r) => r.event === e).map((r) => r.data as EventTypes[E]),
    stop,
  };
}

/** The next `event` whose payload passes `pred`. @throws after `timeoutMs` naming the event. */
export function nextEvent<E extends EventName>(router: Router, event: E, pred: (d: EventTypes[E]) => boolean = () => true, timeoutMs = 20_000): Promise<EventTypes[E]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`no ${event} event within ${timeoutMs} ms`));
    }, timeoutMs);
    const off = router.onEvent((e, d) => {
      if ((e as EventName) !== event || !pred(d as EventTypes[E])) return;
      clearTimeout(timer);
      off();
      resolve(d as EventTypes[E]);
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
