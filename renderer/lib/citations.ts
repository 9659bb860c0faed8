/**
 * Citations in an answer: the labels the prompt gave the documents' passages
 * (main/documents/citations.ts: `[harbor-notes.pdf p. 2]`, `[guide.md § Setup]`, `[book.txt]`),
 * found in the answer's text and matched to the conversation's documents by name, so the window
 * can turn each into a link that opens the reader at that page or section.
 *
 * Contract: `findCitations(text, documents)` → the distinct citations in order of first
 * appearance: `{ label, documentId, part }`, `part` being the document part's label ('page 2',
 * '§ Setup') or '' for the whole document; a bracket naming no attached document is not one.
 * `partRange(parts, part, textLength)` → the UTF-16 range of that part ([0, length) for '').
 */

export interface Citation {
  label: string;
  documentId: string;
  part: string;
}

/** `[name p. N]`, `[name § heading]` or `[name]`, name without brackets or line breaks. */
const BRACKETED = /\[([^\][\n]{1,300})\]/g;

/** See the file comment. The longest matching name wins ("a b.pdf" over "b.pdf"). */
export function findCitations(text: string, documents: readonly { id: string; name: string }[]): Citation[] {
  const byLength = [...documents].sort((a, b) => b.name.length - a.name.length);
  const out: Citation[] = [];
  const seen = new Set<string>();
  for (const m of text.matchAll(BRACKETED)) {
    const inner = m[1].trim();
    for (const d of byLength) {
      if (!inner.startsWith(d.name)) continue;
      const rest = inner.slice(d.name.length).trim();
      const page = /^p\. ?(\d+)$/.exec(rest);
      const part = page ? `page ${page[1]}` : rest.startsWith('§ ') ? rest : rest === '' ? '' : null;
      if (part === null) continue;
      if (!seen.has(inner)) {
        seen.add(inner);
        out.push({ label: inner, documentId: d.id, part });
      }
      break;
    }
  }
  return out;
}

/** The range of the part labelled `part` (to the next part's start), or null when the document has no such part. */
export function partRange(parts: readonly { label: string; start: number }[], part: string, textLength: number): { start: number; end: number } | null {
  if (part === '') return { start: 0, end: textLength };
  const i = parts.findIndex((p) => p.label === part);
  if (i < 0) return null;
  return { start: parts[i].start, end: i + 1 < parts.length ? parts[i + 1].start : textLength };
}
