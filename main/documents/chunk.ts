/**
 * Chunking a document by tokens, for "use the relevant parts" when a document does not fit.
 *
 * Contract: `splitChunks(text, parts, count, opts)` splits `text` into chunks of at most
 * `opts.chunkTokens` tokens (as `count` measures the units they are made of: the engine's
 * tokenizer), cut on paragraph boundaries (blank lines) where possible, else on sentence ends,
 * else between words; each chunk after the first repeats the previous chunk's last units up to
 * `opts.overlapTokens`, so a sentence cut at a boundary is whole in one of them. Every character
 * of `text` is in some chunk, in order. Each chunk carries its 1-based number, character range,
 * `estimate` (the sum of its units' counts: the text is tokenized unit by unit, never whole) and
 * the label of the part (PDF page, Markdown section) where it starts. `chunkDocument` is the
 * same with every chunk's exact count (`tokens`: its text counted as one piece); the relevant
 * path counts only the chunks it considers (rank.ts `selectCounted`).
 * Each level's pieces (paragraphs, sentences, runs of words) go to `count` in one batch; a piece
 * too long to be a chunk by its characters alone is cut without being counted; so with a
 * caching counter (token-cache.ts) nothing is tokenized twice and no huge text is tokenized whole.
 * A text longer than `exactChars` (256 Ki characters) is not counted unit by unit at all: its
 * units are measured in characters over the characters per token of its first 16 Ki
 * characters, so chunking 5 MB tokenizes 16 KB; its chunks are `estimated` and only those the
 * selection considers are ever counted. Up to `exactChars` the chunks are exactly as counted.
 */
import type { DocumentPart } from './extract.ts';

/** A chunk as split, before its text is counted whole. */
export interface ChunkSpan {
  /** 1-based, in document order. */
  index: number;
  /** UTF-16 offsets into the document's text: [start, end). */
  start: number;
  end: number;
  text: string;
  /** Sum of its units' token counts (≤ chunkTokens); its text counted whole differs by a token or two per unit boundary. */
  estimate: number;
  /** Units (paragraphs, sentences, runs of words) it is made of. */
  units: number;
  /** Whether `estimate` is measured from characters (a text longer than `exactChars`), not counted. */
  estimated: boolean;
  /** The page or section where the chunk starts ('' when the document has no parts). */
  part: string;
}

/** A chunk with its exact count. */
export interface Chunk extends Omit<ChunkSpan, 'estimate' | 'units' | 'estimated'> {
  /** Tokens of `text` alone. */
  tokens: number;
}

export interface ChunkOptions {
  /** Most tokens per chunk (default 256). */
  chunkTokens?: number;
  /** Tokens repeated from the end of the previous chunk (default 32). */
  overlapTokens?: number;
  /** Longer texts are measured by characters, not counted unit by unit (default EXACT_CHARS). */
  exactChars?: number;
}

/** Token count of a piece of text (the engine's tokenizer, without BOS). */
export type CountTokens = (texts: string[]) => Promise<number[]>;

interface Unit {
  start: number;
  end: number;
  tokens: number;
}

/**
 * Splits `text` into chunks, each counted whole (see the file comment).
 * @throws RangeError when chunkTokens < 8 or overlapTokens ≥ chunkTokens / 2.
 */
export async function chunkDocument(text: string, parts: readonly DocumentPart[], count: CountTokens, opts: ChunkOptions = {}): Promise<Chunk[]> {
  const spans = await splitChunks(text, parts, count, opts);
  const counted = await count(spans.map((c) => c.text));
  return spans.map(({ estimate: _estimate, units: _units, estimated: _estimated, ...c }, n) => ({ ...c, tokens: counted[n] }));
}

/**
 * Splits `text` into chunks without counting them whole (see the file comment).
 * @throws RangeError when chunkTokens < 8 or overlapTokens ≥ chunkTokens / 2.
 */
export async function splitChunks(text: string, parts: readonly DocumentPart[], count: CountTokens, opts: ChunkOptions = {}): Promise<ChunkSpan[]> {
  const size = opts.chunkTokens ?? 256;
  const overlap = opts.overlapTokens ?? 32;
  if (!(size >= 8)) throw new RangeError(`chunk size must be at least 8 tokens, got ${size}`);
  if (!(overlap >= 0 && overlap < size / 2)) throw new RangeError(`overlap must be in [0, ${size / 2}) tokens, got ${overlap}`);
  const { units, estimated } = await splitUnits(text, size, count, opts.exactChars ?? EXACT_CHARS);
  const chunks: ChunkSpan[] = [];
  let i = 0;
  while (i < units.length) {
    // 1. Take units while they fit.
    let j = i;
    let tokens = 0;
    while (j < units.length && (j === i || tokens + units[j].tokens <= size)) tokens += units[j++].tokens;
    chunks.push({ index: chunks.length + 1, start: units[i].start, end: units[j - 1].end, text: '', estimate: tokens, units: j - i, estimated, part: '' });
    if (j >= units.length) break;
    // 2. The next chunk starts with the last units of this one, up to the overlap.
    let k = j;
    let back = 0;
    while (k - 1 > i && back + units[k - 1].tokens <= overlap) back += units[--k].tokens;
    i = k;
  }
  // Chunks start in document order, so one pass over the parts labels them all.
  let p = -1;
  return chunks.map((c) => {
    while (p + 1 < parts.length && parts[p + 1].start <= c.start) p++;
    return { ...c, text: text.slice(c.start, c.end), part: p >= 0 ? parts[p].label : '' };
  });
}

/** Where a unit is cut when too long: sentence ends, then between words (then in halves). */
const SEPARATORS = [/(?<=[.!?。])\s+/g, /\s+/g];

/**
 * A piece longer than this many characters per token of a chunk is cut without being counted:
 * no tokenizer's pieces average 64 characters, and counting megabytes as one text costs more
 * than linear time (a 256 KB paragraph takes 1.7 s with stories260K's tokenizer, 256 sentences
 * of it 0.4 s).
 */
const MAX_CHARS_PER_TOKEN = 64;
/** Texts up to this many characters are chunked by counting every unit (0.6 s at 256 K with stories260K's tokenizer on a quiet machine). */
export const EXACT_CHARS = 256 * 1024;
/** Characters of a longer text counted to learn its characters per token. */
const SAMPLE_CHARS = 16 * 1024;

interface Piece {
  start: number;
  end: number;
  /** Index into SEPARATORS of the next way to cut it (past the end: in halves). */
  level: number;
  /** Its count (or measure); Infinity when longer than a chunk by its characters alone (not counted). */
  tokens?: number;
}

/**
 * Units no larger than `size` tokens, covering the text: paragraphs, or the sentences of a
 * paragraph too long, or runs of words of a sentence too long. Each unit keeps the whitespace
 * that follows it, so units concatenate back to the text. Level by level, so each level's
 * pieces go to `count` in one batch (one worker round trip, not one per long paragraph). A text
 * longer than `exactChars` is measured, not counted: every piece's tokens are its characters
 * over the characters per token of the text's first SAMPLE_CHARS (the only part tokenized).
 */
async function splitUnits(text: string, size: number, count: CountTokens, exactChars: number): Promise<{ units: Unit[]; estimated: boolean }> {
  let found: Piece[] = pieces(text, 0, text.length, /\n\s*\n/g).map(([start, end]) => ({ start, end, level: 0 }));
  const charsPerToken = text.length > exactChars ? await sampleCharsPerToken(text, count) : null;
  for (;;) {
    for (const p of found) {
      if (p.tokens !== undefined) continue;
      const chars = p.end - p.start;
      if (charsPerToken !== null) p.tokens = Math.max(1, Math.round(chars / charsPerToken));
      else if (chars > size * MAX_CHARS_PER_TOKEN) p.tokens = Infinity;
    }
    const uncounted = found.filter((p) => p.tokens === undefined);
    const counted = await count(uncounted.map((p) => text.slice(p.start, p.end)));
    uncounted.forEach((p, n) => (p.tokens = counted[n]));
    let cut = false;
    const next: Piece[] = [];
    for (const p of found) {
      if (p.tokens! <= size || p.end - p.start <= 1) next.push(p);
      else {
        cut = true;
        next.push(...cutPiece(text, p, size));
      }
    }
    found = next;
    if (!cut) return { units: found as Unit[], estimated: charsPerToken !== null };
  }
}

/** Characters per token of the text's first SAMPLE_CHARS (cut back to a space), counted once. */
export async function sampleCharsPerToken(text: string, count: CountTokens): Promise<number> {
  let end = Math.min(text.length, SAMPLE_CHARS);
  const space = text.lastIndexOf(' ', end);
  if (end < text.length && space > end / 2) end = space;
  const [tokens] = await count([text.slice(0, end)]);
  return end / Math.max(1, tokens);
}

/** The pieces a too-long piece is cut into, at its level's separator (uncounted, but a piece that does not cut keeps its count). */
function cutPiece(text: string, p: Piece, size: number): Piece[] {
  const sep = SEPARATORS[p.level];
  const level = p.level + 1;
  let inner = sep ? pieces(text, p.start, p.end, sep) : [];
  if (inner.length <= 1) {
    // Nothing to cut at here: the next separator, else (one huge word) halves by characters.
    if (sep) return [{ ...p, level }];
    const mid = p.start + Math.floor((p.end - p.start) / 2);
    inner = [
      [p.start, mid],
      [mid, p.end],
    ];
  } else if (level === SEPARATORS.length) {
    // Words: group them into runs of about half a chunk, estimated from the characters (4 a token when not counted).
    const tokens = Number.isFinite(p.tokens) ? p.tokens! : (p.end - p.start) / 4;
    inner = groupWords(inner, Math.max(1, Math.floor(((p.end - p.start) * size) / (2 * tokens))));
  }
  return inner.map(([start, end]) => ({ start, end, level }));
}

/** [start, end) spans of text[from, to) split after each match of `sep` (the separator stays with the piece before it). */
export function pieces(text: string, from: number, to: number, sep: RegExp): [number, number][] {
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
