/**
 * The relevant-parts choice as it was made before chunks were counted lazily (issue 20, item 1),
 * written plainly as the oracle the fast path is checked against: every paragraph counted, a
 * paragraph over the chunk size cut at sentence ends and counted again, a sentence over it cut
 * into runs of words (about half a chunk by the sentence's characters per token), a piece without
 * a separator cut in halves; units packed greedily into chunks with the overlap; every chunk
 * counted whole; BM25 ranking (rank.ts) and greedy selection in rank order within the budget.
 * Only the first round of `fitDocuments` (tests check that its prompt fits, so it is the answer).
 */
import type { CountTokens } from '../../main/documents/chunk.ts';
import { rankChunks } from '../../main/documents/rank.ts';

interface Span {
  start: number;
  end: number;
  tokens: number;
}

/** Spans of text[from, to) ending after each match of `sep` (the separator kept at the end). */
function split(text: string, from: number, to: number, sep: RegExp): [number, number][] {
  const out: [number, number][] = [];
  let at = from;
  for (const m of text.slice(from, to).matchAll(new RegExp(sep.source, 'g'))) {
    const end = from + m.index + m[0].length;
    if (from + m.index > at) {
      out.push([at, end]);
      at = end;
    }
  }
  if (at < to) out.push([at, to]);
  return out;
}

async function units(text: string, spans: [number, number][], size: number, count: CountTokens, level: number): Promise<Span[]> {
  const seps = [/(?<=[.!?。])\s+/g, /\s+/g];
  const tokens = await count(spans.map(([s, e]) => text.slice(s, e)));
  const out: Span[] = [];
  for (let n = 0; n < spans.length; n++) {
    const [s, e] = spans[n];
    if (tokens[n] <= size || e - s <= 1) {
      out.push({ start: s, end: e, tokens: tokens[n] });
      continue;
    }
    let inner = level < seps.length ? split(text, s, e, seps[level]) : [];
    if (inner.length <= 1 && level < seps.length) {
      out.push(...(await units(text, [[s, e]], size, count, level + 1)));
      continue;
    }
    if (inner.length <= 1) {
      const mid = s + Math.floor((e - s) / 2);
      inner = [[s, mid], [mid, e]];
    } else if (level === seps.length - 1) {
      // Runs of words of about half a chunk, by this sentence's characters per token.
      const chars = Math.max(1, Math.floor(((e - s) * size) / (2 * tokens[n])));
      const runs: [number, number][] = [];
      for (const w of inner) {
        const last = runs[runs.length - 1];
        if (last && w[1] - last[0] <= chars) last[1] = w[1];
        else runs.push([w[0], w[1]]);
      }
      inner = runs;
    }
    out.push(...(await units(text, inner, size, count, level + 1)));
  }
  return out;
}

/**
 * The UTF-16 ranges of the chunks the old path put in the prompt, in document order, for one
 * document of `text` (no parts), chunks of `size` tokens with `size / 8` overlap, `budget`
 * tokens for the document, `separator` tokens per chunk.
 */
export async function oldRelevantRanges(text: string, question: string, size: number, budget: number, separator: number, count: CountTokens): Promise<[number, number][]> {
  const us = await units(text, split(text, 0, text.length, /\n\s*\n/g), size, count, 0);
  const chunks: { index: number; start: number; end: number; text: string }[] = [];
  for (let i = 0; i < us.length; ) {
    let j = i;
    let t = 0;
    while (j < us.length && (j === i || t + us[j].tokens <= size)) t += us[j++].tokens;
    chunks.push({ index: chunks.length + 1, start: us[i].start, end: us[j - 1].end, text: text.slice(us[i].start, us[j - 1].end) });
    if (j >= us.length) break;
    let k = j;
    let back = 0;
    while (k - 1 > i && back + us[k - 1].tokens <= size / 8) back += us[--k].tokens;
    i = k;
  }
  const tokens = await count(chunks.map((c) => c.text));
  const chosen: number[] = [];
  let used = 0;
  for (const i of rankChunks(chunks, question)) {
    if (used + tokens[i - 1] + separator > budget) continue;
    chosen.push(i);
    used += tokens[i - 1] + separator;
  }
  return chosen.sort((a, b) => a - b).map((i) => [chunks[i - 1].start, chunks[i - 1].end]);
}
