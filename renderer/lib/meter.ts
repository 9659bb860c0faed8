/**
 * Pure arithmetic of the context meter: level (ok / amber / red), segment widths, the refusal
 * sentence, and number and byte formatting. Takes the contract's `ContextBudget` (used = system +
 * history + draft; total = used + reserve; fits = total ≤ maxContext) and returns plain values;
 * no DOM, no React, so it is unit-tested under Node.
 */
import type { ContextBudget } from '../../main/contract/types.ts';

export type MeterLevel = 'ok' | 'amber' | 'red';

/** The part of a budget the meter needs. */
export type MeterInput = Pick<ContextBudget, 'maxContext' | 'system' | 'documents' | 'history' | 'draft' | 'reserve' | 'used' | 'total' | 'fits'>;

/**
 * Red when the next message will not fit (the services' `fits`); amber when the total with the
 * reply reserve is ≥ 80 % of the max (counting the reserve: at default settings the reserve alone
 * is a quarter of the context, so `used` alone turned red before it ever showed amber), which
 * includes a total past the max that still fits (rolling window: the answer will shift the
 * context, Send works); ok otherwise. Integer comparison, so exactly 80 % is amber.
 */
export function meterLevel(b: Pick<MeterInput, 'maxContext' | 'used' | 'total' | 'fits'>): MeterLevel {
  if (!b.fits) return 'red';
  if (b.maxContext > 0 && b.total * 5 >= b.maxContext * 4) return 'amber';
  return 'ok';
}

/** used / max as a percentage, 0–100 (clamped), rounded to one decimal. */
export function percentUsed(used: number, maxContext: number): number {
  if (maxContext <= 0) return used > 0 ? 100 : 0;
  const p = (used / maxContext) * 100;
  return Math.round(Math.min(100, Math.max(0, p)) * 10) / 10;
}

export interface MeterSegment {
  key: 'system' | 'documents' | 'history' | 'draft' | 'reserve';
  label: string;
  tokens: number;
  /** Width in percent of the bar. */
  percent: number;
}

const SEGMENT_LABELS: Record<MeterSegment['key'], string> = {
  system: 'System prompt',
  documents: 'Documents',
  history: 'History',
  draft: 'Draft',
  reserve: 'Reserved for reply',
};

/**
 * Bar segments in order system, documents, history, draft, reserve. The bar spans the max
 * context; when the total passes it, the bar spans the total instead, so the segments still sum
 * to at most 100 %.
 */
export function meterSegments(b: MeterInput): MeterSegment[] {
  const span = Math.max(b.maxContext, b.system + b.documents + b.history + b.draft + b.reserve, 1);
  return (['system', 'documents', 'history', 'draft', 'reserve'] as const).map((key) => {
    const tokens = Math.max(0, b[key]);
    return { key, label: SEGMENT_LABELS[key], tokens, percent: Math.round((tokens / span) * 10_000) / 100 };
  });
}

/** `1234` → `1,234`. */
export function formatTokens(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** The meter's short text: `1,234 / 2,048`, or `≈1,234 / 2,048` when the count is an estimate. */
export function meterText(used: number, maxContext: number, estimated = false): string {
  return `${estimated ? '≈' : ''}${formatTokens(used)} / ${formatTokens(maxContext)}`;
}

/** The meter's note of what the context-full policy leaves out: ` (166 dropped)`, or '' for none. */
export function droppedText(droppedTokens: number | undefined): string {
  return droppedTokens && droppedTokens > 0 ? ` (${formatTokens(droppedTokens)} dropped)` : '';
}

/** Bytes in B, KiB, MiB or GiB with at most one decimal: `1536` → `1.5 KiB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Math.max(0, bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  const rounded = Math.round(value * 10) / 10;
  return `${Number.isInteger(rounded) ? rounded.toFixed(0) : rounded.toFixed(1)} ${units[unit]}`;
}

/**
 * Why Send refuses, or null when the next message fits. One sentence, for the composer:
 * "This message needs 600 tokens with the reply reserve, but the max context is 512."
 * The services' `fits` decides (under the rolling-window and truncate-middle policies the reserve
 * may pass the max context: the answer shifts the context when it gets there).
 */
export function refusalReason(b: Pick<MeterInput, 'maxContext' | 'draft' | 'total' | 'fits'>): string | null {
  if (b.fits) return null;
  const what = b.draft > 0 ? 'This message needs' : 'The conversation needs';
  return `${what} ${formatTokens(b.total)} tokens with the reply reserve, but the max context is ${formatTokens(b.maxContext)}.`;
}

/**
 * The budget to show for `conversationId` while its own is being asked for (the budget store
 * applies it on a switch). The last budget answers for the conversation it was asked for; for an
 * empty conversation (New chat, known empty: not still loading) the system prompt is all there is,
 * so the figures are exact at once instead of the previous chat's until getBudget answers. For a
 * non-empty one the previous figures stay until then.
 */
export function meterInputFor<B extends MeterInput & { conversationId: string | null }>(
  budget: B,
  conversationId: string | null,
  emptyConversation: boolean,
  draftTokens = 0,
): B {
  if (budget.conversationId === conversationId || !emptyConversation) return budget;
  const used = budget.system + draftTokens;
  const total = used + budget.reserve;
  return { ...budget, conversationId, documents: 0, history: 0, draft: draftTokens, used, total, fits: total <= budget.maxContext };
}
