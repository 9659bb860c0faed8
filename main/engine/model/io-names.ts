/**
 * Every ONNX input and output name of the decoder graph, in one place (graph contract,
 * ARCHITECTURE.md "Graph contract"). One decoder step, batch 1, T new tokens, P = past length:
 *   input_ids        int64   [1, T]
 *   rope_cos         float32 [T, R/2]   RoPE cache rows for positions P … P+T−1
 *   rope_sin         float32 [T, R/2]
 *   seqlens_k        int32   [1]        P + T − 1 (GroupQueryAttention's convention)
 *   total_seq_len    int32   []         P + T
 *   past_key_{i}     float32 [1, Hkv, C, headDim]   KV cache of layer i, capacity C (BNSH)
 *   past_value_{i}   float32 [1, Hkv, C, headDim]
 * outputs:
 *   logits           float32 [1, V]     last position only
 *   present_key_{i}, present_value_{i}  same buffers as past (appended in place)
 */
export const INPUT_IDS = 'input_ids';
export const ROPE_COS = 'rope_cos';
export const ROPE_SIN = 'rope_sin';
export const SEQLENS_K = 'seqlens_k';
export const TOTAL_SEQ_LEN = 'total_seq_len';
export const LOGITS = 'logits';
export const pastKey = (layer: number): string => `past_key_${layer}`;
export const pastValue = (layer: number): string => `past_value_${layer}`;
export const presentKey = (layer: number): string => `present_key_${layer}`;
export const presentValue = (layer: number): string => `present_value_${layer}`;
