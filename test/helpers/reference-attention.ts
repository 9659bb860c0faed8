/**
 * Test helper: one query head's causal attention for the reference forward (reference-forward.ts),
 * float64, written from the papers and gpt-oss's reference implementation, not from the graph:
 *   s_j = q·k_j · scale, then c·tanh(s_j / c) when a soft-cap c > 0 (Gemma 2), for the keys j in
 *   [first, last] (a sliding window narrows `first`);
 *   p_j = exp(s_j − m) / Σ_k exp(s_k − m)                              (Vaswani et al. 2017), or with
 *   an attention sink σ (gpt-oss `model.py` `sdpa`: the sink is concatenated to each row of scores
 *   as one more column, the softmax taken over the row, the column dropped; transformers
 *   `modeling_gpt_oss.py` `eager_attention_forward` the same):
 *   p_j = exp(s_j − m) / (exp(σ − m) + Σ_k exp(s_k − m)),  m = max(σ, max_k s_k),
 *   the sink neither scaled nor capped; out += Σ_j p_j · v_j.
 */

/** Where one head's query, keys and values lie, and how its scores are formed. */
export interface HeadAttention {
  /** The query vectors [.., headDim] and this head's offset in them. */
  q: Float64Array;
  qOffset: number;
  /** KV cache [positions, kvDim] row-major, and the kv head's offset inside a row. */
  keys: Float64Array;
  values: Float64Array;
  kvDim: number;
  kvOffset: number;
  headDim: number;
  /** Keys first … last (inclusive) are attended. */
  first: number;
  last: number;
  scale: number;
  /** c of c·tanh(s / c); 0 = none. */
  softcap: number;
  /** The head's sink logit σ; undefined = none. */
  sink?: number;
}

/** Adds head `a`'s attention output [headDim] into out[outOffset ..). */
export function attendHead(a: HeadAttention, out: Float64Array, outOffset: number): void {
  const n = a.last - a.first + 1;
  const scores = new Float64Array(n);
  let max = a.sink ?? -Infinity;
  for (let j = 0; j < n; j++) {
    const ko = (a.first + j) * a.kvDim + a.kvOffset;
    let dot = 0;
    for (let d = 0; d < a.headDim; d++) dot += a.q[a.qOffset + d] * a.keys[ko + d];
    const s = dot * a.scale;
    scores[j] = a.softcap > 0 ? a.softcap * Math.tanh(s / a.softcap) : s;
    if (scores[j] > max) max = scores[j];
  }
  let sum = a.sink === undefined ? 0 : Math.exp(a.sink - max);
  for (let j = 0; j < n; j++) {
    scores[j] = Math.exp(scores[j] - max);
    sum += scores[j];
  }
  for (let j = 0; j < n; j++) {
    const p = scores[j] / sum;
    const vo = (a.first + j) * a.kvDim + a.kvOffset;
    for (let d = 0; d < a.headDim; d++) out[outOffset + d] += p * a.values[vo + d];
  }
}
