/**
 * The services' events (`EventTypes` of the contract: answerDelta, answerDone, budgetChanged,
 * modelState, …) fanned out to every subscriber. Transports subscribe: the router forwards them to
 * the window over IPC or the WebSocket. A throwing subscriber does not stop the others.
 */
import type { EventName, EventTypes } from '../contract/channels.ts';

export type EventListener = <E extends EventName>(event: E, data: EventTypes[E]) => void;

/** What a service is given to push events. */
export type Emit = <E extends EventName>(event: E, data: EventTypes[E]) => void;

/** Subscribers of the services' events. */
export class EventHub {
  private readonly listeners = new Set<EventListener>();

  /** Subscribes to every event; returns the unsubscribe function. */
  onEvent(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Pushes an event to every subscriber. */
  readonly emit: Emit = (event, data) => {
    for (const l of this.listeners) {
      try {
        l(event, data);
      } catch {
        // A closed window or socket; its transport cleans up.
      }
    }
  };
}
