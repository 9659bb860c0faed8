/**
 * Ranking chunks against a question with BM25 (MiniSearch's BM25+ scoring, a maintained
 * library), and choosing which chunks fill a token budget.
 *
 * Contract: `rankChunks(chunks, question)` → chunk indexes (1-based), best first; chunks that
 * share no term with the question follow in document order. `selectChunks(chunks, ranking,
 * budget)` takes chunks in rank order while their tokens fit `budget` and returns them in
 * document order, overlaps and all (the caller joins them with the separator it counts).
 */
import MiniSearch from 'minisearch';
import type { Chunk } from './chunk.ts';

/**
 * Chunk indexes by BM25 relevance to `question` (prefix matches of words of 3+ letters count
 * too, so "rope" finds "ropes"), best first, then the rest in document order.
 */
export function rankChunks(chunks: readonly Chunk[], question: string): number[] {
  const index = new MiniSearch<{ id: number; text: string }>({ fields: ['text'], idField: 'id' });
  index.addAll(chunks.map((c) => ({ id: c.index, text: c.text })));
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
