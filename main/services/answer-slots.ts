/**
 * The answers in flight, and the engine's turn: every answer (a window's, or an API completion)
 * is `claim`ed first — refused while shutting down, a second window answer refused with BUSY,
 * the claim kept only once a model is loaded — then waits its turn in the engine's FIFO queue
 * (`takeTurn`), and is `release`d when it has ended (the engine passes to the next; `ended`
 * settles). Live handles (AbortControllers, the queue's release) stay here, out of any state
 * that is sent anywhere. Errors: ServiceError SHUT_DOWN, BUSY, MODEL_NOT_READY (claim);
 * CANCELLED, QUEUE_FULL (takeTurn).
 */
import type { RetryingWriter } from './answer-save.ts';
import type { DeltaBatcher } from './answer-stream.ts';
import { EngineQueue } from './engine-queue.ts';
import { ServiceError } from './errors.ts';
import type { ModelService } from './model-service.ts';

/** An answer generated or waiting for the engine: whose, how to stop it, and when it has ended. */
export interface ActiveAnswer {
  /** The conversation it answers; null for an API completion. */
  conversationId: string | null;
  /** The stored assistant message once it exists; until then a failure releases the claim. */
  messageId: string | null;
  controller: AbortController;
  /** Settles when the answer has ended and its final state is stored. */
  ended: Promise<void>;
  end: () => void;
  /** Hands the engine to the next in the queue, once this answer has its turn. */
  releaseTurn: (() => void) | null;
  /** The answer's deltas (what a window that reloads must start from). */
  deltas: DeltaBatcher | null;
  /** Writes the answer to the store, retrying when the disk refuses. */
  writer: RetryingWriter | null;
}

/** The claims on the one engine: who holds or waits for it. */
export class AnswerSlots {
  private readonly answers = new Set<ActiveAnswer>();
  /** Set by `close`: no claim is taken after it. */
  private closed = false;

  constructor(
    private readonly models: Pick<ModelService, 'ready' | 'assertLoaded'>,
    private readonly queue: EngineQueue = new EngineQueue(),
  ) {}

  /** Answers in flight (generated or waiting). */
  get size(): number {
    return this.answers.size;
  }

  /** How many answers wait for the engine (window and API). */
  get waiting(): number {
    return this.queue.waiting;
  }

  /** Whether no more claims are taken (shutting down). */
  get isClosed(): boolean {
    return this.closed;
  }

  /** The window's answer (at most one), generated or waiting. */
  windowAnswer(): ActiveAnswer | null {
    for (const answer of this.answers) if (answer.conversationId !== null) return answer;
    return null;
  }

  /** Whether an answer of this conversation is in flight. */
  busyIn(conversationId: string): boolean {
    return [...this.answers].some((a) => a.conversationId === conversationId);
  }

  /**
   * The one way an answer starts: refuses when shutting down (and a second window answer), then
   * waits for any model load and checks a model is loaded (releasing the claim if not). The
   * engine itself is taken later, in turn (`takeTurn`).
   * @throws ServiceError SHUT_DOWN, BUSY, MODEL_NOT_READY.
   */
  async claim(conversationId: string | null): Promise<ActiveAnswer> {
    if (this.closed) throw new ServiceError('SHUT_DOWN', 'the app is shutting down');
    if (conversationId !== null && this.windowAnswer()) throw new ServiceError('BUSY', 'an answer is already being generated; wait for it to finish or stop it');
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const answer: ActiveAnswer = { conversationId, messageId: null, controller: new AbortController(), ended, end, releaseTurn: null, deltas: null, writer: null };
    this.answers.add(answer);
    try {
      await this.models.ready();
      this.models.assertLoaded();
      return answer;
    } catch (e) {
      this.release(answer);
      throw e;
    }
  }

  /**
   * Waits in the engine's queue until this answer's turn (`onWait(ahead)` if it must wait).
   * @throws ServiceError CANCELLED (stopped while waiting), QUEUE_FULL.
   */
  async takeTurn(answer: ActiveAnswer, onWait?: (ahead: number) => void): Promise<void> {
    answer.releaseTurn = await this.queue.acquire(answer.controller.signal, onWait);
    // A model load may have started while this answer waited.
    await this.models.ready();
    this.models.assertLoaded();
  }

  /** Ends an answer: the engine passes to the next in the queue, and `stop()` callers waiting on it resume. */
  release(answer: ActiveAnswer): void {
    this.answers.delete(answer);
    answer.releaseTurn?.();
    answer.end();
  }

  /** Takes no more claims, stops every answer, and waits up to `timeoutMs` for them to end. */
  async close(timeoutMs: number): Promise<void> {
    this.closed = true;
    if (this.answers.size === 0) return;
    for (const answer of this.answers) answer.controller.abort();
    await Promise.race([Promise.all([...this.answers].map((a) => a.ended)), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
  }
}
