// See attention.h.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "custom_op.h"
#include "gguf_matmul.h"
#include "ort_runtime.h"

namespace ropewalk {

namespace {

/** 16 float32 lanes (and their int32 twins), lowered by the compiler to the function's ISA. */
typedef float Lanes __attribute__((vector_size(64)));
typedef int32_t IntLanes __attribute__((vector_size(64)));
typedef float Lanes8 __attribute__((vector_size(32)));
typedef float Lanes4 __attribute__((vector_size(16)));

__attribute__((always_inline)) inline Lanes Load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((always_inline)) inline void Store(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

__attribute__((always_inline)) inline Lanes Splat(float x) { return Lanes{} + x; }

/** The 16 lanes summed as a tree: halves, quarters, then (0 + 2) + (1 + 3). */
__attribute__((always_inline)) inline float Sum(Lanes v) {
  Lanes8 lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  const Lanes8 s8 = lo + hi;
  Lanes4 a, b;
  std::memcpy(&a, &s8, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&s8) + sizeof a, sizeof b);
  const Lanes4 s4 = a + b;
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/**
 * e^x in 16 lanes for x ≤ 0 (a softmax's max-subtracted scores), within 2 ulp of expf: x clamped
 * at −87 (e^−87 ≈ 1.6e−38, the smallest normal's order), x = n·ln2 + r with n the nearest integer
 * to x·log2(e) (the 1.5·2^23 rounding trick), e^r by Cephes' expf polynomial (S. L. Moshier,
 * Cephes Math Library, expf.c), times 2^n built in the exponent bits.
 */
__attribute__((always_inline)) inline Lanes Exp(Lanes x) {
  const Lanes lo = Splat(-87.0f);
  x = x < lo ? lo : x;
  const Lanes magic = Splat(12582912.0f);  // 1.5 · 2^23
  const Lanes n = (x * 1.44269504088896341f + magic) - magic;
  const Lanes r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  Lanes p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const IntLanes bits = (__builtin_convertvector(n, IntLanes) + 127) << 23;
  Lanes scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/** Scalar e^x for the lanes left over, by the same rule as `Exp` (lane 0 of a splat). */
__attribute__((always_inline)) inline float Exp1(float x) { return Exp(Splat(x))[0]; }

/**
 * The one rule every variant compiles (see attention.h): scores of the g query heads against each
 * of the L key rows, the softmax, then the value rows weighted. Vector lanes where hd is a
 * multiple of 16; one value at a time else (stories260K's hd 8).
 */
__attribute__((always_inline)) inline void Head(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale,
                                                float* s, float* out) {
  const bool lanes = hd % 16 == 0;
  for (int64_t t = 0; t < L; t++) {
    const float* kt = k + t * hd;
    for (int64_t j = 0; j < g; j++) {
      const float* qj = q + j * hd;
      float dot = 0;
      if (lanes) {
        Lanes acc{};
        for (int64_t i = 0; i < hd; i += 16) acc += Load(kt + i) * Load(qj + i);
        dot = Sum(acc);
      } else {
        for (int64_t i = 0; i < hd; i++) dot += kt[i] * qj[i];
      }
      s[j * L + t] = dot * scale;
    }
  }
  // softmax per query head: max subtracted, e^x, 1 / Σ applied to the output
  std::vector<float> inv(static_cast<size_t>(g));
  for (int64_t j = 0; j < g; j++) {
    float* sj = s + j * L;
    float mx = sj[0];
    for (int64_t t = 1; t < L; t++) mx = std::max(mx, sj[t]);
    const int64_t whole = L / 16 * 16;
    Lanes sum{};
    for (int64_t t = 0; t < whole; t += 16) {
      const Lanes e = Exp(Load(sj + t) - mx);
      Store(sj + t, e);
      sum += e;
    }
    float total = Sum(sum);
    for (int64_t t = whole; t < L; t++) total += (sj[t] = Exp1(sj[t] - mx));
    inv[j] = 1.0f / total;
  }
  std::fill(out, out + g * hd, 0.0f);
  for (int64_t t = 0; t < L; t++) {
    const float* vt = v + t * hd;
    for (int64_t j = 0; j < g; j++) {
      const float p = s[j * L + t];
      float* oj = out + j * hd;
      if (lanes) {
        const Lanes pv = Splat(p);
        for (int64_t i = 0; i < hd; i += 16) Store(oj + i, Load(oj + i) + pv * Load(vt + i));
      } else {
        for (int64_t i = 0; i < hd; i++) oj[i] += p * vt[i];
      }
    }
  }
  for (int64_t j = 0; j < g; j++) {
    for (int64_t i = 0; i < hd; i++) out[j * hd + i] *= inv[j];
  }
}

}  // namespace

void AttentionHeadScalar(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale, float* s, float* out) {
  Head(q, k, v, g, L, hd, scale, s, out);
}

__attribute__((target("avx2,fma"))) void AttentionHeadAvx2(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale,
                                                           float* s, float* out) {
  Head(q, k, v, g, L, hd, scale, s, out);
}

__attribute__((target("avx512f"))) void AttentionHeadAvx512(const float* q, const float* k, const float* v, int64_t g, int64_t L, int64_t hd, float scale,
                                                           float* s, float* out) {
  Head(q, k, v, g, L, hd, scale, s, out);
}

AttentionHeadFn AttentionKernel(const char** name) {
  struct Choice {
    AttentionHeadFn fn;
    const char* name;
  };
  static const Choice choice = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Choice{AttentionHeadAvx512, "avx512"};
    if (CpuHasAvx2Fma()) return Choice{AttentionHeadAvx2, "avx2"};
    return Choice{AttentionHeadScalar, "scalar"};
  }();
  if (name != nullptr) *name = choice.name;
  return choice.fn;
}

namespace {

/** A DecodeAttention node: its heads, scale, and ONNX Runtime's GroupQueryAttention for a prefill. */
struct AttentionKernel_ {
  int64_t heads = 0, kvHeads = 0;
  float scale = 0;
  OrtOp* prefill = nullptr;
  ~AttentionKernel_() {
    if (prefill != nullptr) Ort().ReleaseOp(prefill);
  }
};

OrtStatus* ORT_API_CALL CreateAttentionKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  const OrtApi& api = Ort();
  int64_t heads = 0, kvHeads = 0;
  for (auto [name, out] : {std::pair{"num_heads", &heads}, {"kv_num_heads", &kvHeads}}) {
    if (OrtStatus* s = IntAttr(info, "DecodeAttention", name, out)) return s;
  }
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0) {
    return Fail("ropewalk.DecodeAttention: num_heads " + std::to_string(heads) + " must be a positive multiple of kv_num_heads " + std::to_string(kvHeads));
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
    ONNXTensorElementDataType types[2] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
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

struct AttentionJob {
  AttentionHeadFn fn;
  const float* q;  // [Hq, hd]
  const float* k;  // present_key [Hkv, C, hd]
  const float* v;
  int64_t group, capacity, length, hd;
  float scale;
  float* out;  // [Hq, hd]
};

void AttentionTask(void* data, size_t h) {
  auto* j = static_cast<AttentionJob*>(data);
  thread_local std::vector<float> scores;
  scores.resize(static_cast<size_t>(j->group * j->length));
  const int64_t kv = static_cast<int64_t>(h) * j->capacity * j->hd;
  const int64_t qh = static_cast<int64_t>(h) * j->group * j->hd;
  j->fn(j->q + qh, j->k + kv, j->v + kv, j->group, j->length, j->hd, j->scale, scores.data(), j->out + qh);
}

float* Data(const OrtValue* v) {
  void* p = nullptr;
  Check(Ort().GetTensorMutableData(const_cast<OrtValue*>(v), &p), "GetTensorMutableData");
  return static_cast<float*>(p);
}

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
  float* presentK = Data(out[1]);
  float* presentV = Data(out[2]);
  const bool shared = presentK == Data(in[3]) && presentV == Data(in[4]);
  if (T != 1 || qDims[0] != 1 || !shared || lensCount != 1) return api.InvokeOp(ctx, kern->prefill, in, 7, out, 3);
  const int64_t pos = *reinterpret_cast<const int32_t*>(Data(in[5]));
  if (pos < 0 || pos >= capacity || static_cast<int64_t>(kCount) != kern->kvHeads * hd) {
    return Fail("ropewalk.DecodeAttention: seqlens_k " + std::to_string(pos) + " for a KV cache of capacity " + std::to_string(capacity) + " and a key of " +
                std::to_string(kCount) + " values (kv_num_heads · head size = " + std::to_string(kern->kvHeads * hd) + ")");
  }
  // The new row of each KV head at position pos, then attention over positions 0 … pos.
  const float* key = Data(in[1]);
  const float* value = Data(in[2]);
  for (int64_t h = 0; h < kern->kvHeads; h++) {
    std::memcpy(presentK + (h * capacity + pos) * hd, key + h * hd, static_cast<size_t>(hd) * sizeof(float));
    std::memcpy(presentV + (h * capacity + pos) * hd, value + h * hd, static_cast<size_t>(hd) * sizeof(float));
  }
  const float scale = kern->scale != 0 ? kern->scale : 1.0f / std::sqrt(static_cast<float>(hd));
  AttentionJob job{AttentionKernel(), Data(in[0]), presentK, presentV, kern->heads / kern->kvHeads, capacity, pos + 1, hd, scale, Data(out[0])};
  return api.KernelContext_ParallelFor(ctx, AttentionTask, static_cast<size_t>(kern->kvHeads), 0, &job);
}

}  // namespace

OrtCustomOp* DecodeAttentionOp() {
  constexpr auto f32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, i32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  static OrtCustomOp op = MakeOp<AttentionKernel_, ComputeAttention>("DecodeAttention", {f32, f32, f32, f32, f32, i32, i32}, CreateAttentionKernel, 3);
  return &op;
}

}  // namespace ropewalk
