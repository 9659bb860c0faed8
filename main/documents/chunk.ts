/**
 * Chunking a document by tokens, for "use the relevant parts" when a document does not fit.
 *
 * Contract: `chunkDocument(text, parts, count, opts)` splits `text` into chunks of at most
 * `opts.chunkTokens` tokens (as `count` measures them: the engine's tokenizer), cut on paragraph
 * boundaries (blank lines) where possible, else on sentence ends, else between words; each chunk
 * after the first repeats the previous chunk's last units up to `opts.overlapTokens`, so a
 * sentence cut at a boundary is whole in one of them. Every character of `text` is in some chunk,
 * in order. Each chunk carries its 1-based number, character range, token count and the label of
 * the part (PDF page, Markdown section) where it starts.
 */
import type { DocumentPart } from './extract.ts';

export interface Chunk {
  /** 1-based, in document order. */
  index: number;
  /** UTF-16 offsets into the document's text: [start, end). */
  start: number;
  end: number;
  text: string;
  /** Tokens of `text` alone. */
  tokens: number;
  /** The page or section where the chunk starts ('' when the document has no parts). */
  part: string;
}

export interface ChunkOptions {
  /** Most tokens per chunk (default 256). */
  chunkTokens?: number;
  /** Tokens repeated from the end of the previous chunk (default 32). */
  overlapTokens?: number;
}

/** Token count of a piece of text (the engine's tokenizer, without BOS). */
export type CountTokens = (texts: string[]) => Promise<number[]>;

interface Unit {
  start: number;
  end: number;
  tokens: number;
}

/**
 * Splits `text` into chunks (see the file comment).
 * @throws RangeError when chunkTokens < 8 or overlapTokens ≥ chunkTokens / 2.
 */
export async function chunkDocument(text: string, parts: readonly DocumentPart[], count: CountTokens, opts: ChunkOptions = {}): Promise<Chunk[]> {
  const size = opts.chunkTokens ?? 256;
  const overlap = opts.overlapTokens ?? 32;
  if (!(size >= 8)) throw new RangeError(`chunk size must be at least 8 tokens, got ${size}`);
  if (!(overlap >= 0 && overlap < size / 2)) throw new RangeError(`overlap must be in [0, ${size / 2}) tokens, got ${overlap}`);
  const units = await splitUnits(text, size, count);
  const chunks: Chunk[] = [];
  let i = 0;
  while (i < units.length) {
    // 1. Take units while they fit.
    let j = i;
    let tokens = 0;
    while (j < units.length && (j === i || tokens + units[j].tokens <= size)) tokens += units[j++].tokens;
    chunks.push({ index: chunks.length + 1, start: units[i].start, end: units[j - 1].end, text: '', tokens, part: '' });
    if (j >= units.length) break;
    // 2. The next chunk starts with the last units of this one, up to the overlap.
    let k = j;
    let back = 0;
    while (k - 1 > i && back + units[k - 1].tokens <= overlap) back += units[--k].tokens;
    i = k;
  }
  const counted = await count(chunks.map((c) => text.slice(c.start, c.end)));
  return chunks.map((c, n) => ({ ...c, text: text.slice(c.start, c.end), tokens: counted[n], part: partAt(parts, c.start) }));
}

/** The label of the last part starting at or before `offset`. */
function partAt(parts: readonly DocumentPart[], offset: number): string {
  let label = '';
  for (const p of parts) {
    if (p.start > offset) break;
    label = p.label;
  }
  return label;
}

/**
 * Units no larger than `size` tokens, covering the text: paragraphs, or the sentences of a
 * paragraph too long, or runs of words of a sentence too long. Each unit keeps the whitespace
 * that follows it, so units concatenate back to the text.
 */
async function splitUnits(text: string, size: number, count: CountTokens): Promise<Unit[]> {
  const paragraphs = pieces(text, 0, text.length, /\n\s*\n/g);
  return refine(text, paragraphs, size, count, [/(?<=[.!?。])\s+/g, /\s+/g]);
}

async function refine(text: string, spans: [number, number][], size: number, count: CountTokens, separators: RegExp[]): Promise<Unit[]> {
  const tokens = await count(spans.map(([s, e]) => text.slice(s, e)));
  const out: Unit[] = [];
  for (let n = 0; n < spans.length; n++) {
    const [start, end] = spans[n];
    if (tokens[n] <= size || end - start <= 1) {
      out.push({ start, end, tokens: tokens[n] });
      continue;
    }
    const [sep, ...rest] = separators;
    let inner = sep ? pieces(text, start, end, sep) : [];
    if (inner.length <= 1) {
      if (sep) {
        out.push(...(await refine(text, [[start, end]], size, count, rest)));
        continue;
      }
      // No separator left (one huge word): cut in halves by characters.
      const mid = start + Math.floor((end - start) / 2);
      inner = [
        [start, mid],
        [mid, end],
      ];
    } else if (sep === separators[separators.length - 1] && rest.length === 0) {
      // Words: group them into runs of about half a chunk, estimated from the characters.
      inner = groupWords(inner, Math.max(1, Math.floor(((end - start) * size) / (2 * tokens[n]))));
    }
    out.push(...(await refine(text, inner, size, count, rest)));
  }
  return out;
}

/** [start, end) spans of text[from, to) split after each match of `sep` (the separator stays with the piece before it). */
function pieces(text: string, from: number, to: number, sep: RegExp): [number, number][] {
  const out: [number, number][] = [];
  const slice = text.slice(from, to);
  let at = 0;
  for (const m of slice.matchAll(new RegExp(sep.source, 'g'))) {
    const end = m.index + m[0].length;
    if (end > at && m.index > at) {
      out.push([from + at, from + end]);
      at = end;
    }
  }
  if (at < slice.length) out.push([from + at, to]);
  return out;
}

/** Adjacent word spans merged into runs of about `chars` characters. */
function groupWords(words: [number, number][], chars: number): [number, number][] {
  const out: [number, number][] = [];
  for (const [s, e] of words) {
    const last = out[out.length - 1];
    if (last && e - last[0] <= chars) last[1] = e;
    else out.push([s, e]);
  }
  return out;
}
