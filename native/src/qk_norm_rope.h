// ropewalk.QkNormRope: Qwen3-style per-head RMS norms of q and k, then RoPE on both, as one node
// of the native backend's float32 CPU graphs (main/engine/model/decoder-graph.ts `usesQkNormRope`).
//
// Why: the same work as ONNX Runtime's nodes was eight nodes a layer (for q and for k: Reshape to
// heads, SimplifiedLayerNormalization, Reshape back, com.microsoft.RotaryEmbedding), 224 of the
// ~600 nodes of a Qwen3-0.6B decode step, each a few µs of serial time on one thread while the
// intra-op pool's other thread waits (docs/benchmarks.md); one pass over the rows instead.
//
// Contract (the op, domain "ropewalk", version 1, CPU EP):
//   inputs  query float32 [1, T, Hq·hd]; key float32 [1, T, Hkv·hd]; position_ids int64 [1, T];
//           cos_cache, sin_cache float32 [C_rope, R/2] (RoPE rows by position, R = hd: a whole-head
//           rotary); q_norm, k_norm float32 [hd] (the norms' weights).
//   attrs   num_heads (Hq), kv_num_heads (Hkv), interleaved (0: pairs (i, i + hd/2), GPT-NeoX /
//           Llama-HF layout; 1: pairs (2i, 2i + 1)), epsilon (float, > 0).
//   outputs query, key float32, the inputs' shapes: each head row x [hd] of token t becomes
//           y = x / √(mean(x²) + ε) · w (Zhang & Sennrich 2019, RMSNorm; ONNX Runtime's
//           SimplifiedLayerNormalization, float32 statistics), then each pair (a, b) of y rotated
//           by the angle of position_ids[t]: (a·cos − b·sin, b·cos + a·sin) with cos, sin from
//           row position_ids[t] of the caches (Su et al. 2021, RoFormer; ONNX Runtime's
//           com.microsoft.RotaryEmbedding with rotary_embedding_dim = hd).
//   Tokens split over ONNX Runtime's intra-op pool when T > 1 (one token on the calling thread).
// Errors: a missing attribute, a non-positive head count or epsilon, or an odd head size fails the
// kernel's creation or run; shapes that disagree with the attributes, or a position outside the
// RoPE caches' rows, fail the run; each with an OrtStatus naming the value.
#pragma once
#include <onnxruntime_c_api.h>

#include <cstdint>

namespace ropewalk {

/**
 * One head row through the norm and the rotation (the op's contract): x float32 [hd] → y [hd]
 * (may be x), w [hd], cos and sin [hd/2] (the position's RoPE row).
 */
void QkNormRopeRow(const float* x, const float* w, const float* cos, const float* sin, int64_t hd, bool interleaved, float eps, float* y);

/** The op's table (see the file comment), for the "ropewalk" domain. */
OrtCustomOp* QkNormRopeOp();

}  // namespace ropewalk
