/**
 * Ranking chunks against a question with BM25 (MiniSearch's BM25+ scoring, a maintained
 * library), and choosing which chunks fill a token budget.
 *
 * Contract: `rankChunks(chunks, question)` → chunk indexes (1-based), best first; chunks that
 * share no term with the question follow in document order. `selectChunks(chunks, ranking,
 * budget)` takes chunks in rank order while their tokens fit `budget` and returns them in
 * document order, overlaps and all (the caller joins them with the separator it counts).
 * `selectCounted(spans, ranking, budget, separator, count)` is the same choice over chunks not
 * yet counted whole: it counts them in rank order, a batch at a time, and only while they may
 * still fit, so a large document's relevant parts cost the tokens of the chunks considered, not
 * of the document. Ranking needs no tokens.
 */
import MiniSearch from 'minisearch';
import type { Chunk, ChunkSpan, CountTokens } from './chunk.ts';

/** A BM25 index of chunks' texts (build once per chunking: 64,000 chunks take seconds; a search takes milliseconds). */
export type ChunkIndex = MiniSearch<{ id: number; text: string }>;

/** Indexes chunks' texts by their 1-based index. */
export function indexChunks(chunks: readonly Pick<ChunkSpan, 'index' | 'text'>[]): ChunkIndex {
  const index: ChunkIndex = new MiniSearch<{ id: number; text: string }>({ fields: ['text'], idField: 'id' });
  index.addAll(chunks.map((c) => ({ id: c.index, text: c.text })));
  return index;
}

/**
 * Chunk indexes by BM25 relevance to `question` (prefix matches of words of 3+ letters count
 * too, so "rope" finds "ropes"), best first, then the rest in document order. `index` is
 * `indexChunks(chunks)`, built here when not given.
 */
export function rankChunks(chunks: readonly Pick<ChunkSpan, 'index' | 'text'>[], question: string, index: ChunkIndex = indexChunks(chunks)): number[] {
  const hits = index.search(question, { prefix: (term) => term.length >= 3, combineWith: 'OR' });
  // Ties keep document order: MiniSearch sorts by score only.
  hits.sort((a, b) => b.score - a.score || (a.id as number) - (b.id as number));
  const ranked = hits.map((h) => h.id as number);
  const seen = new Set(ranked);
  for (const c of chunks) if (!seen.has(c.index)) ranked.push(c.index);
  return ranked;
}

/**
 * The best chunks whose tokens (each plus `separatorTokens`) add up to at most `budget`, in
 * document order. A chunk that does not fit is skipped and smaller ones further down the ranking
 * may still fill the rest.
 */
export function selectChunks(chunks: readonly Chunk[], ranking: readonly number[], budget: number, separatorTokens = 0): Chunk[] {
  const byIndex = new Map(chunks.map((c) => [c.index, c]));
  const chosen: Chunk[] = [];
  let used = 0;
  for (const i of ranking) {
    const c = byIndex.get(i)!;
    if (used + c.tokens + separatorTokens > budget) continue;
    chosen.push(c);
    used += c.tokens + separatorTokens;
  }
  return chosen.sort((a, b) => a.index - b.index);
}

/** Chunks counted per `count` call while selecting. */
const SELECT_BATCH = 64;
/** Tokens per unit a chunk counted whole may come out below its counted estimate (see selectCounted). */
const SLACK = 3;
/** Most chunks of a measured (estimated) document counted in one selection. */
const MAX_MEASURED_COUNTED = 8 * SELECT_BATCH;

/**
 * `selectChunks` over chunks not yet counted whole: walks `ranking`, counting the chunks' texts
 * (through `count`, SELECT_BATCH at a time) only while they may fit; the walk ends when not even
 * one token is left. A chunk is passed over uncounted when its `estimate` exceeds the tokens left
 * (less the separator) by more than SLACK per unit: a text counted whole differs from the sum of
 * its units' counts by a token or two per unit (a tokenizer's dummy prefix, a merge across the
 * whitespace between them). For `estimated` chunks (measured by characters) the estimate may be
 * off by a share, so twice the tokens left is allowed, and at most MAX_MEASURED_COUNTED chunks are
 * counted: the best-ranked are what matters, and a 5 MB text has 100,000 chunks. Returns the
 * chosen chunks with their exact counts, in document order.
 */
export async function selectCounted(spans: readonly ChunkSpan[], ranking: readonly number[], budget: number, separatorTokens: number, count: CountTokens): Promise<Chunk[]> {
  const byIndex = new Map(spans.map((c) => [c.index, c]));
  const chosen: Chunk[] = [];
  let used = 0;
  let counted = 0;
  const left = () => budget - used - separatorTokens;
  const mayFit = (c: ChunkSpan) => c.estimate <= (c.estimated ? 2 : 1) * left() + SLACK * c.units;
  const mayCount = (c: ChunkSpan) => !c.estimated || counted < MAX_MEASURED_COUNTED;
  for (let at = 0; at < ranking.length && left() >= 1; ) {
    // The next batch of chunks that may fit, counted together.
    const batch: ChunkSpan[] = [];
    for (; at < ranking.length && batch.length < SELECT_BATCH; at++) {
      const c = byIndex.get(ranking[at])!;
      if (mayFit(c) && mayCount(c)) {
        batch.push(c);
        counted++;
      }
    }
    const tokens = await count(batch.map((c) => c.text));
    batch.forEach(({ estimate: _estimate, units: _units, estimated: _estimated, ...c }, n) => {
      if (used + tokens[n] + separatorTokens > budget) return;
      chosen.push({ ...c, tokens: tokens[n] });
      used += tokens[n] + separatorTokens;
    });
  }
  return chosen.sort((a, b) => a.index - b.index);
}
