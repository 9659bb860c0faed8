/**
 * Chat store slice: the answer actions — send, stop, regenerate, edit and resend, edit an
 * answer's text, continue an answer that reached max new tokens, and switching
 * between the versions (branches) that regenerate and edit leave; the send's steps and its
 * stop-before-call race are in send.ts. Each call's
 * answer names the new assistant message; whatever streamed for it before that answer arrived
 * is applied from `ctx.arrivals` (`claim`). Send refuses, without calling the services, when
 * the budget says the next message will not fit, and shows the user's message at once
 * (optimistic), restoring the draft if the call fails.
 */
import type { AnswerSlice } from './types.ts';
import { isGenerating, lastAnswer } from './selectors.ts';
import { type ChatSlice, liveFor, visible, withLive } from './context.ts';
import { callSend, checkBudget, claimAnswer, ensureConversation, restoreDraft, SendGate, showOptimistic } from './send.ts';

export const createAnswerSlice: ChatSlice<AnswerSlice> = (ctx) => (set, get) => {
  const { api } = ctx.deps;
  let localId = 0;
  const gate = new SendGate();

  return {
    pending: null,
    editingId: null,

    async send() {
      const content = get().draft;
      if (!content.trim() || isGenerating(get())) return false;
      // Generating from the keypress on (see SendGate: a stop before the call is kept).
      gate.begin();
      set({ pending: 'send' });
      try {
        if ((await checkBudget(ctx, get, set, content)) !== 'go') return false;
        // Taken before a new conversation is shown (showing one starts its composer empty).
        const attachments = get().attachments;
        const conversationId = await ensureConversation(ctx, get);
        const optimistic = showOptimistic(ctx, get, set, conversationId, content, attachments, `local-${++localId}`);
        gate.close();
        try {
          return await callSend(ctx, get, set, gate, optimistic, attachments);
        } catch (e) {
          restoreDraft(ctx, get, set, optimistic, attachments);
          ctx.report(e);
          return false;
        }
      } catch (e) {
        if (get().pending === 'send' && gate.beforeCall) set({ pending: null });
        ctx.report(e);
        return false;
      } finally {
        gate.close();
      }
    },

    async stop() {
      if (gate.noteStop()) return; // the send has not reached the services yet: stopped right after it
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

    async continueAnswer() {
      const s = get();
      const conversationId = s.conversationId;
      const answer = lastAnswer(s.messages);
      if (!conversationId || isGenerating(s) || answer?.stats?.finishReason !== 'length') return;
      // Streaming at once, so deltas that come before the call's answer append to it.
      const live = { generatedTokens: answer.stats.generatedTokens, prefill: null };
      set({ pending: 'continue', editingId: null, messages: s.messages.map((m) => (m.id === answer.id ? { ...m, status: 'streaming' } : m)), live: withLive(s.live, answer.id, live) });
      try {
        await api.continueAnswer({ conversationId, messageId: answer.id });
      } catch (e) {
        // Refused: the answer as it was (unless its end arrived meanwhile).
        if (get().conversationId === conversationId) {
          set({ messages: get().messages.map((m) => (m.id === answer.id && m.status === 'streaming' ? answer : m)), live: withLive(get().live, answer.id, null) });
        }
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
        if (s.messages.find((m) => m.id === messageId)?.role === 'assistant') {
          // An answer's text: a new version at its place, nothing generated.
          const conversation = await api.editAnswer({ conversationId, messageId, content });
          if (get().conversationId === conversationId) set({ messages: visible(conversation.messages), live: liveFor(conversation.messages), editingId: null });
          return true;
        }
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
