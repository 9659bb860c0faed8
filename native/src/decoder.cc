// See decoder.h.
#include "decoder.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "ort_runtime.h"

namespace ropewalk {
namespace {

template <typename T>
using Owned = std::unique_ptr<T, void (*)(T*)>;

// cudaMemcpy2D from the CUDA runtime the CUDA provider itself needs (libcudart.so.12); loaded
// only on CUDA, and only at the first growth that has rows to keep. ORT 1.21's C API has no
// device-to-device copy of its own.
using CudaMemcpy2D = int (*)(void*, size_t, const void*, size_t, size_t, size_t, int);
constexpr int kCudaMemcpyHostToDevice = 1;
constexpr int kCudaMemcpyDeviceToHost = 2;
constexpr int kCudaMemcpyDeviceToDevice = 3;

CudaMemcpy2D LoadCudaMemcpy2D() {
  static CudaMemcpy2D fn = nullptr;
  if (fn != nullptr) return fn;
  void* lib = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw OrtError(std::string("dlopen libcudart.so.12: ") + dlerror());
  fn = reinterpret_cast<CudaMemcpy2D>(dlsym(lib, "cudaMemcpy2D"));
  if (fn == nullptr) throw OrtError("dlsym: libcudart.so.12 has no cudaMemcpy2D");
  return fn;
}

}  // namespace

Decoder::Decoder(const std::string& modelPath, const DecoderShape& shape, const std::string& ep,
                 const std::string& profilePrefix, float* logits)
    : shape_(shape), logits_(logits) {
  const OrtApi& api = Ort();
  SharedEnv();  // ORT's default logger, which the CUDA provider options already use, lives in the env
  if (ep != "cpu") {
    try {
      OpenSession(modelPath, ep, profilePrefix);
      ep_ = ep;
    } catch (const OrtError& e) {
      fallbackReason_ = e.what();
    }
  }
  if (session_ == nullptr) OpenSession(modelPath, "cpu", profilePrefix);
  try {
    Check(api.CreateIoBinding(session_, &binding_), "CreateIoBinding");
    Check(api.CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &hostInfo_), "CreateCpuMemoryInfo");
    if (OnCuda()) {
      Check(api.CreateMemoryInfo("Cuda", OrtDeviceAllocator, 0, OrtMemTypeDefault, &deviceInfo_), "CreateMemoryInfo");
      Check(api.CreateAllocator(session_, deviceInfo_, &deviceAllocator_), "CreateAllocator");
    }
    for (int64_t l = 0; l < shape_.numLayers; l++) {
      const std::string n = std::to_string(l);
      pastNames_.insert(pastNames_.end(), {"past_key_" + n, "past_value_" + n});
      presentNames_.insert(presentNames_.end(), {"present_key_" + n, "present_value_" + n});
    }
    blocks_.assign(shape_.numLayers, nullptr);
    const int64_t logitsDims[2] = {1, shape_.vocabSize};
    BindValue("logits", Wrap(hostInfo_, logits_, shape_.vocabSize * sizeof(float), logitsDims, 2,
                             ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT), true);
    const int64_t oneDim[1] = {1};
    seqlensValue_ = Wrap(hostInfo_, &seqlensK_, sizeof seqlensK_, oneDim, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    totalValue_ = Wrap(hostInfo_, &totalSeqLen_, sizeof totalSeqLen_, nullptr, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
  } catch (...) {
    Release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

Decoder::~Decoder() { Release(); }

void Decoder::Release() {
  const OrtApi& api = Ort();
  if (seqlensValue_) api.ReleaseValue(seqlensValue_), seqlensValue_ = nullptr;
  if (totalValue_) api.ReleaseValue(totalValue_), totalValue_ = nullptr;
  if (binding_) api.ReleaseIoBinding(binding_), binding_ = nullptr;  // drops its OrtValues first
  for (void*& b : blocks_) FreeKv(b), b = nullptr;
  if (deviceAllocator_) api.ReleaseAllocator(deviceAllocator_), deviceAllocator_ = nullptr;
  if (deviceInfo_) api.ReleaseMemoryInfo(deviceInfo_), deviceInfo_ = nullptr;
  if (hostInfo_) api.ReleaseMemoryInfo(hostInfo_), hostInfo_ = nullptr;
  if (session_) api.ReleaseSession(session_), session_ = nullptr;
}

void Decoder::OpenSession(const std::string& modelPath, const std::string& ep, const std::string& profilePrefix) {
  const OrtApi& api = Ort();
  OrtSessionOptions* rawOptions = nullptr;
  Check(api.CreateSessionOptions(&rawOptions), "CreateSessionOptions");
  Owned<OrtSessionOptions> options(rawOptions, api.ReleaseSessionOptions);
  Check(api.SetSessionGraphOptimizationLevel(options.get(), ORT_ENABLE_ALL), "SetSessionGraphOptimizationLevel");
  if (!profilePrefix.empty()) Check(api.EnableProfiling(options.get(), profilePrefix.c_str()), "EnableProfiling");
  if (ep == "webgpu") {
    // By name: the runtime onnxruntime-node ships registers "WebGPU" (its own defaults: adapter
    // chosen by Dawn, device 0). Older runtimes refuse the name, and the caller falls back.
    Check(api.SessionOptionsAppendExecutionProvider(options.get(), "WebGPU", nullptr, nullptr, 0),
          "SessionOptionsAppendExecutionProvider(WebGPU)");
  }
  if (ep == "cuda") {
    OrtCUDAProviderOptionsV2* rawCuda = nullptr;
    Check(api.CreateCUDAProviderOptions(&rawCuda), "CreateCUDAProviderOptions");
    Owned<OrtCUDAProviderOptionsV2> cudaOptions(rawCuda, api.ReleaseCUDAProviderOptions);
    // Defaults (device 0, the session's arena) are what we want; UpdateCUDAProviderOptions would
    // only restate them, and it already needs the provider library loaded.
    Check(api.SessionOptionsAppendExecutionProvider_CUDA_V2(options.get(), cudaOptions.get()),
          "SessionOptionsAppendExecutionProvider_CUDA_V2");
  }
  Check(api.CreateSession(SharedEnv(), modelPath.c_str(), options.get(), &session_), "CreateSession");
}

std::string Decoder::EndProfiling() {
  const OrtApi& api = Ort();
  OrtAllocator* allocator = nullptr;
  Check(api.GetAllocatorWithDefaultOptions(&allocator), "GetAllocatorWithDefaultOptions");
  char* file = nullptr;
  Check(api.SessionEndProfiling(session_, allocator, &file), "SessionEndProfiling");
  std::string out = file == nullptr ? "" : file;
  if (file != nullptr) {
    if (OrtStatus* status = api.AllocatorFree(allocator, file)) api.ReleaseStatus(status);
  }
  return out;
}

OrtValue* Decoder::Wrap(const OrtMemoryInfo* info, void* data, size_t bytes, const int64_t* dims, size_t rank,
                        ONNXTensorElementDataType type) {
  OrtValue* value = nullptr;
  Check(Ort().CreateTensorWithDataAsOrtValue(info, data, bytes, dims, rank, type, &value),
        "CreateTensorWithDataAsOrtValue");
  return value;
}

// Binds and releases our handle: the binding keeps its own reference to the tensor.
void Decoder::BindValue(const char* name, OrtValue* value, bool asOutput) {
  const OrtApi& api = Ort();
  OrtStatus* status = asOutput ? api.BindOutput(binding_, name, value) : api.BindInput(binding_, name, value);
  api.ReleaseValue(value);
  Check(status, asOutput ? "BindOutput" : "BindInput");
}

void* Decoder::AllocKv(size_t bytes) {
  if (OnCuda()) {
    void* p = nullptr;
    Check(Ort().AllocatorAlloc(deviceAllocator_, bytes, &p), "AllocatorAlloc");
    return p;
  }
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw OrtError("aligned_alloc: cannot allocate " + std::to_string(rounded) + " bytes for the KV cache");
  // Zeroed like the JS backend's Float32Array, so rows past the held length never hold NaNs.
  std::memset(p, 0, rounded);
  return p;
}

void Decoder::FreeKv(void* block) {
  if (block == nullptr) return;
  if (OnCuda()) {
    // Freeing cannot usefully fail; a status would only be leaked.
    if (OrtStatus* status = Ort().AllocatorFree(deviceAllocator_, block)) Ort().ReleaseStatus(status);
  } else {
    std::free(block);
  }
}

// Copies rows [0, rows) of each of the Hkv heads from stride srcCapacity to stride dstCapacity.
// On CUDA `cudaKind` says which sides are device memory (a cudaMemcpyKind); `what` names the
// operation in the error.
void Decoder::CopyRows(float* dst, int64_t dstCapacity, const float* src, int64_t srcCapacity, int64_t rows,
                       int cudaKind, const char* what) const {
  const size_t rowBytes = static_cast<size_t>(shape_.headDim) * sizeof(float);
  if (rows == 0) return;
  if (OnCuda()) {
    int rc = LoadCudaMemcpy2D()(dst, dstCapacity * rowBytes, src, srcCapacity * rowBytes, rows * rowBytes,
                                static_cast<size_t>(shape_.numKvHeads), cudaKind);
    if (rc != 0) throw OrtError("cudaMemcpy2D: error " + std::to_string(rc) + " while " + what);
    return;
  }
  for (int64_t h = 0; h < shape_.numKvHeads; h++) {
    std::memcpy(dst + h * dstCapacity * shape_.headDim, src + h * srcCapacity * shape_.headDim, rows * rowBytes);
  }
}

void Decoder::Resize(int64_t capacity, int64_t keep) {
  if (capacity <= 0 || keep < 0 || keep > capacity || keep > capacity_) {
    throw std::invalid_argument("resize: capacity " + std::to_string(capacity) + " keeping " + std::to_string(keep) +
                                " rows of a cache of capacity " + std::to_string(capacity_));
  }
  const int64_t perTensor = shape_.numKvHeads * capacity * shape_.headDim;  // floats
  const int64_t oldPerTensor = shape_.numKvHeads * capacity_ * shape_.headDim;
  std::vector<void*> fresh(shape_.numLayers, nullptr);
  try {
    for (auto& b : fresh) b = AllocKv(static_cast<size_t>(perTensor) * 2 * sizeof(float));
    for (int64_t l = 0; l < shape_.numLayers && keep > 0; l++) {
      for (int kv = 0; kv < 2; kv++) {
        CopyRows(static_cast<float*>(fresh[l]) + kv * perTensor, capacity,
                 static_cast<const float*>(blocks_[l]) + kv * oldPerTensor, capacity_, keep, kCudaMemcpyDeviceToDevice,
                 "growing the KV cache");
      }
    }
    BindBlocks(fresh, capacity);
  } catch (...) {
    for (void* b : fresh) FreeKv(b);
    // A half-rebound binding would point at freed memory: bind the old blocks again.
    if (capacity_ > 0) BindBlocks(blocks_, capacity_);
    throw;
  }
  for (void* b : blocks_) FreeKv(b);
  blocks_.swap(fresh);
  capacity_ = capacity;
}

// Binds each layer's block as past_* and present_*: two handles on one memory, so the graph
// reads the past from it and appends the new rows into it.
void Decoder::BindBlocks(const std::vector<void*>& blocks, int64_t capacity) {
  const int64_t perTensor = shape_.numKvHeads * capacity * shape_.headDim;
  const size_t bytes = static_cast<size_t>(perTensor) * sizeof(float);
  const int64_t dims[4] = {1, shape_.numKvHeads, capacity, shape_.headDim};
  const OrtMemoryInfo* info = OnCuda() ? deviceInfo_ : hostInfo_;
  for (int64_t l = 0; l < shape_.numLayers; l++) {
    for (int kv = 0; kv < 2; kv++) {
      float* data = static_cast<float*>(blocks[l]) + kv * perTensor;
      const size_t i = static_cast<size_t>(l * 2 + kv);
      BindValue(pastNames_[i].c_str(), Wrap(info, data, bytes, dims, 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT), false);
      BindValue(presentNames_[i].c_str(), Wrap(info, data, bytes, dims, 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT), true);
    }
  }
}

void Decoder::Bind(const int32_t* tokenIds, int64_t count, const float* cos, const float* sin, int64_t past) {
  if (count <= 0 || past < 0 || past + count > capacity_) {
    throw std::invalid_argument("run: " + std::to_string(count) + " tokens at position " + std::to_string(past) +
                                " do not fit the KV cache capacity " + std::to_string(capacity_) + " (resize first)");
  }
  tokenIds_.assign(tokenIds, tokenIds + count);
  seqlensK_ = static_cast<int32_t>(past + count - 1);
  totalSeqLen_ = static_cast<int32_t>(past + count);
  const int64_t idsDims[2] = {1, count};
  const int64_t ropeDims[2] = {count, shape_.rotaryHalf};
  const size_t ropeBytes = static_cast<size_t>(count * shape_.rotaryHalf) * sizeof(float);
  BindValue("input_ids", Wrap(hostInfo_, tokenIds_.data(), count * sizeof(int64_t), idsDims, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64), false);
  // The graph only reads its inputs; the const_cast is the C API's signature, not a write.
  BindValue("rope_cos", Wrap(hostInfo_, const_cast<float*>(cos), ropeBytes, ropeDims, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT), false);
  BindValue("rope_sin", Wrap(hostInfo_, const_cast<float*>(sin), ropeBytes, ropeDims, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT), false);
  // Rebound every step although the OrtValues persist: on CUDA, BindInput is where host inputs
  // are copied to the device.
  Check(Ort().BindInput(binding_, "seqlens_k", seqlensValue_), "BindInput");
  Check(Ort().BindInput(binding_, "total_seq_len", totalValue_), "BindInput");
}

void Decoder::Run() {
  const OrtApi& api = Ort();
  Check(api.RunWithBinding(session_, nullptr, binding_), "RunWithBinding");
  if (OnCuda()) Check(api.SynchronizeBoundOutputs(binding_), "SynchronizeBoundOutputs");
}

void Decoder::CopyOut(int64_t length, float* host) const { CopyHost(true, length, host); }
void Decoder::CopyIn(int64_t length, const float* host) { CopyHost(false, length, const_cast<float*>(host)); }

// Per layer and key/value, CopyRows between the block (stride capacity) and the compact host
// layout (stride length).
void Decoder::CopyHost(bool out, int64_t length, float* host) const {
  if (length < 0 || length > capacity_) {
    throw std::invalid_argument("KV copy of " + std::to_string(length) + " positions from a cache of capacity " +
                                std::to_string(capacity_));
  }
  const int64_t perTensor = shape_.numKvHeads * capacity_ * shape_.headDim;
  const int64_t compactPerTensor = shape_.numKvHeads * length * shape_.headDim;
  for (int64_t l = 0; l < shape_.numLayers; l++) {
    for (int kv = 0; kv < 2; kv++) {
      float* device = static_cast<float*>(blocks_[l]) + kv * perTensor;
      float* compact = host + (l * 2 + kv) * compactPerTensor;
      if (out) CopyRows(compact, length, device, capacity_, length, kCudaMemcpyDeviceToHost, "copying the KV cache out");
      else CopyRows(device, capacity_, compact, length, length, kCudaMemcpyHostToDevice, "copying the KV cache in");
    }
  }
}

void Decoder::Shift(int64_t keep, int64_t drop, int64_t length, const float* cos, const float* sin, bool interleaved,
                    int64_t rotaryDim, const uint8_t* layerTables) {
  if (keep < 0 || drop <= 0 || keep + drop > length || length > capacity_ || rotaryDim <= 0 || rotaryDim % 2 != 0 ||
      rotaryDim > shape_.headDim) {
    throw std::invalid_argument("shift: dropping [" + std::to_string(keep) + ", " + std::to_string(keep + drop) + ") of " +
                                std::to_string(length) + " positions (capacity " + std::to_string(capacity_) +
                                ", rotary dims " + std::to_string(rotaryDim) + ") is out of range");
  }
  // Layer l turns by rotation layerTables[l] (R/2 angles each; all the first without tables).
  const auto at = [&](int64_t l) { return layerTables ? static_cast<int64_t>(layerTables[l]) * (rotaryDim / 2) : 0; };
  if (!OnCuda()) {
    for (int64_t l = 0; l < shape_.numLayers; l++) {
      ShiftHost(static_cast<float*>(blocks_[l]), keep, drop, length, cos + at(l), sin + at(l), interleaved, rotaryDim);
    }
    return;
  }
  // Rare (once per context shift) and O(capacity): a host round trip keeps one implementation.
  // One host block, reused for every layer.
  const size_t blockFloats = static_cast<size_t>(2 * shape_.numKvHeads * capacity_ * shape_.headDim);
  const size_t bytes = blockFloats * sizeof(float);
  std::vector<float> host(blockFloats);
  const CudaMemcpy2D copy = LoadCudaMemcpy2D();
  for (int64_t l = 0; l < shape_.numLayers; l++) {
    int rc = copy(host.data(), bytes, blocks_[l], bytes, bytes, 1, kCudaMemcpyDeviceToHost);
    if (rc == 0) {
      ShiftHost(host.data(), keep, drop, length, cos + at(l), sin + at(l), interleaved, rotaryDim);
      rc = copy(blocks_[l], bytes, host.data(), bytes, bytes, 1, kCudaMemcpyHostToDevice);
    }
    if (rc != 0) throw OrtError("cudaMemcpy2D: error " + std::to_string(rc) + " while shifting the KV cache");
  }
}

// One layer's block [2][Hkv][C][headDim]: in each head, rows [keep+drop, length) move down by
// `drop` in one memmove (the ranges overlap); then the moved keys are rotated (as KvCache.discard).
void Decoder::ShiftHost(float* block, int64_t keep, int64_t drop, int64_t length, const float* cos, const float* sin,
                        bool interleaved, int64_t rotaryDim) {
  const int64_t hd = shape_.headDim;
  const int64_t half = rotaryDim / 2;
  const int64_t rows = length - keep - drop;
  const int64_t perTensor = shape_.numKvHeads * capacity_ * hd;
  for (int kv = 0; kv < 2; kv++) {
    for (int64_t h = 0; h < shape_.numKvHeads; h++) {
      float* moved = block + kv * perTensor + h * capacity_ * hd + keep * hd;
      std::memmove(moved, moved + drop * hd, static_cast<size_t>(rows * hd) * sizeof(float));
      if (kv == 1) continue;
      for (float* row = moved; row < moved + rows * hd; row += hd) {
        for (int64_t i = 0; i < half; i++) {
          const int64_t ia = interleaved ? 2 * i : i;
          const int64_t ib = interleaved ? 2 * i + 1 : i + half;
          const double a = row[ia], b = row[ib];
          row[ia] = static_cast<float>(a * cos[i] + b * sin[i]);
          row[ib] = static_cast<float>(b * cos[i] - a * sin[i]);
        }
      }
    }
  }
}

}  // namespace ropewalk
