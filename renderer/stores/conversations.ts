/**
 * Conversation list concern: summaries (most recently updated first), the search over titles
 * and message text (debounced `listConversations({ search })`; hits carry `match`), and new /
 * select / rename / delete. New chat while the open chat is still empty keeps that one. Selecting
 * opens the conversation in the chat store; which one is open lives there, not here.
 */
import { Debouncer, platformTimers, type Timers } from '../lib/debounce.ts';
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { ContextFullPolicy, ConversationSummary } from '../../main/contract/types.ts';
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
const summaryOf = ({ id, title, createdAt, updatedAt, match, contextFullPolicy, thinking }: ConversationSummary): ConversationSummary => ({
  id,
  title,
  createdAt,
  updatedAt,
  ...(match === undefined ? {} : { match }),
  ...(contextFullPolicy === undefined ? {} : { contextFullPolicy }),
  ...(thinking === undefined ? {} : { thinking }),
});

export function createConversationsStore(
  api: RopewalkApi,
  notices: NoticesStore,
  chat: () => ChatStore,
  debounceMs = 150,
  timers: Timers = platformTimers,
): ConversationsStore {
  const report = (e: unknown) => notices.getState().report(e);
  const debounce = new Debouncer(debounceMs, timers);
  let seq = 0;
  let creating = false; // one createConversation at a time (a double click makes one chat)
  // When each summary was last upserted (a logical clock), so a list call that started before
  // a chat was created here does not drop it from the list when it answers.
  let clock = 0;
  const upsertedAt = new Map<string, number>();

  return createStore<ConversationsState>()((set, get) => {
    async function list(): Promise<void> {
      const search = get().search.trim();
      const mine = ++seq;
      const startedAt = clock;
      try {
        const items = await api.listConversations(search ? { search } : {});
        if (mine !== seq) return;
        const listed = new Set(items.map((c) => c.id));
        const newer = search ? [] : get().items.filter((c) => !listed.has(c.id) && (upsertedAt.get(c.id) ?? 0) > startedAt);
        set({ items: [...items, ...newer].sort(byRecent), known: withKnown(get().known, items, !search), loaded: true });
        // The whole list (no search): drafts of chats deleted elsewhere are forgotten.
        if (!search) chat().getState().keepDraftsOf(get().items.map((c) => c.id));
      } catch (e) {
        report(e);
      }
    }

    /** Applies a call that answers with the changed summary; false (and a notice) when it fails. */
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
          const conversation = await api.createConversation({});
          get().upsert(conversation);
          chat().getState().show(conversation);
          if (get().search) {
            set({ search: '' });
            await list();
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
      async rename(id, title) {
        const trimmed = title.trim();
        if (!trimmed) return false;
        try {
          get().upsert(await api.renameConversation({ id, title: trimmed }));
          return true;
        } catch (e) {
          report(e);
          return false;
        }
      },
      async setPolicy(id, policy) {
        return changed(() => api.setConversationPolicy({ id, policy }));
      },
      async setThinking(id, thinking) {
        return changed(() => api.setConversationThinking({ id, thinking }));
      },
      async remove(id) {
        try {
          await api.deleteConversation({ id });
        } catch (e) {
          report(e);
          return false;
        }
        const items = get().items.filter((c) => c.id !== id);
        const { [id]: _gone, ...known } = get().known;
        upsertedAt.delete(id);
        chat().getState().forgetDraft(id);
        set({ items, known });
        if (chat().getState().conversationId === id) await chat().getState().open(items[0]?.id ?? null);
        return true;
      },
      apply(conversations) {
        set({ known: withKnown(get().known, conversations, true) });
        if (get().search.trim()) {
          void list(); // the event carries every conversation; ask again for the filtered list
          return;
        }
        seq++; // an older list call must not overwrite this
        set({ items: [...conversations].sort(byRecent), loaded: true });
        chat().getState().keepDraftsOf(conversations.map((c) => c.id));
      },
      upsert(summary) {
        const clean = summaryOf(summary);
        upsertedAt.set(clean.id, ++clock);
        const items = get().items.filter((c) => c.id !== clean.id);
        set({ items: [...items, clean].sort(byRecent), known: withKnown(get().known, [clean]) });
      },
      dispose() {
        debounce.cancel();
      },
    };
  });
}
