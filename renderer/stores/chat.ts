/**
 * Active chat concern: the open conversation's messages, the composer's draft (one per
 * conversation), and the answer actions (send, stop, regenerate, edit and resend).
 * Streaming: `answerDelta` text goes into a StreamBuffer (plain memory) and is committed to this
 * store at most once per frame; `answerDone` replaces the message with the final one. Events of
 * other conversations are ignored (opening one fetches its current state). Deltas or a done that
 * arrive before the call that created their message has answered are kept aside and applied
 * when it does. Send refuses, without calling the services, when the budget says the next
 * message will not fit.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { EventTypes, RopewalkApi } from '../../main/contract/channels.ts';
import type { Conversation, Message } from '../../main/contract/types.ts';
import { refusalReason } from '../lib/meter.ts';
import { StreamBuffer, type FrameScheduler, type StreamChunk } from '../lib/stream-buffer.ts';
import type { BudgetStore } from './budget.ts';
import type { NoticesStore } from './notices.ts';

/** Progress of an answer being generated. */
export interface LiveAnswer {
  generatedTokens: number;
  prefill: { processed: number; total: number } | null;
}

export type PendingAction = 'send' | 'regenerate' | 'edit' | null;

export interface ChatState {
  conversationId: string | null;
  messages: Message[];
  loading: boolean;
  /** The send / regenerate / edit call in flight, if any. */
  pending: PendingAction;
  /** By assistant message id, while it streams. */
  live: Record<string, LiveAnswer>;
  draft: string;
  /** The user message being edited inline. */
  editingId: string | null;
  /** Why the last Send was refused (cleared when the draft changes). */
  refusal: string | null;

  open(id: string | null): Promise<void>;
  /** Shows a conversation already in hand (just created). */
  show(conversation: Conversation): void;
  setDraft(text: string): void;
  /** Sends the draft; resolves true when the services accepted it. */
  send(): Promise<boolean>;
  stop(): Promise<void>;
  regenerate(): Promise<void>;
  startEdit(messageId: string): void;
  cancelEdit(): void;
  submitEdit(messageId: string, content: string): Promise<boolean>;

  onDelta(event: EventTypes['answerDelta']): void;
  onPrefill(event: EventTypes['answerPrefill']): void;
  onDone(event: EventTypes['answerDone']): void;
  dispose(): void;
}

export type ChatStore = StoreApi<ChatState>;

/** Generating: an answer streams in the open conversation, or a call that starts one is in flight. */
export function isGenerating(s: Pick<ChatState, 'pending' | 'messages'>): boolean {
  return s.pending !== null || s.messages.some((m) => m.status === 'streaming');
}

/** The last assistant message, when it is the conversation's last message. */
export function lastAnswer(messages: readonly Message[]): Message | null {
  const last = messages.at(-1);
  return last && last.role === 'assistant' ? last : null;
}

export interface ChatDeps {
  api: RopewalkApi;
  notices: NoticesStore;
  budget: () => BudgetStore;
  frames: FrameScheduler;
  /** A conversation was created here (so the list can show it at once). */
  onCreated(conversation: Conversation): void;
}

const visible = (messages: readonly Message[]) => messages.filter((m) => m.role !== 'system');

export function createChatStore(deps: ChatDeps): ChatStore {
  const { api, notices } = deps;
  const report = (e: unknown) => notices.getState().report(e);
  const budget = () => deps.budget().getState();
  const drafts = new Map<string, string>(); // conversation id ('' = none) → draft, off-store
  const early = new Map<string, StreamChunk>();
  const earlyDone = new Map<string, Message>();
  let localId = 0;
  let checking = false; // a send is past its guard but before its call

  const store = createStore<ChatState>()((set, get) => {
    const buffer = new StreamBuffer(deps.frames, (chunks) => {
      const s = get();
      const live = { ...s.live };
      const seen = new Set<string>();
      const messages = s.messages.map((m) => {
        const chunk = chunks.get(m.id);
        if (!chunk) return m;
        seen.add(m.id);
        if (m.status !== 'streaming') return m;
        live[m.id] = { generatedTokens: chunk.generatedTokens, prefill: null };
        return { ...m, content: m.content + chunk.text };
      });
      for (const [id, chunk] of chunks) {
        if (seen.has(id) || chunk.conversationId !== s.conversationId) continue;
        const kept = early.get(id);
        if (kept) {
          kept.text += chunk.text;
          kept.generatedTokens = chunk.generatedTokens;
        } else early.set(id, { ...chunk });
      }
      if (seen.size > 0) set({ messages, live });
    });

    /** The assistant message as it stands, with anything that arrived before we knew it. */
    function settle(message: Message): { message: Message; live: LiveAnswer | null } {
      const done = earlyDone.get(message.id);
      earlyDone.delete(message.id);
      if (done) {
        early.delete(message.id);
        return { message: done, live: null };
      }
      const chunk = early.get(message.id);
      early.delete(message.id);
      const settled = chunk ? { ...message, content: message.content + chunk.text } : message;
      if (settled.status !== 'streaming') return { message: settled, live: null };
      return { message: settled, live: { generatedTokens: chunk?.generatedTokens ?? 0, prefill: null } };
    }

    function withLive(id: string, answer: LiveAnswer | null): Record<string, LiveAnswer> {
      const live = { ...get().live };
      if (answer) live[id] = answer;
      else delete live[id];
      return live;
    }

    function reset(conversationId: string | null, messages: Message[], loading: boolean): void {
      const s = get();
      drafts.set(s.conversationId ?? '', s.draft);
      buffer.clear();
      early.clear();
      earlyDone.clear();
      const live: Record<string, LiveAnswer> = {};
      for (const m of messages) if (m.status === 'streaming') live[m.id] = { generatedTokens: 0, prefill: null };
      const draft = drafts.get(conversationId ?? '') ?? '';
      set({ conversationId, messages: visible(messages), loading, live, pending: null, editingId: null, refusal: null, draft });
      void budget().refresh();
    }

    return {
      conversationId: null,
      messages: [],
      loading: false,
      pending: null,
      live: {},
      draft: '',
      editingId: null,
      refusal: null,

      async open(id) {
        reset(id, [], id !== null);
        if (id === null) return;
        try {
          const conversation = await api.getConversation({ id });
          if (get().conversationId !== id) return;
          // Deltas that arrived before this answer are already in its text (one ordered socket);
          // later ones apply on top. A done always carries the final text, so nothing is lost.
          buffer.clear();
          early.clear();
          const messages = visible(conversation.messages).map((m) => earlyDone.get(m.id) ?? m);
          earlyDone.clear();
          const live: Record<string, LiveAnswer> = {};
          for (const m of messages) if (m.status === 'streaming') live[m.id] = { generatedTokens: 0, prefill: null };
          set({ messages, live, loading: false });
        } catch (e) {
          if (get().conversationId === id) set({ loading: false });
          report(e);
        }
      },

      show(conversation) {
        reset(conversation.id, conversation.messages, false);
      },

      setDraft(text) {
        set({ draft: text, refusal: null });
        budget().schedule();
      },

      async send() {
        const content = get().draft;
        if (!content.trim() || checking || isGenerating(get())) return false;
        checking = true;
        try {
          const b = await budget().ensureFresh();
          if (get().draft !== content) return false; // edited while we checked: the user sends again
          if (b && !b.fits) {
            set({ refusal: refusalReason(b) });
            return false;
          }
          let conversationId = get().conversationId;
          if (conversationId === null) {
            const created = await api.createConversation({});
            deps.onCreated(created);
            reset(created.id, created.messages, false);
            drafts.delete('');
            conversationId = created.id;
          }
          const optimistic: Message = {
            id: `local-${++localId}`,
            conversationId,
            role: 'user',
            content,
            status: 'complete',
            stats: null,
            error: null,
            createdAt: Date.now(),
          };
          drafts.delete(conversationId);
          set({ messages: [...get().messages, optimistic], draft: '', pending: 'send', refusal: null, editingId: null });
          checking = false;
          try {
            const { userMessage, assistantMessage } = await api.sendMessage({ conversationId, content });
            if (get().conversationId !== conversationId) return true;
            const { message, live } = settle(assistantMessage);
            const messages = get().messages.map((m) => (m.id === optimistic.id ? userMessage : m));
            set({ messages: [...messages, message], live: withLive(message.id, live), pending: null });
            void budget().refresh();
            return true;
          } catch (e) {
            if (get().conversationId === conversationId) {
              const restore = get().draft === '' ? content : get().draft;
              set({ messages: get().messages.filter((m) => m.id !== optimistic.id), pending: null, draft: restore });
              void budget().refresh();
            }
            report(e);
            return false;
          }
        } catch (e) {
          report(e);
          return false;
        } finally {
          checking = false;
        }
      },

      async stop() {
        const conversationId = get().conversationId;
        if (!conversationId) return;
        try {
          await api.stopGeneration({ conversationId });
        } catch (e) {
          report(e);
        }
      },

      async regenerate() {
        const s = get();
        const conversationId = s.conversationId;
        if (!conversationId || isGenerating(s) || !lastAnswer(s.messages)) return;
        set({ pending: 'regenerate', editingId: null });
        try {
          const { assistantMessage } = await api.regenerate({ conversationId });
          if (get().conversationId !== conversationId) return;
          const messages = [...get().messages];
          while (messages.at(-1)?.role === 'assistant') messages.pop();
          const { message, live } = settle(assistantMessage);
          set({ messages: [...messages, message], live: withLive(message.id, live) });
        } catch (e) {
          report(e);
        } finally {
          if (get().conversationId === conversationId) set({ pending: null });
          void budget().refresh();
        }
      },

      startEdit(messageId) {
        if (!isGenerating(get())) set({ editingId: messageId });
      },

      cancelEdit() {
        set({ editingId: null });
      },

      async submitEdit(messageId, content) {
        const s = get();
        const conversationId = s.conversationId;
        if (!conversationId || !content.trim() || isGenerating(s)) return false;
        set({ pending: 'edit' });
        try {
          const { userMessage, assistantMessage } = await api.editMessage({ conversationId, messageId, content });
          if (get().conversationId !== conversationId) return true;
          const messages = get().messages;
          const at = messages.findIndex((m) => m.id === messageId);
          const before = at >= 0 ? messages.slice(0, at) : messages;
          const { message, live } = settle(assistantMessage);
          set({ messages: [...before, userMessage, message], live: withLive(message.id, live), editingId: null });
          return true;
        } catch (e) {
          report(e);
          return false;
        } finally {
          if (get().conversationId === conversationId) set({ pending: null });
          void budget().refresh();
        }
      },

      onDelta(event) {
        if (event.conversationId !== get().conversationId) return;
        buffer.push(event.conversationId, event.messageId, event.text, event.generatedTokens);
      },

      onPrefill(event) {
        const s = get();
        if (event.conversationId !== s.conversationId) return;
        const current = s.live[event.messageId];
        if (current?.prefill?.processed === event.processed && current.prefill.total === event.total) return;
        const prefill = { processed: event.processed, total: event.total };
        set({ live: { ...s.live, [event.messageId]: { generatedTokens: current?.generatedTokens ?? 0, prefill } } });
      },

      onDone(event) {
        const s = get();
        if (event.conversationId !== s.conversationId) return;
        const { message } = event;
        buffer.discard(message.id);
        early.delete(message.id);
        if (!s.messages.some((m) => m.id === message.id)) {
          earlyDone.set(message.id, message);
          return;
        }
        set({ messages: s.messages.map((m) => (m.id === message.id ? message : m)), live: withLive(message.id, null) });
        void budget().refresh();
      },

      dispose() {
        buffer.clear();
      },
    };
  });
  return store;
}
