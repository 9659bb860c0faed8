// See qk_norm_rope.h.
#include "qk_norm_rope.h"

#include <cmath>
#include <string>
#include <vector>

#include "custom_op.h"
#include "ort_runtime.h"

namespace ropewalk {

void QkNormRopeRow(const float* x, const float* w, const float* cos, const float* sin, int64_t hd, bool interleaved, float eps, float* y) {
  // Σx² in 8 partial sums (they vectorize; one chain would wait on each add).
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= hd; i += 8) {
    for (int l = 0; l < 8; l++) part[l] += x[i + l] * x[i + l];
  }
  for (; i < hd; i++) part[0] += x[i] * x[i];
  const float sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  // As SimplifiedLayerNormalization: x / √(mean + ε) · w.
  const float rms = std::sqrt(sum / static_cast<float>(hd) + eps);
  const int64_t half = hd / 2;
  if (interleaved) {
    for (int64_t p = 0; p < half; p++) {
      const float a = x[2 * p] / rms * w[2 * p], b = x[2 * p + 1] / rms * w[2 * p + 1];
      y[2 * p] = a * cos[p] - b * sin[p];
      y[2 * p + 1] = b * cos[p] + a * sin[p];
    }
    return;
  }
  for (int64_t p = 0; p < half; p++) {
    const float a = x[p] / rms * w[p], b = x[p + half] / rms * w[p + half];
    y[p] = a * cos[p] - b * sin[p];
    y[p + half] = b * cos[p] + a * sin[p];
  }
}

namespace {

struct QkNormRopeKernel_ {
  int64_t heads = 0, kvHeads = 0;
  bool interleaved = false;
  float eps = 0;
};

OrtStatus* ORT_API_CALL CreateKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  int64_t heads = 0, kvHeads = 0;
  for (auto [name, out] : {std::pair{"num_heads", &heads}, {"kv_num_heads", &kvHeads}}) {
    if (OrtStatus* s = IntAttr(info, "QkNormRope", name, out)) return s;
  }
  if (heads <= 0 || kvHeads <= 0) {
    return Fail("ropewalk.QkNormRope: num_heads and kv_num_heads must be positive, got " + std::to_string(heads) + " and " + std::to_string(kvHeads));
  }
  const int64_t interleaved = OptionalAttr(info, "interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return Fail("ropewalk.QkNormRope: interleaved must be 0 or 1, got " + std::to_string(interleaved));
  float eps = 0;
  if (OrtStatus* s = Ort().KernelInfoGetAttribute_float(info, "epsilon", &eps)) return s;
  if (!(eps > 0)) return Fail("ropewalk.QkNormRope: epsilon must be positive, got " + std::to_string(eps));
  *kernel = new QkNormRopeKernel_{heads, kvHeads, interleaved == 1, eps};
  return nullptr;
}

struct Job {
  const float* in[2];  // query, key [T, H·hd]
  float* out[2];
  int64_t heads[2];
  const int64_t* positions;  // [T]
  const float *cos, *sin;    // [C_rope, hd/2]
  const float* norm[2];      // [hd]
  int64_t hd;
  bool interleaved;
  float eps;
};

/** Token t's query and key heads. */
void TokenTask(void* data, size_t t) {
  const auto* j = static_cast<const Job*>(data);
  const int64_t half = j->hd / 2;
  const float* cos = j->cos + j->positions[t] * half;
  const float* sin = j->sin + j->positions[t] * half;
  for (int which = 0; which < 2; which++) {
    const int64_t row = static_cast<int64_t>(t) * j->heads[which] * j->hd;
    for (int64_t h = 0; h < j->heads[which]; h++) {
      QkNormRopeRow(j->in[which] + row + h * j->hd, j->norm[which], cos, sin, j->hd, j->interleaved, j->eps, j->out[which] + row + h * j->hd);
    }
  }
}

OrtStatus* Compute(QkNormRopeKernel_* kern, OrtKernelContext* ctx) {
  const OrtApi& api = Ort();
  const OrtValue* in[7] = {};
  for (size_t i = 0; i < 7; i++) {
    if (OrtStatus* st = api.KernelContext_GetInput(ctx, i, &in[i])) return st;
  }
  size_t qCount = 0, kCount = 0, posCount = 0, cosCount = 0, sinCount = 0, qnCount = 0, knCount = 0;
  const std::vector<int64_t> qDims = Dims(in[0], &qCount), kDims = Dims(in[1], &kCount), cosDims = Dims(in[3], &cosCount);
  Dims(in[2], &posCount);
  Dims(in[4], &sinCount);
  Dims(in[5], &qnCount);
  Dims(in[6], &knCount);
  const int64_t hd = static_cast<int64_t>(qnCount);
  const bool shapes = qDims.size() == 3 && kDims.size() == 3 && qDims[0] == 1 && kDims[0] == 1 && qDims[1] == kDims[1] && hd > 0 && hd % 2 == 0 &&
                      static_cast<int64_t>(knCount) == hd && qDims[2] == kern->heads * hd && kDims[2] == kern->kvHeads * hd &&
                      static_cast<int64_t>(posCount) == qDims[1] && cosDims.size() == 2 && cosDims[1] == hd / 2 && sinCount == cosCount;
  if (!shapes) {
    return Fail("ropewalk.QkNormRope: query of " + std::to_string(qCount) + " values, key of " + std::to_string(kCount) + ", " + std::to_string(posCount) +
                " positions, norms of " + std::to_string(qnCount) + " and " + std::to_string(knCount) + " and RoPE caches of " + std::to_string(cosCount) + " and " +
                std::to_string(sinCount) + " do not fit num_heads " + std::to_string(kern->heads) + ", kv_num_heads " + std::to_string(kern->kvHeads) +
                " (an even head size, the caches [rows, head size / 2])");
  }
  const int64_t T = qDims[1], rows = cosDims[0];
  const int64_t* positions = TensorData<const int64_t>(in[2]);
  for (int64_t t = 0; t < T; t++) {
    if (positions[t] < 0 || positions[t] >= rows) {
      return Fail("ropewalk.QkNormRope: position " + std::to_string(positions[t]) + " of token " + std::to_string(t) + " is outside the RoPE caches' " +
                  std::to_string(rows) + " rows");
    }
  }
  OrtValue* out[2] = {};
  if (OrtStatus* st = api.KernelContext_GetOutput(ctx, 0, qDims.data(), qDims.size(), &out[0])) return st;
  if (OrtStatus* st = api.KernelContext_GetOutput(ctx, 1, kDims.data(), kDims.size(), &out[1])) return st;
  Job job{{TensorData<const float>(in[0]), TensorData<const float>(in[1])}, {TensorData<float>(out[0]), TensorData<float>(out[1])}, {kern->heads, kern->kvHeads}, positions, TensorData<const float>(in[3]), TensorData<const float>(in[4]),
          {TensorData<const float>(in[5]), TensorData<const float>(in[6])}, hd, kern->interleaved, kern->eps};
  if (T == 1) {
    TokenTask(&job, 0);
    return nullptr;
  }
  return api.KernelContext_ParallelFor(ctx, TokenTask, static_cast<size_t>(T), 0, &job);
}

}  // namespace

OrtCustomOp* QkNormRopeOp() {
  constexpr auto f32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, i64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  static OrtCustomOp op = MakeOp<QkNormRopeKernel_, Compute>("QkNormRope", {f32, f32, i64, f32, f32, f32, f32}, CreateKernel, 2);
  return &op;
}

}  // namespace ropewalk
