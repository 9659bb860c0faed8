// See float_matmul.h.
#include "float_matmul.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "custom_op.h"
#include "gguf_matmul.h"
#include "ort_runtime.h"

namespace ropewalk {

namespace {

/** 16 float32 lanes, lowered by the compiler to the function's ISA (one zmm, two ymm, four xmm). */
typedef float Lanes __attribute__((vector_size(64)));

/**
 * The one dot-product rule every variant compiles (see the header): 4 accumulators of 16 lanes
 * over steps of 64 values, folded (0+2) + (1+3), the lanes summed in order, then the values left
 * over. Inlined into each variant, so its vectors are that variant's registers.
 */
__attribute__((always_inline)) inline void DotRows(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y) {
  const int64_t steps = k / 64 * 64;
  for (int64_t n = n0; n < n1; n++) {
    const float* row = w + n * k;
    Lanes acc[4] = {};
    for (int64_t i = 0; i < steps; i += 64) {
      for (int j = 0; j < 4; j++) {
        Lanes a, b;
        std::memcpy(&a, row + i + 16 * j, sizeof a);
        std::memcpy(&b, x + i + 16 * j, sizeof b);
        acc[j] += a * b;
      }
    }
    const Lanes folded = (acc[0] + acc[2]) + (acc[1] + acc[3]);
    float s = 0;
    for (int l = 0; l < 16; l++) s += folded[l];
    for (int64_t i = steps; i < k; i++) s += row[i] * x[i];
    y[n] = s;
  }
}

}  // namespace

void FloatRowsScalar(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y) { DotRows(x, w, k, n0, n1, y); }

__attribute__((target("avx2,fma"))) void FloatRowsAvx2(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y) {
  DotRows(x, w, k, n0, n1, y);
}

__attribute__((target("avx512f"))) void FloatRowsAvx512(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y) {
  DotRows(x, w, k, n0, n1, y);
}

FloatRowsFn FloatKernel(const char** name) {
  struct Choice {
    FloatRowsFn fn;
    const char* name;
  };
  static const Choice choice = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Choice{FloatRowsAvx512, "avx512"};
    if (CpuHasAvx2Fma()) return Choice{FloatRowsAvx2, "avx2"};
    return Choice{FloatRowsScalar, "scalar"};
  }();
  if (name != nullptr) *name = choice.name;
  return choice.fn;
}

namespace {

/** A MatMulF32 node: its shape. */
struct FloatKernel_ {
  int64_t k = 0, n = 0;
};

OrtStatus* ORT_API_CALL CreateFloatKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  int64_t k = 0, n = 0;
  for (auto [name, out] : {std::pair{"K", &k}, {"N", &n}}) {
    if (OrtStatus* s = IntAttr(info, "MatMulF32", name, out)) return s;
  }
  if (k <= 0 || n <= 0) return Fail("ropewalk.MatMulF32: K and N must be positive, got K " + std::to_string(k) + ", N " + std::to_string(n));
  *kernel = new FloatKernel_{k, n};
  return nullptr;
}

struct FloatJob {
  FloatRowsFn fn;
  const float* x;
  const float* w;
  int64_t k, n, chunk;
  float* y;
};

void FloatRowsTask(void* data, size_t i) {
  auto* j = static_cast<FloatJob*>(data);
  const int64_t n0 = static_cast<int64_t>(i) * j->chunk;
  j->fn(j->x, j->w, j->k, n0, std::min(j->n, n0 + j->chunk), j->y);
}

OrtStatus* ComputeFloat(FloatKernel_* kern, OrtKernelContext* ctx) {
  const int64_t k = kern->k, n = kern->n;
  MatMulRun run;
  if (OrtStatus* st = OpenMatMulRun(ctx, "MatMulF32", k, n, 1, &run)) return st;
  if (static_cast<int64_t>(run.counts[0]) != n * k) {
    return Fail("ropewalk.MatMulF32: B holds " + std::to_string(run.counts[0]) + " values; [" + std::to_string(n) + ", " + std::to_string(k) +
                "] needs " + std::to_string(n * k));
  }
  // Chunks of ~256 KiB of weight rows: long sequential reads, and enough tasks for the pool to balance.
  const int64_t chunk = std::max<int64_t>(1, (256 << 10) / (k * 4));
  for (int64_t r = 0; r < run.rows; r++) {
    FloatJob job{FloatKernel(), run.x + r * k, static_cast<const float*>(run.data[0]), k, n, chunk, run.y + r * n};
    if (OrtStatus* st = Ort().KernelContext_ParallelFor(ctx, FloatRowsTask, static_cast<size_t>((n + chunk - 1) / chunk), 0, &job)) return st;
  }
  return nullptr;
}

}  // namespace

OrtCustomOp* FloatMatMulOp() {
  static OrtCustomOp op = MakeOp<FloatKernel_, ComputeFloat>("MatMulF32", {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT}, CreateFloatKernel);
  return &op;
}

}  // namespace ropewalk
