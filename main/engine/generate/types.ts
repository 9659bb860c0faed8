/**
 * What a generation is asked for and what it streams back. Plain data only: these types cross
 * the worker boundary and IPC as they are (structured clone / JSON).
 */
import type { BackendKind, ExecutionProvider } from '../model/backend.ts';
import type { TokenLogprob } from '../sampling/logprobs.ts';
import type { SamplerOptions } from '../sampling/sampler.ts';
import type { ReplyPart } from './reasoning.ts';

export type { TokenLogprob };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** The answer (for an assistant message, without its reasoning). */
  content: string;
  /**
   * An assistant message's reasoning, kept apart. It reaches the chat template as
   * `reasoning_content` only when the template reads that variable (Qwen3's, which itself drops
   * it from earlier turns); other templates get the content alone.
   */
  reasoning?: string;
  /** An assistant turn's tool calls (OpenAI's), rendered by the chat template. */
  toolCalls?: ToolCall[];
  /** A tool turn: the call it answers. */
  toolCallId?: string;
}

/** A fragment of a streamed tool call (OpenAI's `delta.tool_calls[i]`). */
export interface ToolCallDelta {
  index: number;
  id?: string;
  name?: string;
  arguments?: string;
}

/** One function call: its id, name, and arguments as JSON text. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * Constrained output (OpenAI's `response_format`): any JSON object, or a value matching a JSON
 * Schema (what is covered: main/engine/sampling/json-schema.ts).
 */
export type ResponseFormat =
  | { type: 'json_object' }
  | { type: 'json_schema'; schema: unknown }
  /**
   * One tool call written `name<separator>{arguments}` (Mistral's `[TOOL_CALLS]name[ARGS]{…}`):
   * a name of `tools`, the separator, then arguments matching that tool's parameters schema
   * (sampling/tool-constraint.ts).
   */
  | { type: 'tool_call'; tools: { name: string; parameters: unknown }[]; separator: string };

/** OpenAI's `reasoning_effort` values that gpt-oss's template takes. */
export type ReasoningEffort = 'low' | 'medium' | 'high';

export interface GenerationRequest {
  /** Raw completion prompt (used as is). Exactly one of `prompt` and `messages`. */
  prompt?: string;
  /** Chat messages, rendered with the model's chat template (or as plain text without one). */
  messages?: ChatMessage[];
  /** Upper bound on generated tokens (≥ 1). */
  maxTokens: number;
  sampler: SamplerOptions;
  /** Generation ends when the text ends with one of these (the stop string is not emitted). */
  stop?: string[];
  /**
   * Whether a reasoning model should think first: passed to the chat template as
   * `enable_thinking` when the template reads it (Qwen3); absent: the template's default.
   */
  enableThinking?: boolean;
  /** How hard a reasoning model should think: `reasoning_effort` for a template that reads it (gpt-oss's harmony: "Reasoning: low" in its system message); absent: the template's default. */
  reasoningEffort?: ReasoningEffort;
  /** Keep generating past the end-of-sequence token (not with `responseFormat`: a whole value ends it). */
  ignoreEos?: boolean;
  /** Decode only tokens that keep the output a JSON value of this format; it ends once the value is whole. */
  responseFormat?: ResponseFormat;
  /** OpenAI tool definitions (`{ type: 'function', function: { name, description, parameters } }`), given to the chat template as `tools`. */
  tools?: unknown[];
  /**
   * OpenAI's `tool_choice` and `parallel_tool_calls`, for a remote engine to relay (its server
   * constrains the call); the local engine takes tools through the template and a forced call
   * through `replyPrefix` and `responseFormat` instead, and ignores these.
   */
  toolChoice?: 'auto' | 'none' | 'required' | { name: string };
  parallelToolCalls?: boolean;
  /** Text that opens the reply, fed as prompt after the template's generation prompt (e.g. `<tool_call>\n` to force a call); not part of the output. */
  replyPrefix?: string;
  /**
   * Reasoning the reply already opened with (Continue of a reasoning model's answer): written
   * inside the model's markers before `replyPrefix` (`<think>\n…\n</think>\n\n`, as Qwen3
   * writes it); with no `replyPrefix` the block is left open and the reply goes on reasoning.
   * Ignored for a model without markers. Not part of the output.
   */
  replyReasoning?: string;
  /**
   * Report each generated token's log-probability and this many most likely alternatives
   * (0–20) from the raw logits, before penalties, temperature and filters (sampling/logprobs.ts).
   * Absent: none computed.
   */
  logprobs?: number;
  /**
   * When generation reaches the max context: false (default) ends with 'context-full'; otherwise
   * it shifts the context and goes on: the oldest turns after a kept prefix leave the KV cache,
   * the rest's keys are rotated to their new positions, and decoding continues without a new
   * prefill (llama.cpp's context shift; context-shift.ts). The kept prefix:
   *   - true: the system prompt's tokens, or BOS alone (the rolling-window policy mid-answer);
   *   - 'first-exchange': the system prompt and the first exchange, i.e. everything before the
   *     second user turn (the truncate-middle policy mid-answer); as true when no whole turn lies
   *     after the first exchange (it is the one being answered) or the prompt is raw.
   */
  contextShift?: boolean | 'first-exchange';
  /**
   * Memory for the KV caches of earlier sequences (conversations the engine switched away from),
   * bytes; in effect from this request on (absent: the engine's current budget, 1 GiB at load).
   * 0 keeps none.
   */
  kvCacheBudgetBytes?: number;
}

export type FinishReason = 'stop' | 'length' | 'context-full' | 'cancelled' | 'error';

export interface CacheStats {
  capacity: number;
  growths: number;
  bytes: number;
}

export interface GenerationStats {
  /** The decoder backend that ran it ('remote': an OpenAI-compatible server, main/remote/). */
  backend: BackendKind | 'remote';
  /** Where ONNX Runtime ran it ('remote': the server's own business). */
  executionProvider: ExecutionProvider | 'remote';
  /** Compute nodes ONNX Runtime placed on its CPU provider, measured once at load (model/placement.ts); null if unknown or remote. */
  nodesOnCpu: number | null;
  promptTokens: number;
  generatedTokens: number;
  /** Prompt tokens served from the KV cache (prefix reuse) rather than prefilled. */
  reusedTokens: number;
  /** Prompt tokens actually run through prefill (after a cancel, fewer than prompt − reused); prefillTokensPerSec counts these. */
  prefilledTokens: number;
  /**
   * Generated tokens inside the model's reasoning block (reasoning.ts), closing marker included;
   * 0 for a reply without one. Counted in `generatedTokens` too.
   */
  reasoningTokens: number;
  /** Time from the first decode step to the end of the reasoning block (or of the reply, when unclosed), ms; 0 without one. */
  reasoningMs: number;
  /** Time from the request to the first generated token, ms. */
  ttftMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** Positions held in the KV cache at the end. */
  contextUsed: number;
  /** Context shifts during this generation (0 unless the request allowed them). */
  contextShifts: number;
  /** Tokens the context shifts dropped from the KV cache, in all. */
  droppedTokens: number;
  maxContext: number;
  rope: CacheStats & { rowsComputed: number };
  kv: CacheStats;
}

export type GenerationEvent =
  | { type: 'prefill'; processed: number; total: number }
  /**
   * Text of the reply, in the part it belongs to (reasoning.ts). `id` is the generated token, or
   * −1 for text that is not a new token (the stream's tail; the second part of a token whose text
   * held the end of the reasoning and the start of the answer): count tokens by `id >= 0`.
   * `logprob`: the sampled token's, when the request asked (none for id −1).
   */
  | {
      type: 'token'; id: number; text: string; part: ReplyPart; logprob?: TokenLogprob;
      /** A remote engine's server's `tool_calls` delta as it streamed it (id −1, no text): the call's index, its id and name once, arguments fragments. */
      toolCall?: ToolCallDelta;
    }
  | {
      type: 'done';
      reason: FinishReason;
      /** The answer: every content delta, joined. */
      text: string;
      /** The reasoning: every reasoning delta, joined ('' without any). */
      reasoning: string;
      promptTokens: number[];
      tokens: number[];
      /** Calls a remote engine's server returned as `tool_calls` (main/remote/relay.ts); absent locally, where calls are read from `text`. */
      toolCalls?: ToolCall[];
      /** Per generated token (as `tokens`), when the request asked for log-probabilities. */
      logprobs?: TokenLogprob[];
      stats: GenerationStats;
      /** Set when reason is 'error'. */
      error?: { code: string; message: string };
    };
