/**
 * Builds the window's stores (one per concern) over one `RopewalkApi`, wires the contract's events
 * into them, and loads the first state: model, settings, conversation list, then opens the most
 * recent conversation (or none, or the one the user opened meanwhile). No DOM here: the frame scheduler is injected, so tests drive the
 * whole thing under Node with a fake api and a manual scheduler.
 */
import type { Timers } from '../lib/debounce.ts';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { FrameScheduler } from '../lib/stream-buffer.ts';
import { createBudgetStore, type BudgetStore } from './budget.ts';
import { createChatStore, type ChatStore } from './chat.ts';
import { createConversationsStore, type ConversationsStore } from './conversations.ts';
import { createLibraryStore, type LibraryStore } from './library.ts';
import { createModelStore, type ModelStore } from './model.ts';
import { createNoticesStore, type NoticesStore } from './notices.ts';
import { createSettingsStore, type SettingsStore } from './settings.ts';
import { createUiStore, type KeyValueStorage, type UiStore } from './ui.ts';

export interface Stores {
  notices: NoticesStore;
  settings: SettingsStore;
  model: ModelStore;
  library: LibraryStore;
  budget: BudgetStore;
  chat: ChatStore;
  conversations: ConversationsStore;
  ui: UiStore;
  /**
   * Subscribes to events and loads everything; resolves when the first conversation is open:
   * `openId` if it exists (the URL's #id), else the most recent one.
   */
  start(openId?: string | null): Promise<void>;
  /** Reloads everything (after the transport reconnected), keeping the open conversation. */
  resync(): Promise<void>;
  /** Unsubscribes and cancels timers and frames. */
  dispose(): void;
}

export interface StoreOptions {
  frames: FrameScheduler;
  /** Quiet period before getBudget / listConversations({ search }) (ms). */
  debounceMs?: number;
  /** The debouncers' timers (the platform's by default; tests pass hand-driven ones). */
  timers?: Timers;
  /** The window's width (CSS px) at start, for the layout (default 1280). */
  width?: number;
  /** Where layout and theme choices are remembered (localStorage in the window; none in tests). */
  storage?: KeyValueStorage;
}

export function createStores(api: RopewalkApi, options: StoreOptions): Stores {
  const debounceMs = options.debounceMs ?? 150;
  const notices = createNoticesStore();
  // The stores reach each other through these getters, so creation order does not matter.
  let chat: ChatStore;
  let budget: BudgetStore;
  let conversations: ConversationsStore;
  const refreshBudget = () => void budget.getState().refresh();

  budget = createBudgetStore(
    api,
    notices,
    () => {
      const c = chat.getState();
      return {
        conversationId: c.conversationId,
        draft: c.draft,
        documents: c.attachments.map((a) => ({ id: a.id, fit: a.fit, name: a.name })),
        empty: !c.loading && c.messages.length === 0,
      };
    },
    debounceMs,
    options.timers,
  );
  chat = createChatStore({
    api,
    notices,
    budget: () => budget,
    frames: options.frames,
    onCreated: (c) => conversations.getState().upsert(c),
    storage: options.storage,
  });
  conversations = createConversationsStore(api, notices, () => chat, debounceMs, options.timers);
  const settings = createSettingsStore(api, notices, refreshBudget);
  const library = createLibraryStore(api);
  // A model loaded (opened, switched to a remote engine, reloaded): settings derived from it
  // (max context follows the trained context until set) and the library's fit estimates change.
  const model = createModelStore(api, notices, () => {
    refreshBudget();
    void settings.getState().load();
    void library.getState().refresh();
  });
  const ui = createUiStore({ width: options.width ?? 1280, storage: options.storage });

  const unsubscribe: Array<() => void> = [];

  async function loadAll(): Promise<void> {
    await Promise.all([model.getState().load(), settings.getState().load(), conversations.getState().load(), library.getState().refresh()]);
  }

  return {
    notices,
    settings,
    model,
    library,
    budget,
    chat,
    conversations,
    ui,
    async start(openId) {
      if (unsubscribe.length === 0) {
        unsubscribe.push(
          api.on('answerDelta', (e) => chat.getState().onDelta(e)),
          api.on('answerWaiting', (e) => chat.getState().onWaiting(e)),
          api.on('answerPrefill', (e) => chat.getState().onPrefill(e)),
          api.on('answerDone', (e) => chat.getState().onDone(e)),
          api.on('answerSaveState', (e) => chat.getState().onSaveState(e)),
          api.on('budgetChanged', (e) => budget.getState().apply(e)),
          api.on('modelState', (e) => model.getState().apply(e)),
          api.on('conversationsChanged', (e) => conversations.getState().apply(e.conversations)),
          api.on('documentProgress', (e) => chat.getState().onDocumentProgress(e)),
        );
      }
      await loadAll();
      // A chat the user opened or created while the first load was in flight stays open.
      if (chat.getState().conversationId !== null) return;
      const items = conversations.getState().items;
      await chat.getState().open(openId && items.some((c) => c.id === openId) ? openId : (items[0]?.id ?? null));
    },
    async resync() {
      await loadAll();
      const open = chat.getState().conversationId;
      const stillThere = open !== null && conversations.getState().items.some((c) => c.id === open);
      await chat.getState().open(stillThere || conversations.getState().search ? open : (conversations.getState().items[0]?.id ?? null));
    },
    dispose() {
      for (const u of unsubscribe.splice(0)) u();
      chat.getState().dispose();
      budget.getState().dispose();
      conversations.getState().dispose();
    },
  };
}
