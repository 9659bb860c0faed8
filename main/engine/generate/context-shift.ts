/**
 * Where a context shift cuts (GenerationRequest.contextShift: the rolling-window and truncate-middle
 * policies mid-answer). llama.cpp's context shift keeps the first n_keep tokens and discards half
 * of the rest (n_discard = (n_past − n_keep) / 2). Ropewalk keeps a prefix chosen by the policy
 * (`ShiftKeep`) and drops the oldest TURNS after it: the cut is rounded up to the start of a
 * message when one lies between half and three quarters of the rest, else it is llama.cpp's half,
 * token-exact (one long turn, or a raw prompt, has no boundary there).
 *   - 'system' (rolling window): the system prompt's tokens, or BOS alone when there is none;
 *   - 'first-exchange' (truncate middle): the system prompt plus the first exchange (the first
 *     message after it and what follows up to the next user message, as context-policy.ts's
 *     `exchanges` cuts it), i.e. everything before the second user turn. When no whole turn lies
 *     after that prefix (the first exchange is the one being answered) it falls back to 'system'.
 *
 * `ContextShifter` finds the kept prefix and the turns' start positions from the request's messages
 * lazily, at the first shift (most generations never shift): each boundary is the common prefix
 * of the prompt's tokens and the tokens of the conversation up to that message (no generation
 * prompt), so a tokenizer that merges across a boundary moves the cut earlier, never into a turn's
 * middle by more than that merge. Positions are tracked across shifts: each drop removes
 * [keep, keep + drop) of the current sequence, so a boundary at original position b sits at
 * b − (tokens dropped so far) while it is past the dropped region. The kept prefix is decided once
 * and stays the same for every shift of the generation.
 */
import { commonPrefix } from '../cache/kv-keep.ts';
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';
import type { ChatMessage } from './types.ts';

/** What a shift keeps at the start of the KV cache (see the file comment). */
export type ShiftKeep = 'system' | 'first-exchange';

/** One shift: positions [keep, keep + drop) leave the KV cache. */
export interface ShiftPlan {
  keep: number;
  drop: number;
}

/**
 * The cut for a cache holding `length` positions.
 * @param keep positions never dropped (the kept prefix: system prompt / BOS, or up to the second
 *   user turn), 0 ≤ keep.
 * @param turnStarts ascending positions (current coordinates) where a message starts.
 * @returns null when fewer than 2 positions lie after `keep` (nothing sensible to drop).
 */
export function planShift(length: number, keep: number, turnStarts: readonly number[]): ShiftPlan | null {
  const rest = length - keep;
  if (rest < 2) return null;
  const half = Math.floor(rest / 2);
  const start = turnStarts.find((s) => s - keep >= half && s < length);
  const whole = start !== undefined && start - keep <= Math.floor((rest * 3) / 4);
  return { keep, drop: whole ? start - keep : half };
}

/** One generation's shift state: the kept prefix, the turns' starts, the tokens dropped so far. */
export class ContextShifter {
  /** Shifts done and tokens dropped by them. */
  shifts = 0;
  dropped = 0;
  private boundaries: { keep: number; starts: number[] } | null = null;

  /**
   * @param prompt the generation's prompt token ids.
   * @param messages the request's messages (null for a raw prompt: only BOS is kept, whatever `rule`).
   * @param rule the kept prefix: 'system' (rolling window) or 'first-exchange' (truncate middle).
   */
  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly prompt: readonly number[],
    private readonly messages: readonly ChatMessage[] | null,
    private readonly rule: ShiftKeep = 'system',
  ) {}

  /**
   * The cut for the cache's current `length` (null: cannot shift), counted into shifts/dropped.
   * `limit(keep, drop)` may shorten the drop (the KV cache's sliding-window layers: KvCache.exactDrop).
   */
  next(length: number, limit: (keep: number, drop: number) => number = (_, drop) => drop): ShiftPlan | null {
    const { keep, starts } = (this.boundaries ??= this.find());
    const current = starts.map((b) => b - this.dropped).filter((b) => b > keep);
    const planned = planShift(length, keep, current);
    const plan = planned && { keep, drop: limit(keep, planned.drop) };
    if (plan) {
      this.shifts++;
      this.dropped += plan.drop;
    }
    return plan;
  }

  /** The kept prefix and the messages' start positions in the prompt (original coordinates). */
  private find(): { keep: number; starts: number[] } {
    const bos = this.tokenizer.bos !== null && this.prompt[0] === this.tokenizer.bos ? 1 : 0;
    const msgs = this.messages;
    if (!msgs || msgs.length === 0) return { keep: bos, starts: [] };
    // Each boundary encodes the conversation up to it; memoized, as the system prompt's end and
    // the first exchange's end are also turn starts.
    const ends = new Map<number, number>();
    const boundaryAfter = (n: number): number => {
      let end = ends.get(n);
      if (end === undefined) {
        const ids = this.tokenizer.encodeChat(msgs.slice(0, n) as ChatMessage[], { addGenerationPrompt: false });
        ends.set(n, (end = commonPrefix(ids, this.prompt)));
      }
      return end;
    };
    const system = msgs[0].role === 'system' ? Math.max(bos, boundaryAfter(1)) : bos;
    const keep = this.rule === 'first-exchange' ? (this.firstExchangeEnd(boundaryAfter) ?? system) : system;
    // Message n starts where messages [0, n) end; the answer starts where the prompt ends.
    const starts: number[] = [];
    const add = (b: number) => {
      if (b > keep && b > (starts[starts.length - 1] ?? 0)) starts.push(b);
    };
    for (let n = 1; n < msgs.length; n++) add(boundaryAfter(n));
    add(this.prompt.length);
    return { keep, starts };
  }

  /**
   * Where the first exchange ends (the second user turn starts), when a whole turn lies between
   * there and the answer being generated; else null, and the shift keeps what rolling window keeps.
   * Why fall back rather than end at context-full: when there is no turn after the first exchange,
   * the first exchange IS the one being answered (the first answer of a chat, often after a long
   * document), so it cannot be kept whole anyway, and ending the answer there would make truncate
   * middle act like 'stop' in exactly the case an answer most often runs long. Keeping the first
   * user turn and dropping the answer's own oldest tokens instead was rejected: with a document
   * that fills most of the context it shifts every few tokens, and not at all once it fills it.
   */
  private firstExchangeEnd(boundaryAfter: (n: number) => number): number | null {
    const msgs = this.messages!;
    // As context-policy.ts's `exchanges`: the first non-system message opens the first exchange,
    // the next user message the second.
    const first = msgs.findIndex((m) => m.role !== 'system');
    const second = first < 0 ? -1 : msgs.findIndex((m, i) => i > first && m.role === 'user');
    if (second < 0) return null;
    const end = boundaryAfter(second);
    return end < this.prompt.length ? end : null;
  }
}
