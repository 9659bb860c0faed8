/**
 * Where a search query occurs in a text, for highlighting: the text cut into pieces, each a hit
 * or not, in order (joined they give the text back). Case-insensitive, literal (no patterns),
 * whitespace in the query matching any run of whitespace, as the services' search does on text
 * whose whitespace the snippet collapsed.
 */

export interface TextPiece {
  text: string;
  hit: boolean;
}

export function splitMatches(text: string, query: string): TextPiece[] {
  const q = query.trim();
  if (!q) return [{ text, hit: false }];
  const pattern = new RegExp(q.split(/\s+/).map(escapeRegExp).join('\\s+'), 'gi');
  const pieces: TextPiece[] = [];
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    const at = m.index ?? 0;
    if (at > last) pieces.push({ text: text.slice(last, at), hit: false });
    pieces.push({ text: m[0], hit: true });
    last = at + m[0].length;
  }
  if (last < text.length) pieces.push({ text: text.slice(last), hit: false });
  return pieces.length > 0 ? pieces : [{ text, hit: false }];
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
