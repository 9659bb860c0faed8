// See kv_copier.h.
#include "kv_copier.h"

#include <memory>

#include "ort_runtime.h"

namespace ropewalk {

KvCopier::KvCopier(const void* model, size_t bytes, const std::string& ep) {
  const OrtApi& api = Ort();
  OrtSessionOptions* rawOptions = nullptr;
  Check(api.CreateSessionOptions(&rawOptions), "CreateSessionOptions");
  std::unique_ptr<OrtSessionOptions, void (*)(OrtSessionOptions*)> options(rawOptions, api.ReleaseSessionOptions);
  AppendExecutionProvider(options.get(), ep);
  Check(api.CreateSessionFromArray(SharedEnv(), model, bytes, options.get(), &session_), "CreateSessionFromArray(KV copy)");
  if (OrtStatus* status = api.CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &hostInfo_)) {
    api.ReleaseSession(session_);
    Check(status, "CreateCpuMemoryInfo");
  }
}

KvCopier::~KvCopier() {
  const OrtApi& api = Ort();
  if (hostInfo_) api.ReleaseMemoryInfo(hostInfo_);
  if (session_) api.ReleaseSession(session_);
}

void KvCopier::Copy(OrtValue* src, int64_t rows, int64_t dstRows, OrtValue* dst) {
  const OrtApi& api = Ort();
  int64_t ends[1] = {rows};
  int64_t pads[8] = {0, 0, 0, 0, 0, 0, dstRows - rows, 0};
  const int64_t endsDims[1] = {1};
  const int64_t padsDims[1] = {8};
  OrtIoBinding* raw = nullptr;
  Check(api.CreateIoBinding(session_, &raw), "CreateIoBinding(KV copy)");
  std::unique_ptr<OrtIoBinding, void (*)(OrtIoBinding*)> binding(raw, api.ReleaseIoBinding);
  auto bindHost = [&](const char* name, int64_t* data, const int64_t* dims) {
    OrtValue* v = nullptr;
    Check(api.CreateTensorWithDataAsOrtValue(hostInfo_, data, dims[0] * sizeof(int64_t), dims, 1,
                                             ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &v),
          "CreateTensorWithDataAsOrtValue");
    OrtStatus* status = api.BindInput(binding.get(), name, v);
    api.ReleaseValue(v);
    Check(status, "BindInput(KV copy)");
  };
  Check(api.BindInput(binding.get(), "src", src), "BindInput(KV copy)");
  bindHost("ends", ends, endsDims);
  bindHost("pads", pads, padsDims);
  Check(api.BindOutput(binding.get(), "dst", dst), "BindOutput(KV copy)");
  Check(api.RunWithBinding(session_, nullptr, binding.get()), "RunWithBinding(KV copy)");
  Check(api.SynchronizeBoundOutputs(binding.get()), "SynchronizeBoundOutputs(KV copy)");
  runs_++;
}

}  // namespace ropewalk
