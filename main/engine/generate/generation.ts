/**
 * One generation's own state, apart from the model's: the sampler, the end-of-sequence ids, the
 * stop strings, the reasoning splitter, the text streamed so far, the finish reason and the clock
 * readings that become the stats. Text flows token → stream decoder → stop strings → reasoning
 * splitter (reasoning.ts), so a stop string applies to the whole reply. The engine's loop hands each sampled token to `accept` and asks `finished`; this
 * class never touches the backend or the caches.
 */
import { performance } from 'node:perf_hooks';
import { InvalidOptionError, toEngineError } from '../errors.ts';
import { JsonConstraint, type TokenConstraint } from '../sampling/json-constraint.ts';
import { compileSchema, JSON_OBJECT } from '../sampling/json-schema.ts';
import { validateTopLogprobs, type TokenLogprob } from '../sampling/logprobs.ts';
import { Sampler } from '../sampling/sampler.ts';
import { ToolCallConstraint } from '../sampling/tool-constraint.ts';
import { StreamDecoder } from '../tokenizer/stream-decoder.ts';
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';
import type { ContextShifter } from './context-shift.ts';
import { ReasoningSplitter, type PartDelta, type ReasoningMarkers } from './reasoning.ts';
import { StopStrings } from './stop-strings.ts';
import type { FinishReason, GenerationRequest, ResponseFormat } from './types.ts';

/** Per-request state of `Engine.generate`. */
export class Generation {
  readonly prompt: number[];
  readonly sampler: Sampler;
  /** Generated token ids (EOS and anything after a stop string excluded). */
  readonly tokens: number[] = [];
  /** Alternatives per token when the request asked for log-probabilities (else null), and what was reported per token. */
  readonly topLogprobs: number | null;
  readonly logprobs: TokenLogprob[] = [];
  /** Set once the generation ended; 'length' until then is only the default. */
  reason: FinishReason | null = null;
  error: { code: string; message: string } | undefined;
  /** Prompt tokens served from the KV cache (prefix reuse). */
  reusedTokens = 0;
  /** Prompt tokens actually run through prefill (after a cancel, fewer than prompt − reused). */
  prefilledTokens = 0;
  /** Clock readings, ms (performance.now()). */
  readonly startedAt = performance.now();
  ttftMs = 0;
  prefillMs = 0;
  decodeStartedAt = 0;
  /** Generated tokens inside the reasoning block, closing marker included. */
  reasoningTokens = 0;
  /** When the last of those was accepted, ms (performance.now()); 0: none. */
  reasoningEndedAt = 0;
  private readonly maxTokens: number;
  private readonly parts: ReasoningSplitter;
  private readonly eos: Set<number>;
  private readonly stops: StopStrings;
  private readonly decoder: StreamDecoder;
  /** The response_format's grammar, or null (then no mask is computed or applied). */
  readonly constraint: TokenConstraint | null;

  /**
   * `req` has been validated; `prompt` is its token ids; `shifter` plans the context shifts when
   * the request allows them (else null: out of room ends with 'context-full'); `reasoning`: the
   * model's markers and whether the prompt opened the block (null: the reply is all content).
   */
  constructor(
    req: GenerationRequest,
    prompt: number[],
    sampler: Sampler,
    tokenizer: TextTokenizer,
    readonly shifter: ContextShifter | null = null,
    reasoning: { markers: ReasoningMarkers; openInPrompt: boolean; midway?: boolean } | null = null,
  ) {
    this.prompt = prompt;
    this.sampler = sampler;
    this.maxTokens = req.maxTokens;
    this.topLogprobs = req.logprobs === undefined ? null : validateTopLogprobs(req.logprobs);
    if (req.responseFormat && req.stop?.length) throw new InvalidOptionError('stop', 'stop strings cannot be combined with responseFormat: a stop string would cut the JSON short');
    this.constraint = req.responseFormat ? constraintFor(req.responseFormat, tokenizer) : null;
    this.eos = new Set(req.ignoreEos && !this.constraint ? [] : tokenizer.eos);
    this.stops = new StopStrings(req.stop);
    // With tools in play, special tokens' text stays in the reply: Mistral's `[TOOL_CALLS]` and
    // `[ARGS]`, Llama's `<|python_tag|>` are how its calls are read (tool-format.ts); so it does
    // where the reasoning markers are special tokens (harmony's channels, reasoning.ts).
    this.decoder = new StreamDecoder(tokenizer, prompt, { keepSpecial: (req.tools?.length ?? 0) > 0 || reasoning?.markers.special === true });
    this.parts = new ReasoningSplitter(reasoning?.markers ?? null, reasoning?.openInPrompt ?? false, reasoning?.midway ?? false);
  }

  /** The answer's text so far: every emitted content delta, joined (never taken back). */
  get text(): string {
    return this.parts.content;
  }

  /** The reasoning so far: every emitted reasoning delta, joined. */
  get reasoning(): string {
    return this.parts.reasoning;
  }

  /** The part the reply is in now (the part of a token whose text is all held back). */
  get part(): PartDelta['part'] {
    return this.parts.part;
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
   * joins the reply and the text that is safe to show is returned, split into its parts ([] while
   * UTF-8 is incomplete or the text could still start a stop string or a marker); a completed
   * stop string ends with 'stop' (the text stops where it starts); reaching maxTokens ends with
   * 'length'; a constrained value that is whole ends with 'stop' too. A token read while the
   * reasoning block is open, or that closes it, counts as a reasoning token.
   * @throws EngineError('SESSION_RUN') for a token the constraint does not allow.
   */
  accept(token: number, logprob?: TokenLogprob): PartDelta[] | null {
    if (this.eos.has(token)) {
      this.finish('stop');
      return null;
    }
    this.constraint?.accept(token);
    this.tokens.push(token);
    if (logprob) this.logprobs.push(logprob);
    if (this.tokens.length === 1) this.ttftMs = performance.now() - this.startedAt;
    const step = this.stops.push(this.decoder.push(token));
    const wasClosed = this.parts.closed;
    const deltas = this.parts.push(step.text);
    if (!wasClosed && this.parts.reasoned) {
      this.reasoningTokens = this.tokens.length;
      this.reasoningEndedAt = performance.now();
    }
    if (step.stopped || this.constraint?.mustEnd || this.parts.answerEnded) this.finish('stop');
    else if (this.tokens.length >= this.maxTokens) this.finish('length');
    return deltas;
  }

  /**
   * The end of the stream: the text the stream decoder and the stop strings still hold ('' after
   * a stop string). A stop string completed by it ends the generation with 'stop' after all.
   */
  flush(): PartDelta[] {
    const text = this.stops.stopped ? '' : this.flushStops();
    return [...this.parts.push(text), ...this.parts.flush()];
  }

  private flushStops(): string {
    const step = this.stops.push(this.decoder.flush());
    if (step.stopped) this.reason = 'stop';
    return step.text + this.stops.flush();
  }
}

/**
 * The constraint of a request's response_format.
 * @throws UnsupportedSchemaError (InvalidOptionError) for a schema keyword not covered.
 */
export function constraintFor(format: ResponseFormat, tokenizer: TextTokenizer): TokenConstraint {
  if (format.type === 'tool_call') {
    const tools = format.tools.map((t) => ({ name: t.name, node: compileSchema(t.parameters) }));
    return new ToolCallConstraint(tools, { text: format.separator, id: tokenizer.tokenId(format.separator) ?? null }, tokenizer.tokenBytes(), tokenizer.eos);
  }
  const node = format.type === 'json_object' ? JSON_OBJECT : compileSchema(format.schema);
  return new JsonConstraint(node, tokenizer.tokenBytes(), tokenizer.eos);
}
