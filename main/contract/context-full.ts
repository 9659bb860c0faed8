/**
 * The words for what happens when the context is full, one place for the CLI and the window:
 * `contextShiftNote` words an answer's context shift (`npm run chat`'s `note:` line on stderr and
 * the window's stats tooltip under the answer), and `CONTEXT_FULL_WORDS` labels and explains the
 * three context-full policies (the window's Settings and the refusal line's buttons; the README's
 * policy table says the same at more length). Imports only types, so the renderer bundles it as is.
 */
import type { AnswerStats, ContextFullPolicy } from './types.ts';

/** `1536` → `1,536`, the same in Node and Chromium. */
const count = (n: number): string => n.toLocaleString('en-US');

/**
 * The one sentence for an answer that reached the max context and went on after shifting the
 * context, from its stats (`shifts`: how many shifts; `droppedTokens`: tokens that left the KV
 * cache in all), or null when the context was not shifted (absent, or zero shifts).
 * The policy is not an input: the stats do not say which prefix stayed (under Truncate the middle
 * the first answer shifts as under Rolling window), so the sentence says "earlier tokens", true of
 * both, and nothing about what was kept.
 * e.g. { shifts: 3, droppedTokens: 1536 } → "The max context was reached; the context was shifted 3
 * times and the answer went on (1,536 earlier tokens dropped)."
 */
export function contextShiftNote(shift: AnswerStats['contextShift'] | undefined): string | null {
  if (!shift || !(shift.shifts > 0)) return null;
  const times = shift.shifts === 1 ? 'once' : `${count(shift.shifts)} times`;
  const tokens = `${count(shift.droppedTokens)} earlier ${shift.droppedTokens === 1 ? 'token' : 'tokens'}`;
  return `The max context was reached; the context was shifted ${times} and the answer went on (${tokens} dropped).`;
}

/**
 * Each context-full policy's name (`label`, as the window's menus show it) and what it does, before
 * sending and mid-answer (`hint`, one or two sentences). The README's policy table is the long form.
 */
export const CONTEXT_FULL_WORDS: Readonly<Record<ContextFullPolicy, { label: string; hint: string }>> = {
  stop: {
    label: 'Stop',
    hint: 'Leaves nothing out: Send refuses a message that does not fit, and an answer that reaches the max context ends there.',
  },
  'truncate-middle': {
    label: 'Truncate the middle',
    hint:
      'Keeps the system prompt and the first exchange with its documents; leaves out the oldest exchanges after it. ' +
      'An answer that reaches the max context goes on: the first exchange is kept and the oldest turns after it are dropped.',
  },
  'rolling-window': {
    label: 'Rolling window',
    hint: 'Keeps the system prompt; leaves out the oldest exchanges. An answer that reaches the max context goes on: the oldest turns are dropped.',
  },
};
