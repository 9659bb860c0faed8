/**
 * Answers: send, regenerate, edit, stop. The engine is single, so one answer is generated at a
 * time for the whole app; a second request meanwhile is refused (`BUSY`).
 *
 * Before an answer starts, the context budget of what will be fed is counted; if it does not fit
 * the request is refused with `CONTEXT_FULL` and a sentence naming the numbers, and nothing is
 * stored. Then the user message and an empty assistant message ('streaming') are stored, the
 * call returns both, and the answer streams in the background as events:
 *   answerPrefill (per prefill chunk) → answerDelta (token text, batched: at most one event per
 *   16 ms) → answerDone (the final message, with stats), and budgetChanged (at the start, about
 *   every 250 ms while streaming by arithmetic, and recounted exactly at the end).
 * The growing answer is written to SQLite about every second and at the end, so a killed
 * process loses at most about a second of it. A stop keeps the partial answer ('cancelled'); a
 * worker crash keeps it too ('error', and the worker is restarted with the model reloaded).
 */
import { performance } from 'node:perf_hooks';
import type { AnswerStats, ContextBudget, Conversation, Message, MessageStatus } from '../contract/types.ts';
import type { EngineHost } from '../engine-host/host.ts';
import type { GenerationEvent, GenerationRequest, GenerationStats } from '../engine/generate/types.ts';
import { firstLine, RouterError } from '../router.ts';
import type { BudgetService } from './budget.ts';
import type { AssembledPrompt, Draft } from './documents.ts';
import type { Emit, ModelService } from './model-service.ts';
import type { SettingsService } from './settings.ts';
import type { ConversationStore } from './store.ts';

/** Shortest spacing of answerDelta events of one answer, ms. */
export const DELTA_INTERVAL_MS = 16;
/** Longest time a streamed answer's text stays unsaved, ms. */
export const PERSIST_INTERVAL_MS = 1000;
/** Spacing of the estimated budgetChanged events while an answer streams, ms. */
export const BUDGET_INTERVAL_MS = 250;
export const CRASH_MESSAGE = 'the engine stopped unexpectedly; it has been restarted';

interface ActiveAnswer {
  conversationId: string;
  messageId: string | null;
  controller: AbortController;
  /** Settles when the answer has ended and its final state is stored. */
  done: Promise<void>;
  /** Text already sent in answerDelta events (what a window that reloads must start from). */
  emitted: string;
}

export interface ChatServiceOptions {
  host: EngineHost;
  store: ConversationStore;
  settings: SettingsService;
  budget: BudgetService;
  models: ModelService;
  emit: Emit;
}

/** Sends, regenerates, edits and stops answers; streams them as events and saves them as they grow. */
export class ChatService {
  private active: ActiveAnswer | null = null;
  private disposed = false;

  constructor(private readonly o: ChatServiceOptions) {}

  /** Whether an answer is being generated (or about to start). */
  get generating(): boolean {
    return this.active !== null;
  }

  /**
   * Appends a user message and starts its answer.
   * @throws RouterError BUSY, CONTEXT_FULL, NOT_FOUND, MODEL_NOT_READY.
   */
  async send(conversationId: string, content: string, documents: Draft['documents'] = []): Promise<{ userMessage: Message; assistantMessage: Message }> {
    return this.withClaim(conversationId, async (slot) => {
      const conv = this.o.store.getConversation(conversationId);
      const { budget, prompt } = await this.o.budget.prepare(conversationId, content, conv.messages, documents);
      assertFits(budget, 'this message');
      this.assertNotStopped(slot);
      const appended = this.o.store.appendMessage(conversationId, { role: 'user', content, status: 'complete' });
      this.o.store.attachDocuments(appended.id, documents);
      const userMessage = documents.length ? this.o.store.getMessage(appended.id) : appended;
      this.o.store.setAutoTitle(conversationId, content);
      this.o.budget.clearDraft(conversationId);
      const assistantMessage = this.begin(slot, prompt, afterSend(budget));
      return { userMessage, assistantMessage };
    });
  }

  /**
   * Replaces the last answer (if the conversation ends with one) with a new one.
   * @throws RouterError BUSY, CONTEXT_FULL, NOT_FOUND, NOTHING_TO_REGENERATE, MODEL_NOT_READY.
   */
  async regenerate(conversationId: string): Promise<{ assistantMessage: Message }> {
    return this.withClaim(conversationId, async (slot) => {
      const messages = this.o.store.getConversation(conversationId).messages;
      const last = messages[messages.length - 1];
      const history = last?.role === 'assistant' ? messages.slice(0, -1) : messages;
      if (history.length === 0 || history[history.length - 1].role !== 'user') {
        throw new RouterError('NOTHING_TO_REGENERATE', 'there is no answer to regenerate: the conversation does not end with a message of yours');
      }
      const { budget, prompt } = await this.o.budget.prepare(conversationId, '', history);
      assertFits(budget, 'the conversation');
      this.assertNotStopped(slot);
      if (history !== messages) this.o.store.deleteMessage(last.id);
      return { assistantMessage: this.begin(slot, prompt, budget) };
    });
  }

  /**
   * Replaces a user message's text, drops every message after it, and answers again.
   * @throws RouterError BUSY, CONTEXT_FULL, NOT_FOUND, INVALID_REQUEST (not a user message), MODEL_NOT_READY.
   */
  async edit(conversationId: string, messageId: string, content: string): Promise<{ userMessage: Message; assistantMessage: Message }> {
    return this.withClaim(conversationId, async (slot) => {
      const messages = this.o.store.getConversation(conversationId).messages;
      const i = messages.findIndex((m) => m.id === messageId);
      if (i < 0) throw new RouterError('NOT_FOUND', `no message with id ${messageId} in this conversation`);
      if (messages[i].role !== 'user') throw new RouterError('INVALID_REQUEST', 'only your own messages can be edited');
      const before = messages.slice(0, i);
      const documents = (messages[i].documents ?? []).map((d) => ({ id: d.id, fit: d.fit }));
      const { budget, prompt } = await this.o.budget.prepare(conversationId, content, before, documents);
      assertFits(budget, 'this message');
      this.assertNotStopped(slot);
      this.o.store.updateMessage(messageId, { content });
      this.o.store.deleteMessagesAfter(conversationId, messageId);
      if (!before.some((m) => m.role === 'user')) this.o.store.setAutoTitle(conversationId, content, true);
      const userMessage = this.o.store.getMessage(messageId);
      this.o.budget.clearDraft(conversationId);
      return { userMessage, assistantMessage: this.begin(slot, prompt, afterSend(budget)) };
    });
  }

  /** Stops the answer being generated in this conversation, if any; resolves once it is stored. */
  async stop(conversationId: string): Promise<void> {
    const a = this.active;
    if (!a || a.conversationId !== conversationId) return;
    a.controller.abort();
    await a.done;
  }

  /** The conversation with the streaming answer's text as far as the window has been sent it. */
  overlay(conv: Conversation): Conversation {
    const a = this.active;
    if (!a || a.conversationId !== conv.id || !a.messageId) return conv;
    return { ...conv, messages: conv.messages.map((m) => (m.id === a.messageId && a.emitted.length > m.content.length ? { ...m, content: a.emitted } : m)) };
  }

  /**
   * A raw generation outside any conversation (the OpenAI-compatible API), holding the same
   * one-answer-at-a-time claim. Aborting `signal` ends it with done{reason:'cancelled'}.
   * @throws RouterError BUSY / MODEL_NOT_READY / SHUT_DOWN on the first `next()`; the engine's
   *   InvalidOptionError / ContextOverflowError before any event.
   */
  async *completion(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (this.disposed) throw new RouterError('SHUT_DOWN', 'the app is shutting down');
    if (this.active) throw new RouterError('BUSY', 'an answer is already being generated; wait for it to finish or stop it');
    let finished!: () => void;
    const slot: ActiveAnswer = { conversationId: '', messageId: null, controller: new AbortController(), done: new Promise<void>((r) => (finished = r)), emitted: '' };
    this.active = slot;
    const onAbort = () => slot.controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    try {
      await this.o.models.ready();
      this.o.models.assertLoaded();
      yield* this.o.host.generate(request, { signal: slot.controller.signal });
    } catch (e) {
      if ((e as { code?: unknown }).code === 'WORKER_CRASHED' && !this.disposed) void this.o.models.recover();
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.release(slot);
      finished();
    }
  }

  /** Stops any answer (waiting up to `timeoutMs` for it to be stored) and refuses new ones. */
  async dispose(timeoutMs = 3000): Promise<void> {
    this.disposed = true;
    const a = this.active;
    if (!a) return;
    a.controller.abort();
    await Promise.race([a.done, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
  }

  /** Runs `work` holding the one-answer-at-a-time claim; the claim passes to the stream or is released on failure. */
  private async withClaim<T>(conversationId: string, work: (slot: ActiveAnswer) => Promise<T>): Promise<T> {
    if (this.disposed) throw new RouterError('SHUT_DOWN', 'the app is shutting down');
    if (this.active) throw new RouterError('BUSY', 'an answer is already being generated; wait for it to finish or stop it');
    const slot: ActiveAnswer = { conversationId, messageId: null, controller: new AbortController(), done: Promise.resolve(), emitted: '' };
    this.active = slot;
    try {
      await this.o.models.ready();
      this.o.models.assertLoaded();
      const result = await work(slot);
      this.o.emit('conversationsChanged', { conversations: this.o.store.listConversations() });
      return result;
    } catch (e) {
      if (!slot.messageId) this.release(slot);
      throw e;
    }
  }

  private release(slot: ActiveAnswer): void {
    if (this.active === slot) this.active = null;
  }

  private assertNotStopped(slot: ActiveAnswer): void {
    if (slot.controller.signal.aborted) throw new RouterError('CANCELLED', 'the answer was stopped before it started');
  }

  /** Stores the empty answer and starts streaming it from `prompt` (which ends with the user turn). */
  private begin(slot: ActiveAnswer, prompt: AssembledPrompt, budget: ContextBudget): Message {
    const conversationId = slot.conversationId;
    const assistant = this.o.store.appendMessage(conversationId, { role: 'assistant', content: '', status: 'streaming' });
    slot.messageId = assistant.id;
    const s = this.o.settings.get();
    const request: GenerationRequest = {
      messages: prompt.messages,
      maxTokens: s.maxTokens,
      sampler: {
        temperature: s.temperature,
        topK: s.topK,
        topP: s.topP,
        minP: s.minP,
        repetitionPenalty: s.repetitionPenalty,
        ...(s.seed !== null ? { seed: s.seed } : {}),
      },
    };
    this.o.emit('budgetChanged', budget);
    slot.done = this.stream(slot, assistant, request, budget, prompt.documentParts);
    return assistant;
  }

  /** Streams one answer to events and SQLite. Never rejects. */
  private async stream(slot: ActiveAnswer, message: Message, request: GenerationRequest, base: ContextBudget, documentParts: string[] | null): Promise<void> {
    const { conversationId } = slot;
    const messageId = message.id;
    // The answer so far is slot.emitted (sent in deltas) + pending (batched for the next delta).
    let pending = '';
    let generated = 0;
    let lastEmit = -Infinity;
    let flushTimer: NodeJS.Timeout | null = null;
    let saved = '';
    let lastSave = performance.now();
    let budgetAt = 0; // begin() already sent the budget with 0 generated tokens

    const flush = () => {
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = null;
      if (!pending) return;
      slot.emitted += pending;
      this.o.emit('answerDelta', { conversationId, messageId, text: pending, generatedTokens: generated });
      pending = '';
      lastEmit = performance.now();
    };
    const save = () => {
      const text = slot.emitted + pending;
      if (text === saved) return;
      this.o.store.updateMessage(messageId, { content: text });
      saved = text;
      lastSave = performance.now();
    };
    const tick = setInterval(() => {
      try {
        if (performance.now() - lastSave >= PERSIST_INTERVAL_MS - BUDGET_INTERVAL_MS / 2) save();
      } catch {
        // A failed write (disk full) is retried on the next tick and at the end.
      }
      if (generated !== budgetAt) {
        budgetAt = generated;
        this.o.emit('budgetChanged', this.o.budget.estimate(base, generated));
      }
    }, BUDGET_INTERVAL_MS);

    let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
    let failure: { message: string; crashed: boolean } | null = null;
    try {
      for await (const ev of this.o.host.generate(request, { signal: slot.controller.signal })) {
        if (ev.type === 'prefill') {
          this.o.emit('answerPrefill', { conversationId, messageId, processed: ev.processed, total: ev.total });
        } else if (ev.type === 'token') {
          if (ev.id >= 0) generated++;
          if (!ev.text) continue;
          pending += ev.text;
          flushTimer ??= setTimeout(flush, Math.max(0, lastEmit + DELTA_INTERVAL_MS - performance.now()));
        } else {
          done = ev;
        }
      }
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      failure = code === 'WORKER_CRASHED' ? { message: CRASH_MESSAGE, crashed: true } : { message: firstLine(e), crashed: false };
    } finally {
      clearInterval(tick);
    }
    flush();

    let text = slot.emitted;
    let status: MessageStatus;
    let error: string | null = null;
    let stats: AnswerStats | null = null;
    if (done) {
      text = done.text.length >= text.length ? done.text : text;
      stats = { ...toAnswerStats(done.reason, done.stats), ...(documentParts ? { documentParts } : {}) };
      status = done.reason === 'cancelled' ? 'cancelled' : done.reason === 'error' ? 'error' : 'complete';
      if (status === 'error') error = done.error?.message ?? 'the answer failed';
    } else {
      status = 'error';
      error = failure?.message ?? 'the answer ended without a result';
    }
    const final: Message = { ...message, content: text, status, stats, error };
    try {
      this.o.store.updateMessage(messageId, { content: text, status, stats, error });
    } catch (e) {
      final.status = 'error';
      final.error = `the answer could not be saved: ${firstLine(e)}`;
    }
    this.release(slot);
    // Restart before anyone hears of the end, so a send right after waits for the fresh worker.
    if (failure?.crashed && !this.disposed) void this.o.models.recover();
    this.o.emit('answerDone', { conversationId, message: final });
    if (this.disposed) return;
    // The exact count now that the answer is part of the history.
    try {
      if (this.o.store.hasConversation(conversationId)) {
        const draft = this.o.budget.lastDraft(conversationId);
        this.o.emit('budgetChanged', await this.o.budget.compute(conversationId, draft.content, undefined, draft.documents));
      }
    } catch {
      // No model (a crash that could not recover); the model state reports it.
    }
  }
}

/** The budget right after a send: the message is now history, the composer is empty. */
function afterSend(b: ContextBudget): ContextBudget {
  // The draft's documents stay counted as documents: they are in the history's turn now.
  return { ...b, history: b.history + b.draft, draft: 0 };
}

/** @throws RouterError CONTEXT_FULL with the numbers when the budget does not fit. */
function assertFits(b: ContextBudget, what: string): void {
  if (b.fits) return;
  const parts = [b.system ? `the system prompt (${b.system})` : '', b.documents ? `the documents (${b.documents})` : '', b.history ? `the history (${b.history})` : '', b.draft ? `this message (${b.draft})` : ''].filter(Boolean);
  throw new RouterError(
    'CONTEXT_FULL',
    `${what} does not fit: ${parts.join(' + ') || 'the prompt'} = ${b.used} tokens, plus ${b.reserve} reserved for the answer, makes ${b.total}, over the max context of ${b.maxContext}; ` +
      'shorten it, lower max tokens, raise the max context, or start a new conversation',
  );
}

/** The per-answer stats the window shows, from the engine's GenerationStats. */
export function toAnswerStats(reason: AnswerStats['finishReason'], s: GenerationStats): AnswerStats {
  return {
    finishReason: reason,
    promptTokens: s.promptTokens,
    generatedTokens: s.generatedTokens,
    reusedTokens: s.reusedTokens,
    ttftMs: s.ttftMs,
    prefillTokensPerSec: s.prefillTokensPerSec,
    decodeTokensPerSec: s.decodeTokensPerSec,
  };
}
