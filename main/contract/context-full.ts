/**
 * The words for what happens when the context is full, one place for the CLI and the window:
 * `contextShiftNote` words an answer's context shift (`npm run chat`'s `note:` line on stderr and
 * the window's stats tooltip under the answer), `contextFullNote` an answer that ended at the max
 * context and what to do about it, `promptTooLongRemedy` what to do about a prompt that does not
 * fit, `raiseUpToTrained` the larger max context alone (all three name the remedies in the caller's
 * terms, `CLI_CONTEXT_REMEDIES` for `npm run chat`, `WINDOW_CONTEXT_REMEDIES` for the window's
 * Settings, and suggest a larger max context only up to the model's trained context, past which
 * answers lose quality: context-caution.ts; `trainedContextReached` says why not, `raiseToFit` the
 * window's documents offer's target), and `CONTEXT_FULL_WORDS` labels and explains the
 * three context-full policies (the window's Settings and the refusal line's buttons; docs/desktop-app.md's
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
 * The remedies as a surface names them: `raise` a larger max context, `rollingWindow` switch to
 * the rolling-window policy. Each is a verb phrase that fits after "to let it go on, ".
 */
export interface ContextRemedies {
  raise: string;
  rollingWindow: string;
}

/** `npm run chat`'s options. */
export const CLI_CONTEXT_REMEDIES: ContextRemedies = {
  raise: 'raise --max-context',
  rollingWindow: 'use --context-full rolling-window',
};

/** The window's Settings fields, as SettingsPanel labels them ("Max context", "When the context is full"). */
export const WINDOW_CONTEXT_REMEDIES: ContextRemedies = {
  raise: 'raise Max context in Settings',
  rollingWindow: 'set When the context is full to Rolling window in Settings',
};

const knownTrained = (t: number | null | undefined): t is number => typeof t === 'number' && t > 0;

/**
 * `raise` with its bound ("raise --max-context (up to the model's trained context, 512)"), without
 * one when the trained context is unknown (null), or null when the max context is already at or
 * past the trained context: more would cost quality, not help.
 */
export function raiseUpToTrained(maxContext: number, trainedContext: number | null | undefined, remedies: ContextRemedies): string | null {
  if (!knownTrained(trainedContext)) return remedies.raise;
  return maxContext < trainedContext ? `${remedies.raise} (up to the model's trained context, ${count(trainedContext)})` : null;
}

/** "the model's trained context" or "above the model's trained context, 512", for a max context at or past it. */
const pastTrained = (maxContext: number, trainedContext: number) =>
  maxContext === trainedContext ? "the model's trained context" : `above the model's trained context, ${count(trainedContext)}`;

/**
 * Why a larger max context is not suggested, for a max context at or past the (known) trained
 * context: (512, 512) → "the max context is already the model's trained context, 512; past it
 * answers lose quality"; (4096, 2048) → "… already above the model's trained context, 2,048; …".
 */
export function trainedContextReached(maxContext: number, trainedContext: number): string {
  const trained = maxContext === trainedContext ? `the model's trained context, ${count(trainedContext)}` : pastTrained(maxContext, trainedContext);
  return `the max context is already ${trained}; past it answers lose quality`;
}

/**
 * The max context to offer when `total` positions (prompt + reply reserve, tokens) do not fit
 * `maxContext`: the next power of two ≥ total, offered only while raiseUpToTrained would suggest a
 * larger max context (below the trained context) and only up to the trained context; null when
 * nothing is offered. An unknown trained context (null) bounds nothing.
 * e.g. (300, 256, 512) → 512; (600, 256, 512) → null (1,024 is past 512); (600, 512, 512) → null.
 */
export function raiseToFit(total: number, maxContext: number, trainedContext: number | null | undefined): number | null {
  if (raiseUpToTrained(maxContext, trainedContext, CLI_CONTEXT_REMEDIES) === null) return null;
  const target = 2 ** Math.ceil(Math.log2(Math.max(1, total)));
  return knownTrained(trainedContext) && target > trainedContext ? null : target;
}

/**
 * The one sentence for an answer that ended because the max context was reached (finish reason
 * 'context-full'), or null for any other end. `shifting`: the policy shifts the context (rolling
 * window, truncate the middle), so reaching the max context means no shift was possible: fewer
 * than 2 positions lie after the start a shift keeps (context-shift.ts `planShift`). Positions are
 * tokens (prompt + answer); `trainedContext` may be unknown (null).
 * e.g. stop at 32 of a 512-trained model → "The answer stopped at the max context (32 positions);
 * to let it go on, raise --max-context (up to the model's trained context, 512) or use
 * --context-full rolling-window."
 */
export function contextFullNote(
  end: { reason: string; shifting: boolean; maxContext: number; trainedContext: number | null | undefined },
  remedies: ContextRemedies,
): string | null {
  if (end.reason !== 'context-full') return null;
  const raise = raiseUpToTrained(end.maxContext, end.trainedContext, remedies);
  const at = `${count(end.maxContext)} positions${raise === null ? `, ${pastTrained(end.maxContext, end.trainedContext as number)}` : ''}`;
  if (end.shifting) {
    return (
      `The max context (${at}) was reached and is too small to shift the context: a shift keeps the start (the system prompt, or BOS) ` +
      `and needs at least 2 positions after it to drop; ${raise ?? 'shorten the system prompt'}.`
    );
  }
  return raise === null
    ? `The answer stopped at the max context (${at}); to let it go on, ${remedies.rollingWindow} (a max context past the trained context costs quality).`
    : `The answer stopped at the max context (${at}); to let it go on, ${raise} or ${remedies.rollingWindow}.`;
}

/**
 * What to do about a prompt that needs more positions than `maxContext`: shorten it, or raise the
 * max context while it is below the model's trained context (unknown: null).
 * e.g. (8, 512) → "shorten the prompt or raise --max-context (up to the model's trained context,
 * 512)"; (512, 512) → "shorten the prompt (the max context is already the model's trained context,
 * 512; past it answers lose quality)".
 */
export function promptTooLongRemedy(maxContext: number, trainedContext: number | null | undefined, remedies: ContextRemedies): string {
  const raise = raiseUpToTrained(maxContext, trainedContext, remedies);
  if (raise !== null) return `shorten the prompt or ${raise}`;
  return `shorten the prompt (${trainedContextReached(maxContext, trainedContext as number)})`;
}

/**
 * Each context-full policy's name (`label`, as the window's menus show it) and what it does, before
 * sending and mid-answer (`hint`, one or two sentences). docs/desktop-app.md's policy table is the long form.
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
