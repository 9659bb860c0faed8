/**
 * Chat store slice: answers as they stream. `answerDelta` text goes into the StreamBuffer (plain
 * memory) and is committed at most once per frame (`commitFrame`); `answerWaiting` shows that it
 * waits for the engine (Stop cancels it there); `answerPrefill` shows prompt progress; `answerDone` replaces the message with the final one;
 * `answerSaveState` sets or clears the message's "not saved yet" reason. Events for a message the
 * window does not know yet go to EarlyArrivals (see renderer/lib/early-arrivals.ts). Events of
 * other conversations are ignored (opening one fetches its current state).
 */
import type { StoreApi } from 'zustand/vanilla';
import { withChunk, type StreamChunk } from '../../lib/stream-buffer.ts';
import type { ChatState, StreamSlice } from './types.ts';
import { type ChatContext, type ChatSlice, withLive } from './context.ts';

/**
 * One frame's worth of buffered deltas into the store (one `set` at most): text appended to
 * the streaming messages it belongs to; text for unknown messages of the open conversation kept
 * in `ctx.arrivals`; text for messages that already ended dropped (their done has the final text).
 */
export function commitFrame(store: StoreApi<ChatState>, ctx: ChatContext, chunks: ReadonlyMap<string, StreamChunk>): void {
  const s = store.getState();
  const live = { ...s.live };
  const known = new Set<string>();
  const messages = s.messages.map((m) => {
    const chunk = chunks.get(m.id);
    if (!chunk) return m;
    known.add(m.id);
    if (m.status !== 'streaming') return m;
    live[m.id] = { generatedTokens: chunk.generatedTokens, prefill: null, ...(chunk.tokensPerSec !== undefined ? { tokensPerSec: chunk.tokensPerSec } : {}) };
    return withChunk(m, chunk);
  });
  for (const [id, chunk] of chunks) {
    if (!known.has(id) && chunk.conversationId === s.conversationId) ctx.arrivals.keepText(id, chunk);
  }
  if (known.size > 0) store.setState({ messages, live });
}

export const createStreamSlice: ChatSlice<StreamSlice> = (ctx) => (set, get) => ({
  live: {},

  onDelta(event) {
    if (event.conversationId !== get().conversationId) return;
    ctx.buffer.push(event.conversationId, event.messageId, event.text, event.generatedTokens, event.reasoning ?? '', event.tokensPerSec);
  },

  onWaiting(event) {
    const s = get();
    if (event.conversationId !== s.conversationId) return;
    const current = s.live[event.messageId];
    set({ live: { ...s.live, [event.messageId]: { generatedTokens: current?.generatedTokens ?? 0, prefill: null, waiting: event.ahead } } });
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
    ctx.buffer.discard(message.id);
    if (!s.messages.some((m) => m.id === message.id)) {
      ctx.arrivals.keepDone(message);
      return;
    }
    ctx.arrivals.forgetText(message.id);
    // The final message, keeping what the window knew of its versions if the event omits them.
    const final = (m: typeof message) => (message.branches || !m.branches ? message : { ...message, branches: m.branches });
    set({ messages: s.messages.map((m) => (m.id === message.id ? final(m) : m)), live: withLive(s.live, message.id, null) });
    void ctx.budget().refresh();
  },

  onSaveState(event) {
    const s = get();
    if (event.conversationId !== s.conversationId) return;
    const mark = (m: (typeof s.messages)[number]) => {
      const { notSaved: _was, ...rest } = m;
      return event.notSaved ? { ...rest, notSaved: event.notSaved } : rest;
    };
    if (!s.messages.some((m) => m.id === event.messageId && m.notSaved !== (event.notSaved ?? undefined))) return;
    set({ messages: s.messages.map((m) => (m.id === event.messageId ? mark(m) : m)) });
  },

  dispose() {
    ctx.buffer.clear();
  },
});
