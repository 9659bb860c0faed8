// See attention.h.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <string>
#include <type_traits>
#include <vector>

#include "custom_op.h"
#include "gguf_matmul.h"
#include "half.h"
#include "ort_runtime.h"

namespace ropewalk {

// The kernel once per ISA (attention_kernel.inc), each in its own target region and namespace.
namespace isa_scalar {
#define RW_ATTN_ISA 0
#include "attention_kernel.inc"
#undef RW_ATTN_ISA
}  // namespace isa_scalar

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace isa_avx2 {
#define RW_ATTN_ISA 256
#include "attention_kernel.inc"
#undef RW_ATTN_ISA
}  // namespace isa_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")
namespace isa_avx512 {
#define RW_ATTN_ISA 512
#include "attention_kernel.inc"
#undef RW_ATTN_ISA
}  // namespace isa_avx512
#pragma GCC pop_options

// One ISA's exported variants: its Head over float32 and over float16 rows.
#define RW_ATTENTION_VARIANTS(Isa, ns)                                                                                                      \
  void AttentionHead##Isa(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale, float* s, float* out) { \
    ns::Head(q, k, v, g, L, hd, scale, s, out);                                                                                                  \
  }                                                                                                                                              \
  void AttentionHeadHalf##Isa(const float* q, const uint16_t* k, const uint16_t* v, int64_t g, int64_t L, int64_t hd, float scale, float* s,    \
                              float* out) {                                                                                                      \
    ns::Head(q, k, v, g, L, hd, scale, s, out);                                                                                                  \
  }                                                                                                                                              \
  void AttentionPrefill##Isa(const float* q, int64_t qStride, const float* k, const float* v, int64_t g, int64_t P, int64_t T, int64_t hd,      \
                             float scale, int64_t first, int64_t step, float* out) {                                                           \
    ns::PrefillHead(q, qStride, k, v, g, P, T, hd, scale, first, step, out);                                                                   \
  }                                                                                                                                              \
  void AttentionPrefillHalf##Isa(const uint16_t* q, int64_t qStride, const uint16_t* k, const uint16_t* v, int64_t g, int64_t P, int64_t T,  \
                                 int64_t hd, float scale, int64_t first, int64_t step, uint16_t* out) {                                        \
    ns::PrefillHead(q, qStride, k, v, g, P, T, hd, scale, first, step, out);                                                                   \
  }
RW_ATTENTION_VARIANTS(Scalar, isa_scalar)
RW_ATTENTION_VARIANTS(Avx2, isa_avx2)
RW_ATTENTION_VARIANTS(Avx512, isa_avx512)
#undef RW_ATTENTION_VARIANTS

AttentionKernels AttentionKernelsHere() {
  static const AttentionKernels chosen = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && CpuHasAvx2Fma()) return AttentionKernels{AttentionHeadAvx512, AttentionHeadHalfAvx512, AttentionPrefillAvx512, AttentionPrefillHalfAvx512, "avx512"};
    if (CpuHasAvx2Fma()) return AttentionKernels{AttentionHeadAvx2, AttentionHeadHalfAvx2, AttentionPrefillAvx2, AttentionPrefillHalfAvx2, "avx2"};
    return AttentionKernels{AttentionHeadScalar, AttentionHeadHalfScalar, AttentionPrefillScalar, AttentionPrefillHalfScalar, "scalar"};
  }();
  return chosen;
}

namespace {

/** float32 or float16 (IEEE binary16 bits): a DecodeAttention's q/k/v, output and KV cache element. */
template <typename E>
struct Elem;
template <>
struct Elem<float> {
  static constexpr ONNXTensorElementDataType kType = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  static AttentionHeadFn Head() { return AttentionKernelsHere().f32; }
  static PrefillHeadFn Prefill() { return AttentionKernelsHere().prefillF32; }
};
template <>
struct Elem<uint16_t> {
  static constexpr ONNXTensorElementDataType kType = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
  static float Widen(uint16_t x) { return HalfToFloat(x); }
  static uint16_t Narrow(float x) { return FloatToHalf(x); }
  static AttentionHeadHalfFn Head() { return AttentionKernelsHere().f16; }
  static PrefillHeadHalfFn Prefill() { return AttentionKernelsHere().prefillF16; }
};

/** A DecodeAttention node: its heads, scale, and ONNX Runtime's GroupQueryAttention for a prefill. */
struct AttentionKernel_ {
  int64_t heads = 0, kvHeads = 0;
  float scale = 0;
  OrtOp* prefill = nullptr;
  ~AttentionKernel_() {
    if (prefill != nullptr) Ort().ReleaseOp(prefill);
  }
};

template <typename E>
OrtStatus* ORT_API_CALL CreateAttentionKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  const OrtApi& api = Ort();
  int64_t heads = 0, kvHeads = 0;
  for (auto [name, out] : {std::pair{"num_heads", &heads}, {"kv_num_heads", &kvHeads}}) {
    if (OrtStatus* s = IntAttr(info, "DecodeAttention", name, out)) return s;
  }
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0 || heads / kvHeads > kMaxAttentionGroup) {
    return Fail("ropewalk.DecodeAttention: num_heads " + std::to_string(heads) + " must be a positive multiple of kv_num_heads " + std::to_string(kvHeads) +
                ", at most " + std::to_string(kMaxAttentionGroup) + " times it");
  }
  float scale = 0;
  if (OrtStatus* s = api.KernelInfoGetAttribute_float(info, "scale", &scale)) api.ReleaseStatus(s), scale = 0;
  // ONNX Runtime's kernel for a prefill, with the same attributes (do_rotary 0: q and k come rotated).
  const int64_t h = heads, kvh = kvHeads, rotary = 0;
  OrtOpAttr* attrs[4] = {};
  OrtStatus* st = api.CreateOpAttr("num_heads", &h, 1, ORT_OP_ATTR_INT, &attrs[0]);
  if (st == nullptr) st = api.CreateOpAttr("kv_num_heads", &kvh, 1, ORT_OP_ATTR_INT, &attrs[1]);
  if (st == nullptr) st = api.CreateOpAttr("do_rotary", &rotary, 1, ORT_OP_ATTR_INT, &attrs[2]);
  if (st == nullptr) st = api.CreateOpAttr("scale", &scale, 1, ORT_OP_ATTR_FLOAT, &attrs[3]);
  auto* kern = new AttentionKernel_{heads, kvHeads, scale, nullptr};
  if (st == nullptr) {
    const char* typeNames[2] = {"T", "M"};
    ONNXTensorElementDataType types[2] = {Elem<E>::kType, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
    st = api.CreateOp(info, "GroupQueryAttention", "com.microsoft", 1, typeNames, types, 2, attrs, 4, 7, 3, &kern->prefill);
  }
  for (OrtOpAttr* a : attrs) {
    if (a != nullptr) api.ReleaseOpAttr(a);
  }
  if (st != nullptr) {
    delete kern;
    return st;
  }
  *kernel = kern;
  return nullptr;
}

/** Held key values (positions · KV heads · head size) under which a decode step's heads run on the calling thread. */
constexpr int64_t kInlineKeyFloats = 32 << 10;

template <typename E>
struct AttentionJob {
  const E* q;  // [Hq, hd]
  const E* k;  // present_key [Hkv, C, hd]
  const E* v;
  int64_t group, capacity, length, hd;
  float scale;
  E* out;  // [Hq, hd]
};

/**
 * KV head h's query heads through the kernel: float32 q and output as they lie; float16 ones
 * widened into, and narrowed from, this thread's scratch.
 */
template <typename E>
void AttentionTask(void* data, size_t h) {
  auto* j = static_cast<AttentionJob<E>*>(data);
  thread_local std::vector<float> scores, q, out;
  const int64_t n = j->group * j->hd;
  scores.resize(static_cast<size_t>(j->group * j->length));
  const int64_t kv = static_cast<int64_t>(h) * j->capacity * j->hd;
  const int64_t qh = static_cast<int64_t>(h) * n;
  if constexpr (std::is_same_v<E, float>) {
    Elem<E>::Head()(j->q + qh, j->k + kv, j->v + kv, j->group, j->length, j->hd, j->scale, scores.data(), j->out + qh);
  } else {
    q.resize(static_cast<size_t>(n));
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) q[i] = Elem<E>::Widen(j->q[qh + i]);
    Elem<E>::Head()(q.data(), j->k + kv, j->v + kv, j->group, j->length, j->hd, j->scale, scores.data(), out.data());
    for (int64_t i = 0; i < n; i++) j->out[qh + i] = Elem<E>::Narrow(out[i]);
  }
}

/** A prefill's tasks: KV head h = i mod Hkv runs tiles i / Hkv, + groups, … of its rows. */
template <typename E>
struct PrefillJob {
  const E* q;  // [T, Hq·hd]
  const E* k;  // present_key [Hkv, C, hd]
  const E* v;
  int64_t kvHeads, group, capacity, past, tokens, hd, groups;
  float scale;
  E* out;  // [T, Hq·hd]
};

template <typename E>
void PrefillTask(void* data, size_t i) {
  auto* j = static_cast<PrefillJob<E>*>(data);
  const int64_t h = static_cast<int64_t>(i) % j->kvHeads, first = static_cast<int64_t>(i) / j->kvHeads;
  const int64_t qStride = j->kvHeads * j->group * j->hd, qh = h * j->group * j->hd, kv = h * j->capacity * j->hd;
  Elem<E>::Prefill()(j->q + qh, qStride, j->k + kv, j->v + kv, j->group, j->past, j->tokens, j->hd, j->scale, first, j->groups, j->out + qh);
}

/** Tasks per KV head in a prefill: enough for the pool to balance causal tiles of unequal cost. */
constexpr int64_t kPrefillTasks = 16;

/** A prefill of T ≥ 2 tokens on the addon's kernel: the new rows written at P … P+T−1, then every KV head's tiles over the pool. */
template <typename E>
OrtStatus* ComputePrefill(AttentionKernel_* kern, OrtKernelContext* ctx, const OrtValue* const* in, OrtValue* const* out, int64_t T, int64_t capacity,
                          int64_t hd, size_t kCount) {
  const int64_t last = *TensorData<int32_t>(in[5]), past = last - T + 1;
  if (past < 0 || last >= capacity || static_cast<int64_t>(kCount) != T * kern->kvHeads * hd) {
    return Fail("ropewalk.DecodeAttention: seqlens_k " + std::to_string(last) + " for " + std::to_string(T) + " new tokens, a KV cache of capacity " +
                std::to_string(capacity) + " and a key of " + std::to_string(kCount) + " values (tokens · kv_num_heads · head size = " +
                std::to_string(T * kern->kvHeads * hd) + ")");
  }
  E* presentK = TensorData<E>(out[1]);
  E* presentV = TensorData<E>(out[2]);
  const E* key = TensorData<E>(in[1]);
  const E* value = TensorData<E>(in[2]);
  for (int64_t t = 0; t < T; t++) {
    for (int64_t h = 0; h < kern->kvHeads; h++) {
      std::memcpy(presentK + (h * capacity + past + t) * hd, key + (t * kern->kvHeads + h) * hd, static_cast<size_t>(hd) * sizeof(E));
      std::memcpy(presentV + (h * capacity + past + t) * hd, value + (t * kern->kvHeads + h) * hd, static_cast<size_t>(hd) * sizeof(E));
    }
  }
  const float scale = kern->scale != 0 ? kern->scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = kern->heads / kern->kvHeads;
  const int64_t groups = std::max<int64_t>(1, kPrefillTasks / kern->kvHeads);
  PrefillJob<E> job{TensorData<E>(in[0]), presentK, presentV, kern->kvHeads, group, capacity, past, T, hd, groups, scale, TensorData<E>(out[0])};
  return Ort().KernelContext_ParallelFor(ctx, PrefillTask<E>, static_cast<size_t>(kern->kvHeads * groups), 0, &job);
}

template <typename E>
OrtStatus* ComputeAttention(AttentionKernel_* kern, OrtKernelContext* ctx) {
  const OrtApi& api = Ort();
  const OrtValue* in[7] = {};
  for (size_t i = 0; i < 7; i++) {
    if (OrtStatus* st = api.KernelContext_GetInput(ctx, i, &in[i])) return st;
  }
  size_t qCount = 0, pastCount = 0, kCount = 0, lensCount = 0;
  const std::vector<int64_t> qDims = Dims(in[0], &qCount), pastDims = Dims(in[3], &pastCount);
  Dims(in[1], &kCount);
  Dims(in[5], &lensCount);
  if (qDims.size() != 3 || pastDims.size() != 4 || pastDims[1] != kern->kvHeads || qDims[2] != kern->heads * pastDims[3]) {
    return Fail("ropewalk.DecodeAttention: query of " + std::to_string(qCount) + " values and a KV cache of rank " + std::to_string(pastDims.size()) +
                " do not fit num_heads " + std::to_string(kern->heads) + ", kv_num_heads " + std::to_string(kern->kvHeads));
  }
  const int64_t T = qDims[1], capacity = pastDims[2], hd = pastDims[3];
  OrtValue* out[3] = {};
  if (OrtStatus* st = api.KernelContext_GetOutput(ctx, 0, qDims.data(), qDims.size(), &out[0])) return st;
  for (size_t i = 1; i < 3; i++) {
    if (OrtStatus* st = api.KernelContext_GetOutput(ctx, i, pastDims.data(), pastDims.size(), &out[i])) return st;
  }
  E* presentK = TensorData<E>(out[1]);
  E* presentV = TensorData<E>(out[2]);
  const bool shared = presentK == TensorData<E>(in[3]) && presentV == TensorData<E>(in[4]);
  if (qDims[0] != 1 || !shared || lensCount != 1) return api.InvokeOp(ctx, kern->prefill, in, 7, out, 3);
  if (T != 1) {
    // A prefill on the addon's kernel where it runs AVX-512 (measured faster than ONNX Runtime's there), else ONNX Runtime's.
    if (hd % 16 != 0 || AttentionKernelsHere().prefillF32 != AttentionPrefillAvx512) return api.InvokeOp(ctx, kern->prefill, in, 7, out, 3);
    return ComputePrefill<E>(kern, ctx, in, out, T, capacity, hd, kCount);
  }
  const int64_t pos = *TensorData<int32_t>(in[5]);
  if (pos < 0 || pos >= capacity || static_cast<int64_t>(kCount) != kern->kvHeads * hd) {
    return Fail("ropewalk.DecodeAttention: seqlens_k " + std::to_string(pos) + " for a KV cache of capacity " + std::to_string(capacity) + " and a key of " +
                std::to_string(kCount) + " values (kv_num_heads · head size = " + std::to_string(kern->kvHeads * hd) + ")");
  }
  // The new row of each KV head at position pos, then attention over positions 0 … pos.
  const E* key = TensorData<E>(in[1]);
  const E* value = TensorData<E>(in[2]);
  for (int64_t h = 0; h < kern->kvHeads; h++) {
    std::memcpy(presentK + (h * capacity + pos) * hd, key + h * hd, static_cast<size_t>(hd) * sizeof(E));
    std::memcpy(presentV + (h * capacity + pos) * hd, value + h * hd, static_cast<size_t>(hd) * sizeof(E));
  }
  const float scale = kern->scale != 0 ? kern->scale : 1.0f / std::sqrt(static_cast<float>(hd));
  AttentionJob<E> job{TensorData<E>(in[0]), presentK, presentV, kern->heads / kern->kvHeads, capacity, pos + 1, hd, scale, TensorData<E>(out[0])};
  // A short cache's heads on this thread: waking the pool costs more than their work.
  if ((pos + 1) * kern->kvHeads * hd < kInlineKeyFloats) {
    for (int64_t h = 0; h < kern->kvHeads; h++) AttentionTask<E>(&job, static_cast<size_t>(h));
    return nullptr;
  }
  return api.KernelContext_ParallelFor(ctx, AttentionTask<E>, static_cast<size_t>(kern->kvHeads), 0, &job);
}

}  // namespace

OrtCustomOp* DecodeAttentionOp() {
  constexpr auto f32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, i32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  static OrtCustomOp op = MakeOp<AttentionKernel_, ComputeAttention<float>>("DecodeAttention", {f32, f32, f32, f32, f32, i32, i32}, CreateAttentionKernel<float>, 3);
  return &op;
}

OrtCustomOp* DecodeAttentionHalfOp() {
  constexpr auto f16 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, i32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  static OrtCustomOp op =
      MakeOp<AttentionKernel_, ComputeAttention<uint16_t>>("DecodeAttention", {f16, f16, f16, f16, f16, i32, i32}, CreateAttentionKernel<uint16_t>, 3, f16);
  return &op;
}

}  // namespace ropewalk
