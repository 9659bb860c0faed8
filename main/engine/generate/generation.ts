/**
 * One generation's own state, apart from the model's: the sampler, the end-of-sequence ids, the
 * stop strings, the text streamed so far, the finish reason and the clock readings that become
 * the stats. The engine's loop hands each sampled token to `accept` and asks `finished`; this
 * class never touches the backend or the caches.
 */
import { performance } from 'node:perf_hooks';
import { toEngineError } from '../errors.ts';
import { Sampler } from '../sampling/sampler.ts';
import { StreamDecoder } from '../tokenizer/stream-decoder.ts';
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';
import type { FinishReason, GenerationRequest } from './types.ts';

/** Per-request state of `Engine.generate`. */
export class Generation {
  readonly prompt: number[];
  readonly sampler: Sampler;
  /** Generated token ids (EOS and anything after a stop string excluded). */
  readonly tokens: number[] = [];
  text = '';
  /** Set once the generation ended; 'length' until then is only the default. */
  reason: FinishReason | null = null;
  error: { code: string; message: string } | undefined;
  /** Prompt tokens served from the KV cache (prefix reuse). */
  reusedTokens = 0;
  /** Clock readings, ms (performance.now()). */
  readonly startedAt = performance.now();
  ttftMs = 0;
  prefillMs = 0;
  decodeStartedAt = 0;
  private readonly maxTokens: number;
  private readonly eos: Set<number>;
  private readonly stops: string[];
  private readonly maxStopLength: number;
  private readonly decoder: StreamDecoder;

  /** `req` has been validated; `prompt` is its token ids. */
  constructor(req: GenerationRequest, prompt: number[], sampler: Sampler, tokenizer: TextTokenizer) {
    this.prompt = prompt;
    this.sampler = sampler;
    this.maxTokens = req.maxTokens;
    this.eos = new Set(req.ignoreEos ? [] : tokenizer.eos);
    this.stops = (req.stop ?? []).filter((s) => s.length > 0);
    this.maxStopLength = Math.max(0, ...this.stops.map((s) => s.length));
    this.decoder = new StreamDecoder(tokenizer, prompt);
  }

  get finished(): boolean {
    return this.reason !== null;
  }

  /** Ends the generation with `reason` (the first reason set wins). */
  finish(reason: FinishReason): void {
    this.reason ??= reason;
  }

  /** Ends with reason 'error', keeping the failure as `{ code, message }`. */
  fail(e: unknown): void {
    const err = toEngineError(e);
    this.reason = 'error';
    this.error = { code: err.code, message: err.message };
  }

  /**
   * Takes one sampled token. EOS ends with 'stop' and emits nothing (null). Otherwise the token
   * joins the answer and its new text is returned ('' while UTF-8 is incomplete); a stop string
   * in the text cuts it there and ends with 'stop' (null when nothing is left to emit before it);
   * reaching maxTokens ends with 'length'.
   */
  accept(token: number): string | null {
    if (this.eos.has(token)) {
      this.finish('stop');
      return null;
    }
    this.tokens.push(token);
    if (this.tokens.length === 1) this.ttftMs = performance.now() - this.startedAt;
    const delta = this.decoder.push(token);
    const full = this.text + delta;
    const hit = this.stops.length ? findStop(full, this.stops, this.text.length - this.maxStopLength) : -1;
    if (hit >= 0) {
      const cut = full.slice(this.text.length, hit);
      this.text = full.slice(0, hit);
      this.finish('stop');
      return cut || null;
    }
    this.text = full;
    if (this.tokens.length >= this.maxTokens) this.finish('length');
    return delta;
  }

  /** Text the stream decoder still holds, appended to the answer ('' after a stop string). */
  flush(): string {
    if (this.reason === 'stop' && this.stops.length > 0) return '';
    const tail = this.decoder.flush();
    this.text += tail;
    return tail;
  }
}

/** Index in `text` where the earliest stop string starts (searching from `from`), or −1. */
function findStop(text: string, stops: string[], from: number): number {
  let best = -1;
  for (const s of stops) {
    const i = text.indexOf(s, Math.max(0, from));
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return best;
}
