/**
 * Citations: every passage of a document put in a prompt is labelled with its document and page
 * (or heading), `[harbor-notes.pdf p. 2]` or `[guide.md § Setup]`, so an answer can say where it
 * comes from, and the caller can say which character range of the document each label covers.
 *
 * Contract: `passagesOf(name, text, parts, start, end)` → the passages of `text[start, end)`, cut
 * at the parts (pages, sections) that start inside it, each with its label and UTF-16 range;
 * `labelledBody(text, passages)` → the passages, each under `[label]`, blank line between;
 * `wholeBody(name, text, parts)` → a whole document so labelled (a document without parts is its
 * text as it is: the `<document name>` tag is its label). The prompt explains the format once per
 * turn (prompt.ts `CITATION_NOTE`).
 */
import type { DocumentPart } from './extract.ts';

/** A labelled stretch of a document in the prompt. */
export interface Passage {
  /** The document's name. */
  document: string;
  /** What the prompt shows between brackets: "harbor-notes.pdf p. 2", "guide.md § Setup", "book.txt". */
  label: string;
  /** 1-based PDF page, when the passage lies on one. */
  page?: number;
  /** Markdown / .docx / HTML heading the passage lies under. */
  section?: string;
  /** UTF-16 offsets into the document's text: [start, end). */
  start: number;
  end: number;
}

/** "x.pdf p. 3" for part "page 3", "x.md § Setup" for "§ Setup", the name alone for none. */
export function citationLabel(name: string, part: string): string {
  const page = /^page (\d+)$/.exec(part);
  if (page) return `${name} p. ${page[1]}`;
  return part ? `${name} ${part}` : name;
}

/** The passage fields of a part label: its page number or its section heading. */
function partFields(part: string): Pick<Passage, 'page' | 'section'> {
  const page = /^page (\d+)$/.exec(part);
  if (page) return { page: Number(page[1]) };
  return part.startsWith('§ ') ? { section: part.slice(2) } : {};
}

/** See the file comment. Empty passages (whitespace only) are left out. */
export function passagesOf(name: string, text: string, parts: readonly DocumentPart[], start: number, end: number): Passage[] {
  let current = '';
  const cuts: { at: number; part: string }[] = [];
  for (const p of parts) {
    if (p.start <= start) current = p.label;
    else if (p.start < end) cuts.push({ at: p.start, part: p.label });
  }
  const out: Passage[] = [];
  let from = start;
  for (const next of [...cuts, { at: end, part: '' }]) {
    if (text.slice(from, next.at).trim().length > 0) out.push({ document: name, label: citationLabel(name, current), ...partFields(current), start: from, end: next.at });
    from = next.at;
    current = next.part;
  }
  return out;
}

/** The passages' text, each under its `[label]`, separated by a blank line. */
export function labelledBody(text: string, passages: readonly Passage[]): string {
  return passages.map((p) => `[${p.label}]\n${text.slice(p.start, p.end).trim()}`).join('\n\n');
}

/** A whole document as the prompt holds it, and its passages. */
export function wholeBody(name: string, text: string, parts: readonly DocumentPart[]): { body: string; passages: Passage[] } {
  if (parts.length === 0) return { body: text, passages: [{ document: name, label: name, start: 0, end: text.length }] };
  const passages = passagesOf(name, text, parts, 0, text.length);
  return { body: labelledBody(text, passages), passages };
}
