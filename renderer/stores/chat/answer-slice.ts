/**
 * Chat store slice: the answer actions — send, stop, regenerate, edit and resend, and switching
 * between the versions (branches) that regenerate and edit leave. Each call's
 * answer names the new assistant message; whatever streamed for it before that answer arrived
 * is applied from `ctx.arrivals` (`claim`). Send refuses, without calling the services, when
 * the budget says the next message will not fit, and shows the user's message at once
 * (optimistic), restoring the draft if the call fails.
 */
import type { Message } from '../../../main/contract/types.ts';
import { refusalReason } from '../../lib/meter.ts';
import type { AnswerSlice, LiveAnswer } from './types.ts';
import { isGenerating, lastAnswer } from './selectors.ts';
import { type ChatContext, type ChatSlice, liveFor, visible, withLive } from './context.ts';

/** The assistant message a call answered with, as it stands now, and its live progress. */
function claimAnswer(ctx: ChatContext, message: Message): { message: Message; live: LiveAnswer | null } {
  const claimed = ctx.arrivals.claim(message);
  const live = claimed.generatedTokens === null ? null : { generatedTokens: claimed.generatedTokens, prefill: null };
  return { message: claimed.message, live };
}

export const createAnswerSlice: ChatSlice<AnswerSlice> = (ctx) => (set, get) => {
  const { api } = ctx.deps;
  let localId = 0;
  let beforeCall = false; // a send is past its guard but has not called sendMessage yet
  let stopBeforeCall = false; // Stop or Escape came in that time

  return {
    pending: null,
    editingId: null,

    async send() {
      const content = get().draft;
      if (!content.trim() || isGenerating(get())) return false;
      // Generating from the keypress on: the budget check below can take a round trip, and an
      // Escape or Stop in that time must not be lost. Enter sends; such a stop then stops the
      // answer as soon as the call is out (the services store it stopped, with no tokens).
      beforeCall = true;
      stopBeforeCall = false;
      set({ pending: 'send' });
      try {
        const b = await ctx.budget().ensureFresh();
        if (get().draft !== content) {
          set({ pending: null });
          return false; // edited while we checked: the user sends again
        }
        if (b && !b.fits) {
          set({ refusal: refusalReason(b), pending: null });
          return false;
        }
        // Taken before a new conversation is shown (showing one starts its composer empty).
        const attachments = get().attachments;
        let conversationId = get().conversationId;
        if (conversationId === null) {
          const created = await api.createConversation({});
          ctx.deps.onCreated(created);
          get().show(created);
          ctx.drafts.delete('');
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
          documents: attachments,
        };
        ctx.drafts.delete(conversationId);
        set({ messages: [...get().messages, optimistic], draft: '', attachments: [], pending: 'send', refusal: null, editingId: null });
        beforeCall = false;
        try {
          const documents = attachments.map((a) => ({ id: a.id, fit: a.fit }));
          const call = api.sendMessage({ conversationId, content, ...(documents.length ? { documents } : {}) });
          // Sent after the call on the same ordered transport: the services see the send first.
          if (stopBeforeCall) void api.stopGeneration({ conversationId }).catch((e: unknown) => ctx.report(e));
          const { userMessage, assistantMessage } = await call;
          if (get().conversationId !== conversationId) return true;
          const { message, live } = claimAnswer(ctx, assistantMessage);
          const messages = get().messages.map((m) => (m.id === optimistic.id ? userMessage : m));
          set({ messages: [...messages, message], live: withLive(get().live, message.id, live), pending: null });
          void ctx.budget().refresh();
          return true;
        } catch (e) {
          if (get().conversationId === conversationId) {
            const restore = get().draft === '' ? content : get().draft;
            const restoreAttachments = get().attachments.length ? get().attachments : attachments;
            set({ messages: get().messages.filter((m) => m.id !== optimistic.id), pending: null, draft: restore, attachments: restoreAttachments });
            ctx.drafts.set(conversationId, restore);
            void ctx.budget().refresh();
          }
          ctx.report(e);
          return false;
        }
      } catch (e) {
        if (get().pending === 'send' && beforeCall) set({ pending: null });
        ctx.report(e);
        return false;
      } finally {
        beforeCall = false;
      }
    },

    async stop() {
      if (beforeCall) {
        stopBeforeCall = true; // the send has not reached the services yet: stopped right after it
        return;
      }
      const conversationId = get().conversationId;
      if (!conversationId) return;
      try {
        await api.stopGeneration({ conversationId });
      } catch (e) {
        ctx.report(e);
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
        const { message, live } = claimAnswer(ctx, assistantMessage);
        set({ messages: [...messages, message], live: withLive(get().live, message.id, live) });
      } catch (e) {
        ctx.report(e);
      } finally {
        if (get().conversationId === conversationId) set({ pending: null });
        void ctx.budget().refresh();
      }
    },

    async selectBranch(messageId) {
      const { conversationId } = get();
      if (!conversationId || isGenerating(get())) return;
      try {
        const conversation = await api.selectBranch({ conversationId, messageId });
        if (get().conversationId !== conversationId) return;
        set({ messages: visible(conversation.messages), live: liveFor(conversation.messages), editingId: null });
        void ctx.budget().refresh();
      } catch (e) {
        ctx.report(e);
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
        const { message, live } = claimAnswer(ctx, assistantMessage);
        set({ messages: [...before, userMessage, message], live: withLive(get().live, message.id, live), editingId: null });
        return true;
      } catch (e) {
        ctx.report(e);
        return false;
      } finally {
        if (get().conversationId === conversationId) set({ pending: null });
        void ctx.budget().refresh();
      }
    },
  };
};
