/**
 * The parts an answer's stream is made of, each small enough to test alone:
 * - `DeltaBatcher`: token text (answer or reasoning) in, `answerDelta` events out, at most one per `intervalMs`
 *   (a window repaints per frame; one event per token costs more than it shows);
 * - `DecodeRate`: the live tokens/s from the tokens' arrival times;
 * - `PeriodicSaver`: writes the growing text to SQLite when it changed and the last write is old
 *   enough, so a killed process loses at most about a second of an answer;
 * - `finalState`: how the stream ended (the engine's `done`, or a failure) → the stored message's
 *   content, reasoning, status, stats and error.
 * Times are ms from an injected clock (`performance.now()` by default); the batcher's timer comes
 * from an injected scheduler (Node's timers by default), so tests drive both without waiting.
 */
import { performance } from 'node:perf_hooks';
import type { AnswerStats, Message } from '../contract/types.ts';
import type { ReplyPart } from '../engine/generate/reasoning.ts';
import type { GenerationEvent, GenerationRequest, GenerationStats } from '../engine/generate/types.ts';

export type Clock = () => number;
const monotonic: Clock = () => performance.now();

/** A clock and a one-shot timer: what the batcher needs of time (ms). */
export interface Scheduler {
  now: Clock;
  /** Runs `callback` once after `delayMs`; returns a handle for `cancel`. */
  after(delayMs: number, callback: () => void): unknown;
  cancel(handle: unknown): void;
}

/** Node's timers on `performance.now()`. */
export const realScheduler: Scheduler = {
  now: monotonic,
  after: (delayMs, callback) => setTimeout(callback, delayMs),
  cancel: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Runs `tick` every `intervalMs` on `scheduler` (re-armed after each run, so a slow tick delays
 * the next rather than piling up) until `stop()`. The answer's budget and save ticker.
 */
export function every(scheduler: Scheduler, intervalMs: number, tick: () => void): { stop(): void } {
  let handle: unknown = null;
  let stopped = false;
  const arm = (): void => {
    handle = scheduler.after(intervalMs, () => {
      if (stopped) return;
      tick();
      arm();
    });
  };
  arm();
  return {
    stop() {
      stopped = true;
      if (handle !== null) scheduler.cancel(handle);
    },
  };
}

/**
 * Batches token text into deltas spaced at least `intervalMs` apart, the answer's and the
 * reasoning's apart; `sent` + pending = all answer text pushed (`sentReasoning` likewise).
 */
export class DeltaBatcher {
  private sentText = '';
  private pending = '';
  private sentThought = '';
  private pendingThought = '';
  private lastSend = -Infinity;
  private timer: unknown = null;

  constructor(
    /** Gets the answer's and the reasoning's new text (either may be ''). */
    private readonly send: (delta: string, reasoning: string) => void,
    private readonly intervalMs: number,
    private readonly scheduler: Scheduler = realScheduler,
  ) {}

  /** Text already sent in deltas. */
  get sent(): string {
    return this.sentText;
  }

  /** All answer text pushed so far (sent and waiting). */
  get text(): string {
    return this.sentText + this.pending;
  }

  /** Reasoning text already sent in deltas. */
  get sentReasoning(): string {
    return this.sentThought;
  }

  /** All reasoning text pushed so far (sent and waiting). */
  get reasoning(): string {
    return this.sentThought + this.pendingThought;
  }

  /**
   * Text the answer had before this stream (Continue): counted as sent, so `sent` and `text` are
   * the whole answer's while only the new text goes out in deltas. Call before any `push`.
   */
  resume(text: string, reasoning: string): void {
    this.sentText = text;
    this.sentThought = reasoning;
  }

  /** Adds text of `part`; it goes out at once if the last delta is `intervalMs` old, else when it is. */
  push(text: string, part: ReplyPart = 'content'): void {
    if (!text) return;
    if (part === 'reasoning') this.pendingThought += text;
    else this.pending += text;
    if (this.timer !== null) return;
    const delay = Math.max(0, this.lastSend + this.intervalMs - this.scheduler.now());
    this.timer = this.scheduler.after(delay, () => this.flush());
  }

  /** Sends whatever waits now (the end of the answer). */
  flush(): void {
    if (this.timer !== null) this.scheduler.cancel(this.timer);
    this.timer = null;
    if (!this.pending && !this.pendingThought) return;
    const [delta, thought] = [this.pending, this.pendingThought];
    this.sentText += delta;
    this.sentThought += thought;
    this.pending = this.pendingThought = '';
    this.lastSend = this.scheduler.now();
    this.send(delta, thought);
  }
}

/**
 * Decode speed while an answer streams, from the times its tokens arrived:
 *   tokens/s = (n − 1) × 1000 / (t_n − t_1)   (ms; n tokens so far, t_1 the first one's time)
 * the engine's own `decodeTokensPerSec` definition (engine.ts `done`: the first token ends the
 * prefill, so the decode steps are the n − 1 after it), so the live figure ends near the final one.
 */
export class DecodeRate {
  private firstAt: number | null = null;
  private lastAt = 0;
  private tokens = 0;

  constructor(private readonly now: Clock = monotonic) {}

  /** The `n`-th token of this stream arrived (n counts from 1). */
  tick(n: number): void {
    const t = this.now();
    if (this.firstAt === null) this.firstAt = t;
    this.lastAt = t;
    this.tokens = n;
  }

  /** Tokens/s so far, one decimal; null before two tokens (nothing measured yet). */
  perSec(): number | null {
    const ms = this.firstAt === null ? 0 : this.lastAt - this.firstAt;
    if (this.tokens < 2 || ms <= 0) return null;
    return Math.round(((this.tokens - 1) * 10_000) / ms) / 10;
  }
}

/** Writes text through `write` when it changed and the last write is at least `intervalMs` old. */
export class PeriodicSaver {
  private saved = '';
  private lastSave: number;

  constructor(
    private readonly write: (text: string) => void,
    private readonly intervalMs: number,
    private readonly now: Clock = monotonic,
  ) {
    this.lastSave = now();
  }

  /** Saves `text` if it is due. A failed write (disk full) is retried on the next call. */
  maybeSave(text: string): void {
    if (this.now() - this.lastSave < this.intervalMs || text === this.saved) return;
    try {
      this.write(text);
      this.saved = text;
      this.lastSave = this.now();
    } catch {
      // Retried on the next call; the final state is written (and reported) at the end anyway.
    }
  }
}

export type DoneEvent = Extract<GenerationEvent, { type: 'done' }>;

/**
 * How a stream ended: the engine's done event, a thrown failure (crashed: the worker died), or a
 * Stop while it waited for the engine (nothing generated).
 */
export type StreamEnd = { done: DoneEvent } | { failure: { message: string; crashed: boolean } } | { stoppedWhileWaiting: true };

/**
 * The stored state of an answer that has ended. The text (answer and reasoning each) is the
 * engine's final text, or what was streamed when that is longer (a failure after some deltas
 * keeps them).
 */
export function finalState(end: StreamEnd, streamed: string, streamedReasoning = ''): Pick<Message, 'content' | 'reasoning' | 'status' | 'stats' | 'error'> {
  // No reasoning: no field, as the store reads such a message back.
  const thought = (r: string) => (r ? { reasoning: r } : {});
  if ('failure' in end) return { content: streamed, ...thought(streamedReasoning), status: 'error', stats: null, error: end.failure.message };
  if ('stoppedWhileWaiting' in end) return { content: streamed, ...thought(streamedReasoning), status: 'cancelled', stats: null, error: null };
  const { done } = end;
  const content = done.text.length >= streamed.length ? done.text : streamed;
  const reasoning = thought(done.reasoning.length >= streamedReasoning.length ? done.reasoning : streamedReasoning);
  const stats = toAnswerStats(done.reason, done.stats);
  if (done.reason === 'error') return { content, ...reasoning, status: 'error', stats, error: done.error?.message ?? 'the answer failed' };
  return { content, ...reasoning, status: done.reason === 'cancelled' ? 'cancelled' : 'complete', stats, error: null };
}

/**
 * What an answer was written with, for its stats: the model's name and the request's settings
 * (the sampler and max new tokens as sent, so a chat's own settings are what is kept) at the
 * engine's max context.
 */
export function answerSetup(request: Pick<GenerationRequest, 'maxTokens' | 'sampler'>, maxContext: number, model: string | null): Pick<AnswerStats, 'model' | 'settings'> {
  const { temperature, topK, topP, minP, repetitionPenalty, seed } = request.sampler;
  return {
    ...(model ? { model } : {}),
    settings: { maxContext, maxTokens: request.maxTokens, temperature, topK, topP, minP, repetitionPenalty, seed: seed ?? null },
  };
}

/** The per-answer stats the window shows, from the engine's GenerationStats. */
export function toAnswerStats(reason: AnswerStats['finishReason'], s: GenerationStats): AnswerStats {
  return {
    finishReason: reason,
    promptTokens: s.promptTokens,
    generatedTokens: s.generatedTokens,
    ...(s.reasoningTokens > 0 ? { reasoningTokens: s.reasoningTokens, reasoningMs: s.reasoningMs } : {}),
    reusedTokens: s.reusedTokens,
    ttftMs: s.ttftMs,
    prefillTokensPerSec: s.prefillTokensPerSec,
    decodeTokensPerSec: s.decodeTokensPerSec,
    ...(s.executionProvider !== 'remote' ? { executionProvider: s.executionProvider, nodesOnCpu: s.nodesOnCpu } : {}),
    ...(s.contextShifts > 0 ? { contextShift: { shifts: s.contextShifts, droppedTokens: s.droppedTokens } } : {}),
  };
}
