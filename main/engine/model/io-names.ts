/**
 * Every ONNX input and output name of the decoder graph, in one place (graph contract,
 * docs/ARCHITECTURE.md "Graph contract"). One decoder step, batch 1, T new tokens, P = past length:
 *   input_ids        int64   [1, T]
 *   rope_cos_cache   float32 [C_rope, R/2]  the whole RoPE cache (RopeCache.tables), C_rope ≥ P + T;
 *   rope_sin_cache   float32 [C_rope, R/2]  the graph gathers rows P … P+T−1 itself, so a backend
 *                                           binds these once per RoPE growth, not per step
 *   seqlens_k        int32   [1]        P + T − 1 (GroupQueryAttention's convention); also what the
 *                                       graph derives the step's positions from (P + t = seqlens_k
 *                                       − (T − 1 − t)), so after a context shift positions follow P
 *   total_seq_len    int32   []         P + T
 *   seqlens_k_window, total_seq_len_window   int32 [1], []: the same for the sliding-window
 *                                       layers (only in a graph that has some), whose KV buffers
 *                                       hold positions [S, P) from row 0 (cache/kv-window.ts):
 *                                       (P − S) + T − 1 and (P − S) + T; S = 0 (no bound) gives
 *                                       the global values
 *   past_key_{i}     float32 [1, Hkv, C, headDim]   KV cache of layer i, capacity C (BNSH)
 *   past_value_{i}   float32 [1, Hkv, C, headDim]     (a sliding-window layer: [1, Hkv, C_window, headDim])
 * outputs:
 *   logits           float32 [1, V]     last position only
 *   new_key_{i}      float32 [1, T, Hkv·headDim]  layer i's keys of the T new positions (after
 *   new_value_{i}    float32 [1, T, Hkv·headDim]  RoPE) and values: what a backend that cannot
 *                                                 bind present to past writes into its KV cache
 *   present_key_{i}, present_value_{i}  [1, Hkv, C, headDim]: bound to the past buffers, the
 *                                       new positions are appended in place (IoBinding)
 */
export const INPUT_IDS = 'input_ids';
export const ROPE_COS_CACHE = 'rope_cos_cache';
export const ROPE_SIN_CACHE = 'rope_sin_cache';
export const SEQLENS_K = 'seqlens_k';
export const TOTAL_SEQ_LEN = 'total_seq_len';
export const SEQLENS_K_WINDOW = 'seqlens_k_window';
export const TOTAL_SEQ_LEN_WINDOW = 'total_seq_len_window';
export const LOGITS = 'logits';
export const pastKey = (layer: number): string => `past_key_${layer}`;
export const pastValue = (layer: number): string => `past_value_${layer}`;
export const newKey = (layer: number): string => `new_key_${layer}`;
export const newValue = (layer: number): string => `new_value_${layer}`;
export const presentKey = (layer: number): string => `present_key_${layer}`;
export const presentValue = (layer: number): string => `present_value_${layer}`;
