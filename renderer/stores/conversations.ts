/**
 * Conversation list concern: summaries (most recently updated first), the search over titles
 * and message text (debounced `listConversations({ search })`; hits carry `match`), and new /
 * select / rename / delete. New chat while the open chat is still empty keeps that one. Selecting
 * opens the conversation in the chat store; which one is open lives there, not here.
 */
import { Debouncer, platformTimers, type Timers } from '../lib/debounce.ts';
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { ChatSettings, ContextFullPolicy, ConversationSummary } from '../../main/contract/types.ts';
import type { ChatStore } from './chat.ts';
import { parseConversationFile } from '../lib/conversation-file.ts';
import type { NoticesStore } from './notices.ts';

export interface ConversationsState {
  /** The list shown: every conversation, or those the search finds. */
  items: ConversationSummary[];
  /**
   * Every conversation known, by id, whatever the search shows: the open chat's title, policy
   * and Think toggle are read here (`summaryById`), so a search that hides it changes none of them.
   */
  known: Record<string, ConversationSummary>;
  search: string;
  loaded: boolean;
  load(): Promise<void>;
  /** Sets the search text now and lists matching titles after the debounce period. */
  setSearch(text: string): void;
  select(id: string | null): Promise<void>;
  /** Creates a conversation and opens it; when the open one is still empty, keeps that one instead. */
  create(): Promise<void>;
  rename(id: string, title: string): Promise<boolean>;
  /** Sets a conversation's own context-full policy (null: the setting's); the budget follows. */
  setPolicy(id: string, policy: ContextFullPolicy | null): Promise<boolean>;
  /** Sets a conversation's Think toggle (null: the template's default). */
  setThinking(id: string, thinking: boolean | null): Promise<boolean>;
  /** Replaces a conversation's own system prompt and sampler ({}: the settings apply); the budget follows. */
  setChatSettings(id: string, settings: ChatSettings): Promise<boolean>;
  /** Imports a conversation from an exported JSON file's text and opens it; false (and a notice) when it cannot. */
  importFile(text: string): Promise<boolean>;
  /** Deletes; if it was open, opens the most recent remaining one (or none). */
  remove(id: string): Promise<boolean>;
  /** A `conversationsChanged` event. */
  apply(list: ConversationSummary[]): void;
  /** Adds or replaces one summary. */
  upsert(summary: ConversationSummary): void;
  dispose(): void;
}

export type ConversationsStore = StoreApi<ConversationsState>;

/** A conversation's summary, shown in the list or not (null: not known). */
export function summaryById(s: Pick<ConversationsState, 'known'>, id: string | null): ConversationSummary | null {
  return id === null ? null : (s.known[id] ?? null);
}

/** `known` with `summaries` set (a search hit's `match` is not kept: it belongs to the list). */
function withKnown(known: Record<string, ConversationSummary>, summaries: readonly ConversationSummary[], replace = false): Record<string, ConversationSummary> {
  const next = replace ? {} : { ...known };
  for (const c of summaries) {
    const { match: _match, ...summary } = summaryOf(c);
    next[c.id] = summary;
  }
  return next;
}

export const byRecent = (a: ConversationSummary, b: ConversationSummary) => b.updatedAt - a.updatedAt || b.createdAt - a.createdAt;

/** A summary without the fields a caller's object may carry beyond it (a whole Conversation). */
const summaryOf = ({ id, title, createdAt, updatedAt, match, contextFullPolicy, thinking, chatSettings }: ConversationSummary): ConversationSummary => ({
  id,
  title,
  createdAt,
  updatedAt,
  ...(match === undefined ? {} : { match }),
  ...(contextFullPolicy === undefined ? {} : { contextFullPolicy }),
  ...(thinking === undefined ? {} : { thinking }),
  ...(chatSettings === undefined ? {} : { chatSettings }),
});

/**
 * Which answers of `listConversations` are still news. Calls are numbered, so an older call
 * answering after a newer one (or after a pushed list) is dropped; summaries upserted here are
 * stamped by a logical clock, so a list call that started before a chat was created here does
 * not drop that chat from the list when it answers.
 */
class ListFreshness {
  private latest = 0;
  private clock = 0;
  private readonly upsertedAt = new Map<string, number>();

  /** Starts a list call: its number and the clock it started at. */
  begin(): { call: number; startedAt: number } {
    return { call: ++this.latest, startedAt: this.clock };
  }

  /** Whether `call` is still the newest list (nothing started or was pushed since). */
  isLatest(call: number): boolean {
    return call === this.latest;
  }

  /** A list arrived by other means (a pushed event): every call in flight is stale now. */
  supersede(): void {
    this.latest++;
  }

  upserted(id: string): void {
    this.upsertedAt.set(id, ++this.clock);
  }

  forget(id: string): void {
    this.upsertedAt.delete(id);
  }

  /** The summaries of `current` a list that started at `startedAt` cannot know (upserted since), absent from `listed`. */
  newerThan(current: readonly ConversationSummary[], listed: readonly ConversationSummary[], startedAt: number): ConversationSummary[] {
    const ids = new Set(listed.map((c) => c.id));
    return current.filter((c) => !ids.has(c.id) && (this.upsertedAt.get(c.id) ?? 0) > startedAt);
  }
}

type SetState = StoreApi<ConversationsState>['setState'];
type GetState = StoreApi<ConversationsState>['getState'];

/** What the store's action groups share. */
interface ListDeps {
  api: RopewalkApi;
  chat: () => ChatStore;
  report(e: unknown): void;
  freshness: ListFreshness;
}

/** Lists the conversations (the search's hits when there is one), dropping a stale answer. */
async function listConversations({ api, chat, report, freshness }: ListDeps, set: SetState, get: GetState): Promise<void> {
  const search = get().search.trim();
  const { call, startedAt } = freshness.begin();
  try {
    const items = await api.listConversations(search ? { search } : {});
    if (!freshness.isLatest(call)) return;
    const newer = search ? [] : freshness.newerThan(get().items, items, startedAt);
    set({ items: [...items, ...newer].sort(byRecent), known: withKnown(get().known, items, !search), loaded: true });
    // The whole list (no search): drafts of chats deleted elsewhere are forgotten.
    if (!search) chat().getState().keepDraftsOf(get().items.map((c) => c.id));
  } catch (e) {
    report(e);
  }
}

/** New chat and import: each opens what it made. */
function creationActions(d: ListDeps, set: SetState, get: GetState): Pick<ConversationsState, 'create' | 'importFile'> {
  const { api, chat, report } = d;
  let creating = false; // one createConversation at a time (a double click makes one chat)
  return {
    async create() {
      if (creating) return;
      const open = chat().getState();
      if (open.conversationId !== null && !open.loading && open.messages.length === 0) {
        // Already in an empty chat: a second empty one would only clutter the list.
        if (get().search) get().setSearch('');
        return;
      }
      creating = true;
      try {
        const conversation = await chat().getState().startNew(() => api.createConversation({}));
        get().upsert(conversation);
        if (get().search) {
          set({ search: '' });
          await listConversations(d, set, get);
        }
      } catch (e) {
        report(e);
      } finally {
        creating = false;
      }
    },
    async importFile(text) {
      try {
        const { title, messages } = parseConversationFile(text);
        const conversation = await api.importConversation({ title, messages });
        get().upsert(conversation);
        chat().getState().show(conversation);
        return true;
      } catch (e) {
        report(e);
        return false;
      }
    },
  };
}

/** Changes of one conversation's summary, and deleting one; each false (and a notice) when it fails. */
function summaryActions({ api, chat, report, freshness }: ListDeps, set: SetState, get: GetState): Pick<ConversationsState, 'rename' | 'setPolicy' | 'setThinking' | 'setChatSettings' | 'remove'> {
  /** Applies a call that answers with the changed summary. */
  async function changed(call: () => Promise<ConversationSummary>): Promise<boolean> {
    try {
      get().upsert(await call());
      return true;
    } catch (e) {
      report(e);
      return false;
    }
  }
  return {
    async rename(id, title) {
      const trimmed = title.trim();
      return trimmed ? changed(() => api.renameConversation({ id, title: trimmed })) : false;
    },
    setPolicy: (id, policy) => changed(() => api.setConversationPolicy({ id, policy })),
    setThinking: (id, thinking) => changed(() => api.setConversationThinking({ id, thinking })),
    setChatSettings: (id, settings) => changed(() => api.setConversationSettings({ id, settings })),
    async remove(id) {
      try {
        await api.deleteConversation({ id });
      } catch (e) {
        report(e);
        return false;
      }
      const items = get().items.filter((c) => c.id !== id);
      const { [id]: _gone, ...known } = get().known;
      freshness.forget(id);
      chat().getState().forgetDraft(id);
      set({ items, known });
      if (chat().getState().conversationId === id) await chat().getState().open(items[0]?.id ?? null);
      return true;
    },
  };
}

/** The conversation list store (see the file's contract); `timers` drive the search's debounce. */
export function createConversationsStore(
  api: RopewalkApi,
  notices: NoticesStore,
  chat: () => ChatStore,
  debounceMs = 150,
  timers: Timers = platformTimers,
): ConversationsStore {
  const debounce = new Debouncer(debounceMs, timers);
  const d: ListDeps = { api, chat, report: (e) => notices.getState().report(e), freshness: new ListFreshness() };
  return createStore<ConversationsState>()((set, get) => {
    const list = () => listConversations(d, set, get);
    return {
      items: [],
      known: {},
      search: '',
      loaded: false,
      load: list,
      setSearch(text) {
        set({ search: text });
        debounce.schedule(() => void list());
      },
      async select(id) {
        if (chat().getState().conversationId === id) return;
        await chat().getState().open(id);
      },
      ...creationActions(d, set, get),
      ...summaryActions(d, set, get),
      apply(conversations) {
        set({ known: withKnown(get().known, conversations, true) });
        if (get().search.trim()) {
          void list(); // the event carries every conversation; ask again for the filtered list
          return;
        }
        d.freshness.supersede(); // an older list call must not overwrite this
        set({ items: [...conversations].sort(byRecent), loaded: true });
        chat().getState().keepDraftsOf(conversations.map((c) => c.id));
      },
      upsert(summary) {
        const clean = summaryOf(summary);
        d.freshness.upserted(clean.id);
        const items = get().items.filter((c) => c.id !== clean.id);
        set({ items: [...items, clean].sort(byRecent), known: withKnown(get().known, [clean]) });
      },
      dispose() {
        debounce.cancel();
      },
    };
  });
}
