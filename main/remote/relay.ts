/**
 * What a remote engine relays to its OpenAI-compatible server beyond text (instead of refusing
 * it): tools, `tool_choice`, `parallel_tool_calls`, tool history (an assistant's `tool_calls`, a
 * tool message's `tool_call_id`), `logprobs` / `top_logprobs`; and what comes back: the calls a
 * server streams as `delta.tool_calls` (per `index`: the id and name once, the arguments in
 * fragments) or sends whole as `message.tool_calls`, and log-probabilities in the chat shape
 * (`logprobs.content[]`) or the legacy completions shape (`tokens` / `token_logprobs` /
 * `top_logprobs`). The server's own template and constraint do the work; nothing is parsed from
 * its text here. Pure: no I/O.
 */
import type { ChatMessage, GenerationRequest, ToolCall, ToolCallDelta } from '../engine/generate/types.ts';
import type { TokenLogprob, TokenLogprobEntry } from '../engine/sampling/logprobs.ts';

/** The request fields for tools and log-probabilities, in OpenAI's names. */
export function relayFields(r: GenerationRequest, chat: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (r.tools?.length) {
    out.tools = r.tools;
    if (r.toolChoice !== undefined) out.tool_choice = typeof r.toolChoice === 'string' ? r.toolChoice : { type: 'function', function: { name: r.toolChoice.name } };
    if (r.parallelToolCalls !== undefined) out.parallel_tool_calls = r.parallelToolCalls;
  }
  if (r.logprobs !== undefined) Object.assign(out, chat ? { logprobs: true, top_logprobs: r.logprobs } : { logprobs: r.logprobs });
  return out;
}

/** A chat message in the request: an assistant's reasoning as `reasoning_content` (what llama.cpp's server and vLLM read), its calls, a tool turn's call id. */
export function wireMessage(m: ChatMessage): Record<string, unknown> {
  return {
    role: m.role,
    content: m.content,
    ...(m.reasoning ? { reasoning_content: m.reasoning } : {}),
    ...(m.toolCalls?.length ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
  };
}

interface WireToolCall {
  index?: unknown;
  id?: unknown;
  function?: { name?: unknown; arguments?: unknown };
}

/** The calls of one answer as a server sends them, assembled by index. */
export class RelayedToolCalls {
  private readonly calls: ToolCall[] = [];

  /** Takes a chunk's `delta.tool_calls` (fragments) or a whole `message.tool_calls`; returns them as deltas, to stream on. */
  take(wire: unknown): ToolCallDelta[] {
    if (!Array.isArray(wire)) return [];
    return wire.map((w: WireToolCall, i) => {
      const index = typeof w.index === 'number' ? w.index : i;
      const call = (this.calls[index] ??= { id: '', name: '', arguments: '' });
      const d: ToolCallDelta = { index };
      if (typeof w.id === 'string' && w.id) call.id = d.id = w.id;
      if (typeof w.function?.name === 'string' && w.function.name) call.name += d.name = w.function.name;
      if (typeof w.function?.arguments === 'string') call.arguments += d.arguments = w.function.arguments;
      return d;
    });
  }

  /** The calls so far, in index order (holes left by a server skipping an index dropped). */
  get all(): ToolCall[] {
    return this.calls.filter((c) => c !== undefined);
  }
}

const utf8 = (s: string): number[] => [...new TextEncoder().encode(s)];

interface WireEntry {
  token?: unknown;
  logprob?: unknown;
  bytes?: unknown;
  top_logprobs?: unknown;
}

function entry(e: WireEntry): TokenLogprobEntry | null {
  if (typeof e.token !== 'string' || typeof e.logprob !== 'number') return null;
  const bytes = Array.isArray(e.bytes) && e.bytes.every((b) => typeof b === 'number') ? (e.bytes as number[]) : utf8(e.token);
  // Ids belong to the server: −1.
  return { id: -1, token: e.token, logprob: e.logprob, bytes };
}

/**
 * A choice's log-probabilities as the engine's entries: the chat shape `{ content: [{ token,
 * logprob, bytes, top_logprobs }] }` or the legacy `{ tokens, token_logprobs, top_logprobs:
 * [{ token: logprob }] }`; [] for anything else.
 */
export function relayedLogprobs(wire: unknown): TokenLogprob[] {
  if (typeof wire !== 'object' || wire === null) return [];
  const w = wire as { content?: unknown; tokens?: unknown; token_logprobs?: unknown; top_logprobs?: unknown };
  if (Array.isArray(w.content)) {
    return w.content.flatMap((e: WireEntry) => {
      const main = entry(e);
      const top = Array.isArray(e.top_logprobs) ? e.top_logprobs.map(entry).filter((t): t is TokenLogprobEntry => t !== null) : [];
      return main ? [{ ...main, top }] : [];
    });
  }
  if (!Array.isArray(w.tokens) || !Array.isArray(w.token_logprobs)) return [];
  return w.tokens.flatMap((token: unknown, i) => {
    const main = entry({ token, logprob: (w.token_logprobs as unknown[])[i] });
    const alternatives = Array.isArray(w.top_logprobs) ? (w.top_logprobs[i] as Record<string, unknown> | null) : null;
    const top = Object.entries(alternatives ?? {}).flatMap(([t, lp]) => entry({ token: t, logprob: lp }) ?? []);
    return main ? [{ ...main, top }] : [];
  });
}
