/**
 * Per-frame batching of streamed answer text. `push` appends a delta to a plain (non-reactive)
 * buffer and asks the scheduler for one frame; when the frame runs, everything buffered since the
 * last commit is handed to `commit` in one call, so the store changes at most once per frame no
 * matter how many deltas arrived. The scheduler is injected (requestAnimationFrame in the window,
 * a manual fake in tests), so this module touches no DOM. A reasoning model's thinking streams
 * beside the answer (`reasoning`), batched the same way and appended to its own field (`withChunk`).
 */
import type { Message } from '../../main/contract/types.ts';

/** Something that runs a callback at the next frame, and can cancel it. */
export interface FrameScheduler {
  request(callback: () => void): unknown;
  cancel(handle: unknown): void;
}

/** What accumulated for one message since the last commit. */
export interface StreamChunk {
  conversationId: string;
  /** Answer text to append, in arrival order. */
  text: string;
  /** Reasoning text to append, in arrival order ('' when none). */
  reasoning: string;
  /** The latest generated-token count reported for the message. */
  generatedTokens: number;
  /** The latest decode speed reported (tokens/s); absent before two tokens. */
  tokensPerSec?: number;
}

export type CommitFn = (chunks: ReadonlyMap<string, StreamChunk>) => void;

export class StreamBuffer {
  private pending = new Map<string, StreamChunk>();
  private handle: unknown = null;
  private scheduled = false;

  constructor(
    private readonly scheduler: FrameScheduler,
    private readonly commit: CommitFn,
  ) {}

  /** Buffers a delta of a message (answer text, and reasoning text); schedules one commit if none is scheduled. */
  push(conversationId: string, messageId: string, text: string, generatedTokens: number, reasoning = '', tokensPerSec?: number): void {
    const chunk = this.pending.get(messageId);
    const rate = tokensPerSec !== undefined ? { tokensPerSec } : {};
    if (chunk) mergeChunk(chunk, { text, reasoning, generatedTokens, ...rate });
    else this.pending.set(messageId, { conversationId, text, reasoning, generatedTokens, ...rate });
    if (!this.scheduled) {
      this.scheduled = true;
      this.handle = this.scheduler.request(() => this.runFrame());
    }
  }

  /** Commits whatever is buffered now (nothing if empty) and cancels the scheduled frame. */
  flush(): void {
    this.cancelFrame();
    this.runFrame();
  }

  /** Drops what is buffered for one message (its final text arrived another way). */
  discard(messageId: string): void {
    this.pending.delete(messageId);
    if (this.pending.size === 0) this.cancelFrame();
  }

  /** Drops everything and cancels the frame. */
  clear(): void {
    this.pending.clear();
    this.cancelFrame();
  }

  /** Messages with buffered text not yet committed. */
  get size(): number {
    return this.pending.size;
  }

  private runFrame(): void {
    this.scheduled = false;
    this.handle = null;
    if (this.pending.size === 0) return;
    const chunks = this.pending;
    this.pending = new Map();
    this.commit(chunks);
  }

  private cancelFrame(): void {
    if (this.scheduled) this.scheduler.cancel(this.handle);
    this.scheduled = false;
    this.handle = null;
  }
}

/** Appends `next` to `into` (texts in order; the larger token count, since counts only grow; the latest rate). */
export function mergeChunk(into: StreamChunk, next: Pick<StreamChunk, 'text' | 'reasoning' | 'generatedTokens' | 'tokensPerSec'>): void {
  into.text += next.text;
  into.reasoning += next.reasoning;
  into.generatedTokens = Math.max(into.generatedTokens, next.generatedTokens);
  if (next.tokensPerSec !== undefined) into.tokensPerSec = next.tokensPerSec;
}

/** `m` with a chunk's text appended: the answer to `content`, the reasoning to `reasoning`. */
export function withChunk(m: Message, chunk: Pick<StreamChunk, 'text' | 'reasoning'>): Message {
  return { ...m, content: m.content + chunk.text, ...(chunk.reasoning ? { reasoning: (m.reasoning ?? '') + chunk.reasoning } : {}) };
}

/** The window's scheduler: one requestAnimationFrame per commit. */
export function animationFrameScheduler(win: {
  requestAnimationFrame(cb: () => void): number;
  cancelAnimationFrame(handle: number): void;
}): FrameScheduler {
  return {
    request: (cb) => win.requestAnimationFrame(() => cb()),
    cancel: (handle) => win.cancelAnimationFrame(handle as number),
  };
}
