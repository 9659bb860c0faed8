/**
 * Text helpers of the conversation store: LIKE escaping for search, the automatic title from a
 * first message, and the snippet shown under a conversation found by its messages. Pure.
 */

/** Longest automatic title, in characters (before the ellipsis). */
export const AUTO_TITLE_CHARS = 40;

/** `text` with LIKE's wildcards and the escape character itself escaped (ESCAPE '\'). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** A title from a message: whitespace collapsed, at most ~40 characters, cut at a word if one is near. */
export function autoTitle(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= AUTO_TITLE_CHARS) return flat;
  const cut = flat.slice(0, AUTO_TITLE_CHARS);
  const space = cut.lastIndexOf(' ');
  return `${(space >= AUTO_TITLE_CHARS * 0.6 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** Characters of a search match's context shown before and after the hit. */
const SNIPPET_BEFORE = 30;
const SNIPPET_AFTER = 60;

/**
 * The text around the first case-insensitive occurrence of `query` in `text`, whitespace
 * collapsed, with "…" where it was cut: what the list shows under a conversation found by its
 * messages.
 */
export function snippet(text: string, query: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const at = flat.toLowerCase().indexOf(query.replace(/\s+/g, ' ').toLowerCase());
  if (at < 0) return flat.slice(0, SNIPPET_BEFORE + SNIPPET_AFTER);
  let start = Math.max(0, at - SNIPPET_BEFORE);
  let end = Math.min(flat.length, at + query.length + SNIPPET_AFTER);
  // Cut at word boundaries when one is near, so the snippet starts and ends with whole words.
  const after = start > 0 ? flat.indexOf(' ', start) : -1;
  if (after >= 0 && after < at) start = after + 1;
  const before = end < flat.length ? flat.lastIndexOf(' ', end) : -1;
  if (before > at + query.length) end = before;
  return `${start > 0 ? '…' : ''}${flat.slice(start, end)}${end < flat.length ? '…' : ''}`;
}

