/**
 * Context budget concern: the meter's `ContextBudget` for the active conversation and the
 * composer's draft. `schedule()` asks `getBudget` after a quiet period (the draft is typed);
 * `refresh()` asks now; only the latest answer is applied. `budgetChanged` events (they arrive
 * while an answer streams) are applied at once, keeping this window's draft count, because the
 * services do not know what this window is typing.
 */
import { Debouncer, platformTimers, type Timers } from '../lib/debounce.ts';
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { AttachedDocument, ContextBudget } from '../../main/contract/types.ts';
import { describeError } from '../lib/errors.ts';
import { meterInputFor } from '../lib/meter.ts';
import type { NoticesStore } from './notices.ts';

export interface BudgetContext {
  conversationId: string | null;
  draft: string;
  /** Documents attached to the draft. */
  documents: AttachedDocument[];
  /** The conversation is known to have no messages (loaded, or new), not merely still loading. */
  empty: boolean;
}

export interface BudgetState {
  budget: ContextBudget | null;
  /** The draft (text and documents, `draftKey`) `budget` was computed for. */
  draftFor: string | null;
  /** A request is scheduled or in flight. */
  stale: boolean;
  /** Asks for the budget after the debounce period (restarts it). */
  schedule(): void;
  /** Asks now; resolves with the budget applied, or null when the call failed or was superseded. */
  refresh(): Promise<ContextBudget | null>;
  /** The budget of exactly the current conversation and draft, asking if needed. */
  ensureFresh(): Promise<ContextBudget | null>;
  /** A `budgetChanged` event. */
  apply(event: ContextBudget): void;
  /** Cancels the scheduled request. */
  dispose(): void;
}

export type BudgetStore = StoreApi<BudgetState>;

/** What a budget was counted for: the draft's text and its documents. */
export function draftKey(draft: string, documents: readonly AttachedDocument[]): string {
  return documents.length === 0 ? draft : `${draft}\u0000${documents.map((d) => `${d.id}:${d.fit}:${d.name ?? ''}`).join(',')}`;
}

/**
 * The budget requests of one store: numbered, so only the newest one's answer is applied; counted
 * while in flight (the meter is "stale" until none is); and an error reported once per code, so a
 * failing getBudget does not raise the banner again on every keystroke.
 */
class BudgetRequests {
  private latest = 0;
  private inFlight = 0;
  private lastErrorCode: string | null = null;

  /** A request starts: its number. */
  begin(): number {
    this.inFlight++;
    return ++this.latest;
  }

  end(): void {
    this.inFlight--;
  }

  isLatest(request: number): boolean {
    return request === this.latest;
  }

  /** Every request in flight is stale now (the store was disposed). */
  supersede(): void {
    this.latest++;
  }

  get busy(): boolean {
    return this.inFlight > 0;
  }

  succeeded(): void {
    this.lastErrorCode = null;
  }

  /** Whether a failure with `code` is news (not the one reported last). */
  reportable(code: string): boolean {
    const news = code !== this.lastErrorCode;
    this.lastErrorCode = code;
    return news;
  }
}

/**
 * A `budgetChanged` event of the open conversation with this window's draft count kept in place
 * of the event's (the services count the draft they last saw, not what is typed now).
 */
function withDraftKept(event: ContextBudget, current: ContextBudget | null, conversationId: string | null): ContextBudget {
  const draftTokens = current && current.conversationId === conversationId ? current.draft : 0;
  const used = event.used - event.draft + draftTokens;
  const total = used + event.reserve;
  return { ...event, draft: draftTokens, used, total, fits: total <= event.maxContext };
}

/** Whether an event of another conversation moved the numbers every conversation shares (settings, model). */
function sharedNumbersMoved(current: ContextBudget | null, event: ContextBudget): boolean {
  return current !== null && (current.maxContext !== event.maxContext || current.reserve !== event.reserve || current.system !== event.system);
}

/** The budget store (see the file's contract); `timers` drive the debounce. */
export function createBudgetStore(
  api: RopewalkApi,
  notices: NoticesStore,
  context: () => BudgetContext,
  debounceMs = 150,
  timers: Timers = platformTimers,
): BudgetStore {
  const debounce = new Debouncer(debounceMs, timers);
  const requests = new BudgetRequests();

  return createStore<BudgetState>()((set, get) => {
    async function refresh(): Promise<ContextBudget | null> {
      debounce.cancel();
      const { conversationId, draft, documents, empty } = context();
      const key = draftKey(draft, documents);
      const mine = requests.begin();
      // Switched chats: until the answer comes, show what is known (exact for an empty chat).
      const prev = get().budget;
      const provisional = prev && meterInputFor(prev, conversationId, empty);
      set(provisional && provisional !== prev ? { stale: true, budget: provisional, draftFor: null } : { stale: true });
      try {
        const budget = await api.getBudget({ conversationId, draft, ...(documents.length ? { documents } : {}) });
        requests.succeeded();
        if (!requests.isLatest(mine) || context().conversationId !== conversationId) return null;
        set({ budget, draftFor: key });
        return budget;
      } catch (e) {
        if (requests.reportable(describeError(e).code)) notices.getState().report(e);
        return null;
      } finally {
        requests.end();
        set({ stale: debounce.pending || requests.busy });
      }
    }

    return {
      budget: null,
      draftFor: null,
      stale: false,
      schedule() {
        set({ stale: true });
        debounce.schedule(() => void refresh());
      },
      refresh,
      async ensureFresh() {
        const { budget, draftFor, stale } = get();
        const { conversationId, draft, documents } = context();
        if (budget && !stale && draftFor === draftKey(draft, documents) && budget.conversationId === conversationId) return budget;
        return refresh();
      },
      apply(event) {
        const { conversationId, draft, documents } = context();
        const key = draftKey(draft, documents);
        const current = get().budget;
        if (event.conversationId !== conversationId) {
          if (sharedNumbersMoved(current, event)) get().schedule();
          return;
        }
        if (!draft && documents.length === 0) {
          set({ budget: event, draftFor: key });
          return;
        }
        set({ budget: withDraftKept(event, current, conversationId) });
        if (get().draftFor !== key) get().schedule();
      },
      dispose() {
        debounce.cancel();
        requests.supersede();
      },
    };
  });
}
