// See custom_op.h.
#include "custom_op.h"

namespace ropewalk {

OrtStatus* Fail(const std::string& message) { return Ort().CreateStatus(ORT_INVALID_ARGUMENT, message.c_str()); }

OrtStatus* IntAttr(const OrtKernelInfo* info, const char* op, const char* name, int64_t* out) {
  OrtStatus* s = Ort().KernelInfoGetAttribute_int64(info, name, out);
  if (s == nullptr) return nullptr;
  Ort().ReleaseStatus(s);
  return Fail(std::string("ropewalk.") + op + " needs the int attribute " + name);
}

int64_t OptionalAttr(const OrtKernelInfo* info, const char* name, int64_t fallback) {
  int64_t v = fallback;
  if (OrtStatus* s = Ort().KernelInfoGetAttribute_int64(info, name, &v)) {
    Ort().ReleaseStatus(s);
    return fallback;
  }
  return v;
}

std::vector<int64_t> Dims(const OrtValue* v, size_t* count, ONNXTensorElementDataType* type) {
  const OrtApi& api = Ort();
  OrtTensorTypeAndShapeInfo* info = nullptr;
  Check(api.GetTensorTypeAndShape(v, &info), "GetTensorTypeAndShape");
  size_t rank = 0;
  api.GetDimensionsCount(info, &rank);
  std::vector<int64_t> dims(rank);
  api.GetDimensions(info, dims.data(), rank);
  api.GetTensorShapeElementCount(info, count);
  if (type != nullptr) api.GetTensorElementType(info, type);
  api.ReleaseTensorTypeAndShapeInfo(info);
  return dims;
}

OrtStatus* OpenMatMulRun(OrtKernelContext* ctx, const char* op, int64_t k, int64_t n, int weights, MatMulRun* run) {
  const OrtApi& api = Ort();
  const OrtValue* a = nullptr;
  if (OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &a)) return st;
  size_t aCount = 0;
  std::vector<int64_t> dims = Dims(a, &aCount);
  // GetTensorMutableData on inputs: the 1.21 C API has no const accessor; nothing is written.
  for (int i = 0; i < weights; i++) {
    const OrtValue* w = nullptr;
    if (OrtStatus* st = api.KernelContext_GetInput(ctx, static_cast<size_t>(i + 1), &w)) return st;
    Dims(w, &run->counts[i], &run->types[i]);
    Check(api.GetTensorMutableData(const_cast<OrtValue*>(w), const_cast<void**>(&run->data[i])), "GetTensorMutableData");
  }
  if (dims.empty() || dims.back() != k) {
    return Fail(std::string("ropewalk.") + op + ": A's last dimension must be K = " + std::to_string(k) + ", got " +
                (dims.empty() ? std::string("a scalar") : std::to_string(dims.back())));
  }
  run->rows = static_cast<int64_t>(aCount) / k;
  if (run->rows > INT_MAX) return Fail(std::string("ropewalk.") + op + ": " + std::to_string(run->rows) + " rows");
  dims.back() = n;
  OrtValue* out = nullptr;
  if (OrtStatus* st = api.KernelContext_GetOutput(ctx, 0, dims.data(), dims.size(), &out)) return st;
  Check(api.GetTensorMutableData(const_cast<OrtValue*>(a), reinterpret_cast<void**>(const_cast<float**>(&run->x))), "GetTensorMutableData");
  Check(api.GetTensorMutableData(out, reinterpret_cast<void**>(&run->y)), "GetTensorMutableData");
  return nullptr;
}

}  // namespace ropewalk
