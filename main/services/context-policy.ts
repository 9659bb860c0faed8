/**
 * What a conversation leaves out of the prompt when it no longer fits the max context, by the
 * context-full policy (a setting):
 *   - 'stop': nothing; the budget says it does not fit and Send refuses.
 *   - 'truncate-middle': keep the first exchange (the first user turn, with its documents, and
 *     its answer) and drop the oldest exchanges after it.
 *   - 'rolling-window': drop the oldest exchanges.
 * The same rule goes on mid-answer (`SHIFT_KEEP`, the engine's context shift): an answer that
 * reaches the max context drops the oldest turns after the system prompt (rolling window) or
 * after the first exchange (truncate middle) and goes on; under 'stop' it ends (context-full).
 * The system prompt is never dropped (it is not part of the history), and neither is the
 * exchange being answered (the last one when there is no draft). An exchange is a user message
 * and the messages after it up to the next user message.
 *
 * `keptHistory(policy, history, protectLast, fits)` finds the fewest exchanges to drop with a
 * binary search over how many (each probe is one token count of the whole prompt), since
 * dropping more never makes a prompt longer.
 */
import type { ContextFullPolicy, Message } from '../contract/types.ts';
import type { GenerationRequest } from '../engine/generate/types.ts';

/**
 * The engine's `contextShift` for a policy: what an answer that reaches the max context keeps
 * when it shifts (true: the system prompt; 'first-exchange': the system prompt and the first
 * exchange, or as true while the first exchange is the one being answered), false: it ends.
 */
export const SHIFT_KEEP: Readonly<Record<ContextFullPolicy, NonNullable<GenerationRequest['contextShift']>>> = {
  stop: false,
  'truncate-middle': 'first-exchange',
  'rolling-window': true,
};

/** The history as the prompt holds it, and the messages left out (in order). */
export interface KeptHistory {
  kept: Message[];
  dropped: Message[];
}

/** `history` cut into exchanges (a leading assistant message, if any, is an exchange of its own). */
export function exchanges(history: readonly Message[]): Message[][] {
  const out: Message[][] = [];
  for (const m of history) {
    if (m.role === 'user' || out.length === 0) out.push([m]);
    else out[out.length - 1].push(m);
  }
  return out;
}

/**
 * The history to feed under `policy`: all of it if it fits (or the policy is 'stop'), else
 * without the fewest droppable exchanges that make it fit, or without all of them when even
 * that does not fit (the caller's budget then says it does not fit).
 * @param protectLast keep the last exchange (it is the one being answered).
 * @param fits whether a prompt with this history fits the max context with the reserve.
 */
export async function keptHistory(
  policy: ContextFullPolicy,
  history: readonly Message[],
  protectLast: boolean,
  fits: (kept: Message[]) => Promise<boolean>,
): Promise<KeptHistory> {
  const all = { kept: [...history], dropped: [] };
  if (policy === 'stop' || (await fits(all.kept))) return all;
  const ex = exchanges(history);
  const first = policy === 'truncate-middle' ? 1 : 0;
  const last = protectLast ? ex.length - 1 : ex.length; // droppable: ex[first, last)
  const droppable = Math.max(0, last - first);
  if (droppable === 0) return all;
  const without = (n: number): KeptHistory => ({
    kept: [...ex.slice(0, first), ...ex.slice(first + n)].flat(),
    dropped: ex.slice(first, first + n).flat(),
  });
  // The fewest n in [1, droppable] for which it fits; droppable when none does.
  let lo = 1;
  let hi = droppable;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (await fits(without(mid).kept)) hi = mid;
    else lo = mid + 1;
  }
  return without(lo);
}
