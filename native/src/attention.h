// ropewalk.DecodeAttention: GroupQueryAttention whose decode step (one new token) and, on AVX-512
// with head sizes in 16-lane steps, prefill (two tokens or more) are the addon's own kernels, for
// the native backend's float32 CPU graphs (main/engine/model/decoder-graph.ts `usesDecodeAttention`);
// any other prefill runs ONNX Runtime's own com.microsoft.GroupQueryAttention through InvokeOp.
//
// Why: ONNX Runtime 1.30's CPU GroupQueryAttention runs each query head apart, so every key and
// value row of a KV head is read once per query head of its group (twice for Qwen3's 16 / 8),
// and a decode step's attention over 1,072 held positions streamed ~14 GB/s on 2 threads here
// (docs/benchmarks.md). This kernel walks a KV head once for all of its group's query heads.
//
// Contract (the op, domain "ropewalk", version 1, CPU EP):
//   inputs  query float32 [1, T, Hq·hd]; key, value float32 [1, T, Hkv·hd] (the new rows, RoPE
//           applied); past_key, past_value float32 [1, Hkv, C, hd] (the KV cache, C its capacity);
//           seqlens_k int32 [1] = P + T − 1; total_sequence_length int32 [] = P + T.
//   attrs   num_heads (Hq), kv_num_heads (Hkv), scale (float; 0: 1/√hd).
//   outputs output float32 [1, T, Hq·hd]; present_key, present_value float32 [1, Hkv, C, hd].
//   As com.microsoft.GroupQueryAttention (ContribOperators.md) with do_rotary 0, no softcap, no
//   local window, no attention sinks, batch 1: the new rows are written at positions P … P+T−1
//   of present_*, and query head j attends, causally, over KV head j / (Hq / Hkv)'s positions
//   0 … P+t: softmax(scale · q·Kᵀ) · V (Vaswani et al. 2017, "Attention Is All You Need";
//   Ainslie et al. 2023, "GQA"). The decode kernel runs when T = 1 and present_* share past_*'s
//   buffer (the native backend binds them so): per KV head, scores of its query heads against
//   each held key row in one pass (dot products in 16 float32 lanes: GCC's vector extension, one
//   zmm, two ymm or four xmm), a softmax in float32 (max subtracted, exp, sum), then the value
//   rows weighted in one pass; KV heads split over ONNX Runtime's intra-op pool (on the calling
//   thread while the held keys are under 32 Ki floats: the pool's wake-up costs more). The prefill
//   kernel (T ≥ 2, same binding, AVX-512, hd a multiple of 16) writes the T new rows, then per KV
//   head runs its rows (token, query head) in tiles of 16 over the keys each row may see
//   (PrefillHeadFn: FlashAttention-2's online softmax over chunks of 256 keys), a KV head's tiles
//   split over 16 / Hkv tasks of ONNX Runtime's intra-op pool; ONNX Runtime's CPU kernel scores each
//   query head apart over every key of the chunk's last row (~0.8× the time at 1K tokens here).
//   Else the inputs go to ONNX Runtime's kernel as they came.
// Errors: a missing or non-positive attribute, or Hq not a multiple of Hkv, fails the kernel's
// creation; shapes that disagree with the attributes, or positions past the cache's capacity,
// fail the run; each with an OrtStatus naming the value.
#pragma once
#include <onnxruntime_c_api.h>

#include <cstdint>

namespace ropewalk {

/**
 * One KV head's decode attention: q float32 [G, hd] (its group's query heads), k and v float32
 * [L, hd] (the head's held rows, positions 0 … L−1, contiguous), out float32 [G, hd], `scores`
 * scratch of G·L floats. out_g = Σ_t softmax_t(scale · q_g·k_t) v_t.
 */
using AttentionHeadFn = void (*)(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale, float* scores,
                                 float* out);
/** The same over float16 k and v rows (IEEE binary16 bits), widened as they are read. */
using AttentionHeadHalfFn = void (*)(const float* q, const uint16_t* k, const uint16_t* v, int64_t g, int64_t L, int64_t hd, float scale,
                                     float* scores, float* out);

/** The most query heads a KV head may serve (num_heads / kv_num_heads). */
constexpr int64_t kMaxAttentionGroup = 64;

void AttentionHeadScalar(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale, float* scores, float* out);
void AttentionHeadAvx2(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale, float* scores, float* out);
void AttentionHeadAvx512(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale, float* scores, float* out);

void AttentionHeadHalfScalar(const float* q, const uint16_t* k, const uint16_t* v, int64_t g, int64_t L, int64_t hd, float scale, float* s, float* out);
void AttentionHeadHalfAvx2(const float* q, const uint16_t* k, const uint16_t* v, int64_t g, int64_t L, int64_t hd, float scale, float* s, float* out);
void AttentionHeadHalfAvx512(const float* q, const uint16_t* k, const uint16_t* v, int64_t g, int64_t L, int64_t hd, float scale, float* s, float* out);

/**
 * A prefill's attention for one KV head (T ≥ 1 new tokens at positions P … P+T−1): q and out
 * [T, qStride] (query head j of the group, token t at t · qStride + j · hd), k and v [P+T, hd]
 * (the head's rows, the new ones already written). Rows (t, j) go in tiles of 16, token-major;
 * this call runs tiles first, first + step, … (the op splits a head's tiles over tasks). Row (t, j)
 * attends keys 0 … P+t: out = softmax(scale · q·Kᵀ) · V, the softmax as the decode kernel's.
 * Per tile: the keys transposed in blocks of 16 once per call, the scores one vector FMA per
 * row and key dimension, then the values 16 output lanes of all rows at a time. hd a multiple of 16.
 */
using PrefillHeadFn = void (*)(const float* q, int64_t qStride, const float* k, const float* v, int64_t g, int64_t P, int64_t T, int64_t hd, float scale,
                               int64_t first, int64_t step, float* out);
/** The same with q, k, v and out all float16 (IEEE binary16 bits; the float16 op's tensors). */
using PrefillHeadHalfFn = void (*)(const uint16_t* q, int64_t qStride, const uint16_t* k, const uint16_t* v, int64_t g, int64_t P, int64_t T,
                                   int64_t hd, float scale, int64_t first, int64_t step, uint16_t* out);

#define RW_PREFILL_DECLS(Isa)                                                                                                                  \
  void AttentionPrefill##Isa(const float* q, int64_t qStride, const float* k, const float* v, int64_t g, int64_t P, int64_t T, int64_t hd,       \
                             float scale, int64_t first, int64_t step, float* out);                                                            \
  void AttentionPrefillHalf##Isa(const uint16_t* q, int64_t qStride, const uint16_t* k, const uint16_t* v, int64_t g, int64_t P, int64_t T,   \
                                 int64_t hd, float scale, int64_t first, int64_t step, uint16_t* out);
RW_PREFILL_DECLS(Scalar)
RW_PREFILL_DECLS(Avx2)
RW_PREFILL_DECLS(Avx512)
#undef RW_PREFILL_DECLS

/** One ISA's kernels: decode and prefill over float32 and over float16 rows, and its name ("avx512" | "avx2" | "scalar"). */
struct AttentionKernels {
  AttentionHeadFn f32;
  AttentionHeadHalfFn f16;
  PrefillHeadFn prefillF32;
  PrefillHeadHalfFn prefillF16;
  const char* name;
};

/** The fastest ISA this CPU has (AVX-512F, AVX2 + FMA + F16C, or scalar), chosen once. */
AttentionKernels AttentionKernelsHere();

/** The op's tables (see the file comment), for the "ropewalk" domain: float32 and float16 (q/k/v, output and KV cache). */
OrtCustomOp* DecodeAttentionOp();
OrtCustomOp* DecodeAttentionHalfOp();

}  // namespace ropewalk
