/**
 * Chat store slice: which conversation is open and its messages (and deleting one of them). Switching conversations resets
 * everything that belonged to the one before (stream buffer, kept early events, live progress,
 * pending call, edit, refusal) and swaps the composer's draft for the new conversation's.
 * New chat switches at once (to no conversation) and takes the created one's id when it arrives,
 * so text typed or sent while the services create it stays in the new chat.
 */
import type { Message } from '../../../main/contract/types.ts';
import { type ChatSlice, liveFor, visible } from './context.ts';
import type { ChatState, ConversationSlice } from './types.ts';

export const createConversationSlice: ChatSlice<ConversationSlice> = (ctx) => (set, get) => {
  function switchTo(conversationId: string | null, messages: Message[], loading: boolean): void {
    const s = get();
    ctx.drafts.set(s.conversationId ?? '', s.draft);
    ctx.buffer.clear();
    ctx.arrivals.clear();
    const draft = ctx.drafts.get(conversationId ?? '');
    set({
      conversationId,
      messages: visible(messages),
      loading,
      live: liveFor(messages),
      pending: null,
      editingId: null,
      refusal: null,
      draft,
      // Attachments belong to the draft being written; another conversation starts without.
      attachments: [],
      reading: null,
    } satisfies Partial<ChatState>);
    void ctx.budget().refresh();
  }

  return {
    conversationId: null,
    messages: [],
    loading: false,

    async open(id) {
      switchTo(id, [], id !== null);
      if (id === null) return;
      try {
        const conversation = await ctx.deps.api.getConversation({ id });
        if (get().conversationId !== id) return;
        // Deltas that arrived before this snapshot are already in its text (one ordered socket);
        // later ones apply on top. A kept done carries the final text, so nothing is lost.
        ctx.buffer.clear();
        const messages = ctx.arrivals.overSnapshot(visible(conversation.messages));
        set({ messages, live: liveFor(messages), loading: false });
      } catch (e) {
        if (get().conversationId === id) set({ loading: false });
        ctx.report(e);
      }
    },

    show(conversation) {
      switchTo(conversation.id, conversation.messages, false);
    },

    async startNew(create) {
      switchTo(null, [], false);
      const creation = create();
      ctx.creating = creation;
      try {
        const conversation = await creation;
        // Still on the empty chat it stands for: it becomes this conversation, draft and all.
        if (ctx.creating === creation && get().conversationId === null) {
          set({ conversationId: conversation.id });
          ctx.drafts.set(conversation.id, get().draft);
          ctx.drafts.delete('');
          void ctx.budget().refresh();
        }
        return conversation;
      } finally {
        if (ctx.creating === creation) ctx.creating = null;
      }
    },

    async deleteMessage(messageId) {
      const id = get().conversationId;
      if (!id) return;
      try {
        const conversation = await ctx.deps.api.deleteMessage({ conversationId: id, messageId });
        if (get().conversationId !== id) return;
        set({ messages: visible(conversation.messages) });
        void ctx.budget().refresh();
      } catch (e) {
        ctx.report(e);
      }
    },
  };
};
