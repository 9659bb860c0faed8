/**
 * Answers: send, regenerate, edit, continue, stop, an answer's text edited, and raw completions
 * for the OpenAI-compatible API. The
 * engine is single, so one answer is generated at a time for the whole app: every answer is
 * registered by `claim` (answer-slots.ts; the window has one answer at a time: a second is refused
 * with `BUSY`), then waits its turn in the engine's FIFO queue (`EngineQueue`), shared by window answers and
 * API requests. A window answer that must wait is announced with `answerWaiting`; Stop takes it
 * out of the queue (stored as 'cancelled', empty).
 *
 * Before a window answer starts, the context budget of what will be fed is counted; if it does not
 * fit the request is refused with `CONTEXT_FULL` and a sentence naming the numbers, and nothing is
 * stored. Then the user message and an empty assistant message ('streaming') are stored, the
 * call returns both, and the answer streams in the background as events:
 *   answerPrefill (per prefill chunk) → answerDelta (token text, batched: at most one event per
 *   16 ms) → answerDone (the final message, with stats), and budgetChanged (at the start, about
 *   every 250 ms while streaming by arithmetic, and recounted exactly at the end).
 * The growing answer is written to SQLite about every second and at the end, so a killed
 * process loses at most about a second of it. A write the disk refuses (full, read-only, I/O
 * error) keeps the answer in memory and retries with backoff (answer-save.ts): the window hears
 * `answerSaveState` ("not saved yet: disk full") and, once space returns and it is written, null. A stop keeps the partial answer ('cancelled'); a
 * worker crash keeps it too ('error', and the worker is restarted with the model reloaded).
 *
 * Errors are `ServiceError`s (codes in each method's docstring) or the engine's `EngineError`s.
 */
import { raiseUpToTrained, trainedContextReached, WINDOW_CONTEXT_REMEDIES } from '../contract/context-full.ts';
import type { ContextBudget, Conversation, Message } from '../contract/types.ts';
import type { ChatEngine } from '../engine-host/chat-engine.ts';
import type { GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';
import { AnswerSaves, storageFault } from './answer-save.ts';
import { answerSetup, DecodeRate, DeltaBatcher, every, finalState, PeriodicSaver, realScheduler, type DoneEvent, type Scheduler, type StreamEnd } from './answer-stream.ts';
import { continuable, continuationPrompt, joinContinuation } from './continue-answer.ts';
import type { BudgetService } from './budget.ts';
import type { AssembledPrompt, Draft } from './documents.ts';
import { AnswerSlots, type ActiveAnswer } from './answer-slots.ts';
import type { EngineQueue } from './engine-queue.ts';
import { WorkerCrashedError } from '../engine/errors.ts';
import { firstLine, ServiceError } from './errors.ts';
import type { Emit } from './events.ts';
import type { ModelService } from './model-service.ts';
import type { SettingsService } from './settings.ts';
import type { ConversationStore } from './store.ts';

export { toAnswerStats } from './answer-stream.ts';

/** Shortest spacing of answerDelta events of one answer, ms. */
export const DELTA_INTERVAL_MS = 16;
/** Longest time a streamed answer's text stays unsaved, ms. */
export const PERSIST_INTERVAL_MS = 1000;
/** Spacing of the estimated budgetChanged events while an answer streams, ms. */
export const BUDGET_INTERVAL_MS = 250;
export const CRASH_MESSAGE = 'the engine stopped unexpectedly; it has been restarted';

export interface ChatServiceDeps {
  engine: ChatEngine;
  store: ConversationStore;
  settings: SettingsService;
  budget: BudgetService;
  models: ModelService;
  emit: Emit;
  /** The engine's queue (default: a new one of QUEUE_LIMIT). */
  queue?: EngineQueue;
  /** Time for the answers' streams — delta batching, the budget and save ticker, tokens/s — and the save retries (default: Node's timers; tests drive a manual one). */
  scheduler?: Scheduler;
}

/** Sends, regenerates, edits and stops answers; streams them as events and saves them as they grow. */
export class ChatService {
  private readonly slots: AnswerSlots;
  private readonly saves: AnswerSaves;
  private readonly scheduler: Scheduler;

  constructor(private readonly deps: ChatServiceDeps) {
    this.slots = new AnswerSlots(deps.models, deps.queue);
    this.scheduler = deps.scheduler ?? realScheduler;
    this.saves = new AnswerSaves(deps.store, deps.emit, this.scheduler);
  }

  /** Whether an answer is being generated or waits for the engine. */
  get generating(): boolean {
    return this.slots.size > 0;
  }

  /** How many answers wait for the engine (window and API). */
  get waiting(): number {
    return this.slots.waiting;
  }

  private get disposed(): boolean {
    return this.slots.isClosed;
  }

  /**
   * Deletes a message with its answer (see ConversationStore.deleteMessageWithAnswer).
   * @throws ServiceError BUSY while this conversation's answer is generated; NOT_FOUND.
   */
  deleteMessage(conversationId: string, messageId: string): Conversation {
    this.assertIdle(conversationId, 'deleting messages');
    this.deps.store.deleteMessageWithAnswer(conversationId, messageId);
    return this.deps.store.getConversation(conversationId);
  }

  /**
   * Replaces an answer's text with `content`, as a new version at its place: the earlier version
   * and what followed it stay, as a branch (‹ i/n ›), and the next turn's prompt reads the new
   * text. Nothing is generated; the new version has no stats (the model did not write it).
   * @returns the conversation after. @throws ServiceError BUSY (an answer streams in this
   *   conversation), NOT_FOUND, INVALID_REQUEST (not an answer).
   */
  editAnswer(conversationId: string, messageId: string, content: string): Conversation {
    this.assertIdle(conversationId, 'editing an answer');
    const { store, emit } = this.deps;
    const edited = store.getConversation(conversationId).messages.find((m) => m.id === messageId);
    if (!edited) throw new ServiceError('NOT_FOUND', `no message with id ${messageId} in this conversation`);
    if (edited.role !== 'assistant') throw new ServiceError('INVALID_REQUEST', 'this is not an answer: edit your own message with editMessage');
    store.leavePath(conversationId, messageId); // the earlier version and what followed stay, as a branch
    store.appendMessage(conversationId, { role: 'assistant', content, ...(edited.reasoning ? { reasoning: edited.reasoning } : {}), status: 'complete', stats: null });
    emit('conversationsChanged', { conversations: store.listConversations() });
    void this.recountBudget(conversationId);
    return store.getConversation(conversationId);
  }

  /**
   * Continues the last answer, which ended at max new tokens, in the same message: its text is
   * the reply's opening, so the KV cache already holds it (continue-answer.ts). The answer streams
   * as a new one does, its deltas appended to the text it had.
   * @throws ServiceError BUSY, CONTEXT_FULL, NOT_FOUND, INVALID_REQUEST (see `continuable`; a
   *   remote engine), MODEL_NOT_READY, SHUT_DOWN.
   */
  async continueAnswer(conversationId: string, messageId: string): Promise<{ assistantMessage: Message }> {
    return this.withClaim(conversationId, async (answer) => {
      const { store, budget } = this.deps;
      if (this.deps.models.state.info?.remote) throw new ServiceError('INVALID_REQUEST', 'a remote engine cannot continue an answer: its KV cache is the server\'s; regenerate it with a larger Max new tokens');
      const { answer: base, history } = continuable(store.getConversation(conversationId).messages, messageId);
      const { budget: counted, prompt, contextShift } = await budget.prepare(conversationId, '', history);
      assertFits(counted, 'the conversation', this.deps.models.trainedContext);
      const opening = continuationPrompt(prompt.messages, base);
      store.updateMessage(base.id, { status: 'streaming', error: null });
      answer.messageId = base.id;
      const streaming: Message = { ...base, status: 'streaming', error: null };
      this.deps.emit('budgetChanged', counted);
      const request = { ...this.generationRequest(conversationId, prompt, contextShift, store.conversationThinking(conversationId)), ...opening };
      void this.stream(answer, streaming, request, counted, prompt, base);
      return { assistantMessage: streaming };
    });
  }

  /**
   * Appends a user message and starts its answer.
   * @throws ServiceError BUSY, CONTEXT_FULL, NOT_FOUND, MODEL_NOT_READY, SHUT_DOWN. A stop that comes while the
   *   budget is counted still stores the message; its answer is stored stopped (cancelled, no tokens).
   */
  async send(conversationId: string, content: string, documents: Draft['documents'] = []): Promise<{ userMessage: Message; assistantMessage: Message }> {
    return this.withClaim(conversationId, async (answer) => {
      const { store, budget } = this.deps;
      const conv = store.getConversation(conversationId);
      const { budget: counted, prompt, contextShift } = await budget.prepare(conversationId, content, conv.messages, documents);
      assertFits(counted, 'this message', this.deps.models.trainedContext);
      const appended = store.appendMessage(conversationId, { role: 'user', content, status: 'complete' });
      store.attachDocuments(appended.id, documents);
      const userMessage = documents.length ? store.getMessage(appended.id) : appended;
      store.setAutoTitle(conversationId, content);
      budget.clearDraft(conversationId);
      const assistantMessage = this.begin(answer, conversationId, prompt, contextShift, afterSend(counted));
      return { userMessage, assistantMessage };
    });
  }

  /**
   * Replaces the last answer (if the conversation ends with one) with a new one.
   * @throws ServiceError BUSY, CONTEXT_FULL, NOT_FOUND, NOTHING_TO_REGENERATE, MODEL_NOT_READY, SHUT_DOWN.
   */
  async regenerate(conversationId: string): Promise<{ assistantMessage: Message }> {
    return this.withClaim(conversationId, async (answer) => {
      const messages = this.deps.store.getConversation(conversationId).messages;
      const last = messages[messages.length - 1];
      const history = last?.role === 'assistant' ? messages.slice(0, -1) : messages;
      if (history.length === 0 || history[history.length - 1].role !== 'user') {
        throw new ServiceError('NOTHING_TO_REGENERATE', 'there is no answer to regenerate: the conversation does not end with a message of yours');
      }
      const { budget: counted, prompt, contextShift } = await this.deps.budget.prepare(conversationId, '', history);
      assertFits(counted, 'the conversation', this.deps.models.trainedContext);
      if (history !== messages) this.deps.store.leavePath(conversationId, last.id); // kept as a branch
      const assistantMessage = this.begin(answer, conversationId, prompt, contextShift, counted);
      return { assistantMessage: this.deps.store.getMessage(assistantMessage.id) };
    });
  }

  /**
   * Replaces a user message's text, drops every message after it, and answers again.
   * @throws ServiceError BUSY, CONTEXT_FULL, NOT_FOUND, INVALID_REQUEST (not a user message), MODEL_NOT_READY, SHUT_DOWN.
   */
  async edit(conversationId: string, messageId: string, content: string): Promise<{ userMessage: Message; assistantMessage: Message }> {
    return this.withClaim(conversationId, async (answer) => {
      const { store, budget } = this.deps;
      const messages = store.getConversation(conversationId).messages;
      const i = messages.findIndex((m) => m.id === messageId);
      if (i < 0) throw new ServiceError('NOT_FOUND', `no message with id ${messageId} in this conversation`);
      if (messages[i].role !== 'user') throw new ServiceError('INVALID_REQUEST', 'only your own messages can be edited');
      const before = messages.slice(0, i);
      // The edited message keeps the documents it carries.
      const documents = (messages[i].documents ?? []).map((d) => ({ id: d.id, fit: d.fit, name: d.name }));
      const { budget: counted, prompt, contextShift } = await budget.prepare(conversationId, content, before, documents);
      assertFits(counted, 'this message', this.deps.models.trainedContext);
      store.leavePath(conversationId, messageId); // the earlier version and its answers stay, as a branch
      const written = store.appendMessage(conversationId, { role: 'user', content, status: 'complete' });
      if (documents.length > 0) store.attachDocuments(written.id, documents);
      if (!before.some((m) => m.role === 'user')) store.setAutoTitle(conversationId, content, true);
      budget.clearDraft(conversationId);
      const assistantMessage = this.begin(answer, conversationId, prompt, contextShift, afterSend(counted));
      return { userMessage: store.getMessage(written.id), assistantMessage };
    });
  }

  /** Stops the answer being generated in this conversation, if any; resolves once it is stored. */
  async stop(conversationId: string): Promise<void> {
    const answer = this.slots.windowAnswer();
    if (!answer || answer.conversationId !== conversationId) return;
    answer.controller.abort();
    await answer.ended;
  }

  /**
   * The conversation with the streaming answer's text as far as the window has been sent it, and
   * answers the disk refused as they are in memory (with `notSaved`).
   */
  withStreamedText(stored: Conversation): Conversation {
    const conv = this.saves.overlay(stored);
    const answer = this.slots.windowAnswer();
    const streamed = answer?.deltas?.sent ?? '';
    const thought = answer?.deltas?.sentReasoning ?? '';
    if (!answer || answer.conversationId !== conv.id || !answer.messageId || !(streamed || thought)) return conv;
    const notSaved = answer.writer?.notSaved;
    // Each text is the longer of the stored one and the one sent (both only grow while streaming).
    const longer = (a: string, b: string) => (a.length >= b.length ? a : b);
    const fresh = (m: Message): Message => {
      const reasoning = longer(thought, m.reasoning ?? '');
      return { ...m, content: longer(streamed, m.content), ...(reasoning ? { reasoning } : {}), ...(notSaved ? { notSaved } : {}) };
    };
    return { ...conv, messages: conv.messages.map((m) => (m.id === answer.messageId ? fresh(m) : m)) };
  }

  /**
   * A raw generation outside any conversation (the OpenAI-compatible API), in the same queue as
   * the window's answers. Aborting `signal` while it waits takes it out of the queue (CANCELLED);
   * while it runs, ends it with done{reason:'cancelled'}.
   * @throws ServiceError QUEUE_FULL / CANCELLED / MODEL_NOT_READY / SHUT_DOWN on the first
   *   `next()`; the engine's InvalidOptionError / ContextOverflowError before any event.
   */
  async *completion(request: GenerationRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    const answer = await this.slots.claim(null);
    const stopAnswer = () => answer.controller.abort();
    signal?.addEventListener('abort', stopAnswer, { once: true });
    if (signal?.aborted) stopAnswer();
    try {
      await this.slots.takeTurn(answer);
      yield* this.deps.engine.generate(request, { signal: answer.controller.signal });
    } catch (e) {
      if (isCrash(e) && !this.disposed) void this.deps.models.recover();
      throw e;
    } finally {
      signal?.removeEventListener('abort', stopAnswer);
      this.slots.release(answer);
    }
  }

  /**
   * Stops any answer (waiting up to `timeoutMs` for it to be stored) and refuses new ones; answers
   * the disk refused get one last write (those still refused keep their note beside the database,
   * so the next start says why). Call before closing the store.
   */
  async dispose(timeoutMs = 3000): Promise<void> {
    await this.slots.close(timeoutMs);
    this.saves.dispose();
  }

  /** @throws ServiceError BUSY while this conversation's answer is generated or waits. */
  private assertIdle(conversationId: string, doing: string): void {
    if (this.slots.busyIn(conversationId)) {
      throw new ServiceError('BUSY', `an answer is being generated in this conversation; stop it before ${doing}`);
    }
  }

  /**
   * Runs a window request holding the claim; the claim passes to the stream (`begin`) or is
   * released on failure. @throws ServiceError NOT_SAVED when the disk refuses the new messages.
   */
  private async withClaim<T>(conversationId: string, work: (answer: ActiveAnswer) => Promise<T>): Promise<T> {
    const answer = await this.slots.claim(conversationId);
    try {
      const result = await work(answer);
      this.deps.emit('conversationsChanged', { conversations: this.deps.store.listConversations() });
      return result;
    } catch (e) {
      if (!answer.messageId) this.slots.release(answer);
      const fault = storageFault(e);
      if (fault) throw new ServiceError('NOT_SAVED', `your message could not be saved (${fault}); free some space or check the disk, then send it again`);
      throw e;
    }
  }

  /**
   * Stores the empty answer and starts streaming it; `prompt` (assembled with the budget) ends with
   * the user turn; `contextShift` is the shift for the policy the budget was counted under.
   */
  private begin(answer: ActiveAnswer, conversationId: string, prompt: AssembledPrompt, contextShift: GenerationRequest['contextShift'], budget: ContextBudget): Message {
    const message = this.deps.store.appendMessage(conversationId, { role: 'assistant', content: '', status: 'streaming' });
    answer.messageId = message.id;
    this.deps.emit('budgetChanged', budget);
    const request = this.generationRequest(conversationId, prompt, contextShift, this.deps.store.conversationThinking(conversationId));
    void this.stream(answer, message, request, budget, prompt);
    return message;
  }

  /**
   * What the engine is asked for: the assembled prompt (see BudgetService.prepare) under the
   * conversation's settings (the settings with its own sampler over them), and its Think toggle
   * (null: the template's default).
   */
  private generationRequest(conversationId: string, prompt: AssembledPrompt, contextShift: GenerationRequest['contextShift'], thinking: boolean | null): GenerationRequest {
    const s = this.deps.settings.forConversation(conversationId);
    return {
      messages: prompt.messages,
      ...(thinking !== null ? { enableThinking: thinking } : {}),
      maxTokens: s.maxTokens,
      // The policy mid-answer (the chat's own, else the setting's; resolved by BudgetService.prepare):
      // at the max context the engine shifts instead of stopping, keeping the system prompt (rolling
      // window) or the system prompt and the first exchange (truncate middle); 'stop' ends with context-full.
      contextShift,
      kvCacheBudgetBytes: s.kvCacheBudgetMiB * 2 ** 20,
      sampler: {
        temperature: s.temperature,
        topK: s.topK,
        topP: s.topP,
        minP: s.minP,
        repetitionPenalty: s.repetitionPenalty,
        ...(s.seed !== null ? { seed: s.seed } : {}),
      },
    };
  }

  /**
   * Streams one answer to events and SQLite, then stores and announces its final state. `base`:
   * the answer it continues (its text and tokens come first). Never rejects.
   */
  private async stream(answer: ActiveAnswer, message: Message, request: GenerationRequest, budget: ContextBudget, used: Pick<AssembledPrompt, 'documentParts' | 'documentRanges'>, base: Message | null = null): Promise<void> {
    const { emit } = this.deps;
    const conversationId = message.conversationId;
    const messageId = message.id;
    let generated = 0; // by this run (the budget's estimate adds these)
    const before = base?.stats?.generatedTokens ?? 0;
    const rate = new DecodeRate(this.scheduler.now);
    const deltas = new DeltaBatcher((text, reasoning) => {
      const tokensPerSec = rate.perSec();
      emit('answerDelta', { conversationId, messageId, text, ...(reasoning ? { reasoning } : {}), generatedTokens: before + generated, ...(tokensPerSec !== null ? { tokensPerSec } : {}) });
    }, DELTA_INTERVAL_MS, this.scheduler);
    if (base) deltas.resume(base.content, base.reasoning ?? '');
    answer.deltas = deltas;
    const writer = (answer.writer = this.saves.writer(conversationId, messageId));
    // The saver is asked on every budget tick, so "due" is half a tick early to keep the 1 s bound.
    // Both texts only grow, so their joined lengths' change is a change of either. A write the disk
    // refuses stays with the writer, which retries it (and any newer text) on its own.
    const saver = new PeriodicSaver(() => writer.save({ content: deltas.text, reasoning: deltas.reasoning }), PERSIST_INTERVAL_MS - BUDGET_INTERVAL_MS / 2, this.scheduler.now);
    let budgetReportedAt = 0; // begin() sent the budget with 0 generated tokens
    const ticker = every(this.scheduler, BUDGET_INTERVAL_MS, () => {
      saver.maybeSave(`${deltas.reasoning.length}:${deltas.text.length}`);
      if (generated === budgetReportedAt) return;
      budgetReportedAt = generated;
      emit('budgetChanged', this.deps.budget.estimate(budget, generated, Boolean(request.contextShift)));
    });

    let end: StreamEnd;
    try {
      // Announced on the next turn of the event loop, after the send's own reply has gone out.
      await this.slots.takeTurn(answer, (ahead) => setImmediate(() => emit('answerWaiting', { conversationId, messageId, ahead })));
      const done = await this.relay(answer, message, request, deltas, () => rate.tick(++generated));
      end = done ? { done: base ? joinContinuation(base, done) : done } : { failure: { message: 'the answer ended without a result', crashed: false } };
    } catch (e) {
      if (e instanceof ServiceError && e.code === 'CANCELLED') end = { stoppedWhileWaiting: true };
      else end = { failure: isCrash(e) ? { message: CRASH_MESSAGE, crashed: true } : { message: firstLine(e), crashed: false } };
    } finally {
      ticker.stop();
    }
    deltas.flush();
    const state = finalState(end, deltas.sent, deltas.sentReasoning);
    if (state.stats && used.documentParts) state.stats = { ...state.stats, documentParts: used.documentParts, ...(used.documentRanges ? { documentRanges: used.documentRanges } : {}) };
    // What wrote it, kept with it: an export stamps each answer with its own model and settings.
    if (state.stats && 'done' in end) state.stats = { ...state.stats, ...answerSetup(request, end.done.stats.maxContext, this.deps.models.state.info?.name ?? null) };
    const final = this.saves.saveFinal(writer, message, state);
    this.slots.release(answer);
    // Restart before anyone hears of the end, so a send right after waits for the fresh worker.
    if ('failure' in end && end.failure.crashed && !this.disposed) void this.deps.models.recover();
    emit('answerDone', { conversationId, message: final });
    if (!this.disposed) await this.recountBudget(conversationId);
  }

  /**
   * Relays the engine's events: prefill progress as events, token text into `deltas`.
   * @returns the done event (null if the stream ended without one). @throws the engine's error.
   */
  private async relay(answer: ActiveAnswer, message: Message, request: GenerationRequest, deltas: DeltaBatcher, countToken: () => void): Promise<DoneEvent | null> {
    for await (const ev of this.deps.engine.generate(request, { signal: answer.controller.signal })) {
      if (ev.type === 'prefill') {
        this.deps.emit('answerPrefill', { conversationId: message.conversationId, messageId: message.id, processed: ev.processed, total: ev.total });
      } else if (ev.type === 'token') {
        if (ev.id >= 0) countToken();
        deltas.push(ev.text, ev.part);
      } else {
        return ev;
      }
    }
    return null;
  }

  /** The exact count now that the answer is part of the history. */
  private async recountBudget(conversationId: string): Promise<void> {
    const { budget, store, emit } = this.deps;
    try {
      const draft = budget.lastDraft(conversationId);
      if (store.hasConversation(conversationId)) emit('budgetChanged', await budget.compute(conversationId, draft.content, undefined, draft.documents));
    } catch {
      // No model (a crash that could not recover); the model state reports it.
    }
  }
}

function isCrash(e: unknown): boolean {
  return e instanceof WorkerCrashedError;
}

/** The budget right after a send: the message is now history, the composer is empty. */
function afterSend(b: ContextBudget): ContextBudget {
  // The draft's documents stay in `documents`: they are in the history's last turn now.
  return { ...b, history: b.history + b.draft, draft: 0 };
}

/**
 * @param trainedContext the loaded model's trained context (positions), undefined when unknown: a
 *   larger max context is suggested only below it (context-full.ts `raiseUpToTrained`).
 * @throws ServiceError CONTEXT_FULL with the numbers and what to do when the budget does not fit.
 */
function assertFits(b: ContextBudget, what: string, trainedContext: number | undefined): void {
  if (b.fits) return;
  const raise = raiseUpToTrained(b.maxContext, trainedContext, WINDOW_CONTEXT_REMEDIES);
  const todo =
    raise === null
      ? `shorten it, lower Max new tokens, or start a new conversation (${trainedContextReached(b.maxContext, trainedContext as number)})`
      : `shorten it, lower Max new tokens, ${raise}, or start a new conversation`;
  const parts = [b.system ? `the system prompt (${b.system})` : '', b.documents ? `the documents (${b.documents})` : '', b.history ? `the history (${b.history})` : '', b.draft ? `this message (${b.draft})` : ''].filter(Boolean);
  throw new ServiceError(
    'CONTEXT_FULL',
    `${what} does not fit: ${parts.join(' + ') || 'the prompt'} = ${b.used} tokens, plus ${b.reserve} reserved for the answer, makes ${b.total}, over the max context of ${b.maxContext}; ${todo}`,
  );
}
