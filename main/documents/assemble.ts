/**
 * Fitting documents into a prompt: the whole text while it fits, else (for documents attached
 * with fit 'relevant') the chunks that rank best against the question.
 *
 * Contract: `fitDocuments({ counter, render, attachments, question, room })` → the prompt
 * messages and, when some document was cut, the parts used ("rope.pdf: page 3, chunk 5").
 * Each body is labelled for citations (citations.ts): a page or section under `[rope.pdf p. 3]`.
 *   1. Whole: every document as its full text; if no document may be cut, or the rendered
 *      prompt's token count ≤ `room`, that is the prompt (the caller's budget says if it fits;
 *      whole documents over EXACT_CHARS that surely do not fit come `measured`, not counted).
 *      The whole prompt is counted only when the 'relevant' documents' chunk estimates leave it
 *      a chance (≤ 2 × room): a 5 MB text is never tokenized whole to learn that it is too long.
 *   2. Relevant: count the prompt with the 'relevant' documents empty; the rest of `room` is
 *      shared between them in proportion to their size; each takes its best BM25 chunks (in
 *      document order) within its share, counting only the chunks it considers (rank.ts
 *      `selectCounted`); the prompt is recounted with the real template and the shares shrunk
 *      by the overshoot until it fits (at most FIT_ROUNDS counts).
 * Every piece is counted through the chunk cache's `TokenCountCache` (by content hash and
 * `tokenizer`), so a paragraph, sentence or chunk is tokenized at most once across rounds,
 * questions and documents with the same text.
 * The caller renders (its chat template, its history rules); this module only decides bodies.
 */
import type { ChatMessage } from '../engine/generate/types.ts';
import { EXACT_CHARS, sampleCharsPerToken, splitChunks, type ChunkSpan, type CountTokens } from './chunk.ts';
import { labelledBody, passagesOf, wholeBody, type Passage } from './citations.ts';
import type { DocumentPart } from './extract.ts';
import { chunkLabel } from './prompt.ts';
import { indexChunks, rankChunks, selectCounted, type ChunkIndex } from './rank.ts';
import { TokenCountCache } from './token-cache.ts';

/** The engine's token counts (EngineHost has these). */
export interface TokenCounter {
  /** Tokens of a prompt as the model is fed it (template, BOS). */
  countTokens(request: { messages: ChatMessage[] }): Promise<number>;
  /** Tokens of plain texts, without BOS or template. */
  countEach(texts: string[]): Promise<number[]>;
}

/** A document as the prompt uses it. `key` identifies its text for the chunk cache (id + model). */
export interface AttachedText {
  key: string;
  name: string;
  text: string;
  parts: readonly DocumentPart[];
  fit: 'whole' | 'relevant';
}

export interface FitResult {
  messages: ChatMessage[];
  /** The body each attachment got, in the order given. */
  bodies: string[];
  /** The labelled passages of each body (citations.ts), in the order given. */
  passages: Passage[][];
  /** Parts used when some document was cut to its relevant chunks; null when all are whole. */
  documentParts: string[] | null;
  /** For each of `documentParts`: the attachment (index in the order given) and the chunk's UTF-16 range. */
  usedRanges: { attachment: number; start: number; end: number }[] | null;
  /**
   * Set when whole documents are too long to count and surely do not fit (each over EXACT_CHARS,
   * together measured at over twice the room): the prompt's tokens are then
   * countTokens(measured.messages) (the prompt with those documents empty) + measured.tokens,
   * an estimate; null when the prompt is to be counted as it is.
   */
  measured: { messages: ChatMessage[]; tokens: number } | null;
}

/** Recounts allowed while shrinking the relevant parts to fit. */
const FIT_ROUNDS = 4;

/**
 * Chunk size for "use the relevant parts", tokens: an eighth of the room, as a power of two in
 * [32, 256], so even a small max context holds several chunks (and only a few sizes are
 * cached); the overlap is an eighth of a chunk.
 */
export function chunkTokensFor(room: number): number {
  const target = Math.max(32, Math.min(256, Math.floor(room / 8)));
  return 2 ** Math.floor(Math.log2(target));
}

/** A document's chunks and their BM25 index (built on first use: a document that fits whole needs none). */
interface Chunked {
  spans: ChunkSpan[];
  index: () => ChunkIndex;
}

function chunked(spans: ChunkSpan[]): Chunked {
  let index: ChunkIndex | null = null;
  return { spans, index: () => (index ??= indexChunks(spans)) };
}

/**
 * Chunks of documents by key and chunk size, for the last few documents, and the token counts of
 * their pieces (`counts`, by content hash and tokenizer).
 */
export class ChunkCache {
  private readonly entries = new Map<string, { chunked: Promise<Chunked>; chars: number }>();
  private chars = 0;
  readonly counts: TokenCountCache;
  /**
   * @param capacity most documents (by key and chunk size) kept
   * @param maxChars most characters of their texts kept together (the chunks and BM25 index of
   *   a 5 MB text take about 170 MiB), the oldest leaving first; the latest always stays
   */
  constructor(
    private readonly capacity = 8,
    counts = new TokenCountCache(),
    private readonly maxChars = 16 * 1024 * 1024,
  ) {
    this.counts = counts;
  }

  /** A counter for `tokenizer` through the count cache. */
  counter(tokenizer: string, counter: TokenCounter): CountTokens {
    return this.counts.counter(tokenizer, (texts) => counter.countEach(texts));
  }

  /** `d`'s chunks of `size` tokens (their units counted by `count`) and their BM25 index, computed once per key and size. */
  get(d: AttachedText, size: number, count: CountTokens): Promise<Chunked> {
    const key = `${d.key}\u0000${size}`;
    const hit = this.entries.get(key);
    if (hit) return hit.chunked;
    const made = splitChunks(d.text, d.parts, count, { chunkTokens: size, overlapTokens: size / 8 }).then(chunked);
    this.entries.set(key, { chunked: made, chars: d.text.length });
    this.chars += d.text.length;
    made.catch(() => this.entries.get(key)?.chunked === made && this.drop(key));
    while (this.entries.size > 1 && (this.entries.size > this.capacity || this.chars > this.maxChars)) this.drop(this.entries.keys().next().value!);
    return made;
  }

  /** Documents kept now (for tests). */
  get size(): number {
    return this.entries.size;
  }

  private drop(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.chars -= e.chars;
  }
}

/** See the file comment. `render(body)` renders the whole prompt with each document's body. */
export async function fitDocuments(opts: {
  counter: TokenCounter;
  render: (body: (a: AttachedText) => string) => ChatMessage[];
  attachments: readonly AttachedText[];
  question: string;
  room: number;
  cache: ChunkCache;
  /** Names the tokenizer `counter` counts with (the model bundle), for the count cache; '' by default. */
  tokenizer?: string;
}): Promise<FitResult> {
  const { counter, render, room } = opts;
  const count = opts.cache.counter(opts.tokenizer ?? '', counter);
  // Every document whole, each page or section under its citation label.
  const wholes = new Map(opts.attachments.map((a) => [a, wholeBody(a.name, a.text, a.parts)]));
  const wholeOf = (a: AttachedText) => wholes.get(a)!;
  const whole = render((a) => wholeOf(a).body);
  const relevant = opts.attachments.filter((a) => a.fit === 'relevant');
  const bodiesOf = (body: (a: AttachedText) => string) => opts.attachments.map(body);
  const wholeResult = (measured: FitResult['measured'] = null): FitResult => ({ messages: whole, bodies: bodiesOf((a) => wholeOf(a).body), passages: opts.attachments.map((a) => wholeOf(a).passages), documentParts: null, usedRanges: null, measured });
  if (relevant.length === 0) {
    // Whole documents of megabytes: measured, not counted (one encode of 5 MB takes minutes), when surely too long.
    const huge = opts.attachments.filter((a) => a.text.length > EXACT_CHARS);
    const tokens = (await Promise.all(huge.map(async (a) => Math.round(a.text.length / (await sampleCharsPerToken(a.text, count)))))).reduce((n, t) => n + t, 0);
    return wholeResult(huge.length > 0 && tokens > 2 * room ? { messages: render((a) => (huge.includes(a) ? '' : wholeOf(a).body)), tokens } : null);
  }
  const size = chunkTokensFor(room);
  const indexed = await Promise.all(relevant.map((a) => opts.cache.get(a, size, count)));
  const chunked = indexed.map((c) => c.spans);
  // Each document's size: its chunks' estimates, overlaps and all (at most an eighth more than its tokens).
  const sizes = chunked.map((chunks) => chunks.reduce((n, c) => n + c.estimate, 0));
  const totalSize = sizes.reduce((n, s) => n + s, 0) || 1;
  if (totalSize <= 2 * room && (await counter.countTokens({ messages: whole })) <= room) return wholeResult();

  const isCut = (a: AttachedText) => relevant.includes(a);
  const withoutRelevant = await counter.countTokens({ messages: render((a) => (isCut(a) ? '' : wholeOf(a).body)) });
  // What a chunk's label and the blank line before it cost, for the selection (the recount is exact).
  const [separator] = await count(['\n\n[document.pdf p. 10]\n']);
  const rankings = indexed.map((c) => rankChunks(c.spans, opts.question, c.index()));
  let avail = room - withoutRelevant;
  const empty = (a: AttachedText) => (isCut(a) ? '' : wholeOf(a).body);
  const keptPassages = (a: AttachedText) => (isCut(a) ? [] : wholeOf(a).passages);
  let best: FitResult = { messages: render(empty), bodies: bodiesOf(empty), passages: opts.attachments.map(keptPassages), documentParts: [], usedRanges: [], measured: null };
  for (let round = 0; round < FIT_ROUNDS && avail > 0; round++) {
    const chosen = await Promise.all(chunked.map((chunks, i) => selectCounted(chunks, rankings[i], Math.floor((avail * sizes[i]) / totalSize), separator, count)));
    // Each chosen chunk as passages, cut where a page or section starts inside it.
    const cut = relevant.map((a, i) => chosen[i].flatMap((c) => passagesOf(a.name, a.text, a.parts, c.start, c.end)));
    const passagesFor = (a: AttachedText) => (isCut(a) ? cut[relevant.indexOf(a)] : wholeOf(a).passages);
    const body = (a: AttachedText) => (isCut(a) ? labelledBody(a.text, passagesFor(a)) : wholeOf(a).body);
    const messages = render(body);
    const used = await counter.countTokens({ messages });
    best = {
      messages,
      bodies: bodiesOf(body),
      passages: opts.attachments.map(passagesFor),
      documentParts: relevant.flatMap((a, i) => chosen[i].map((c) => `${a.name}: ${chunkLabel(c)}`)),
      usedRanges: relevant.flatMap((a, i) => chosen[i].map((c) => ({ attachment: opts.attachments.indexOf(a), start: c.start, end: c.end }))),
      measured: null,
    };
    if (used <= room) return best;
    avail -= used - room + separator;
  }
  // Not even the other turns fit: the smallest try; the caller's count shows it does not fit.
  return best;
}
