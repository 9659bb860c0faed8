// See decoder.h.
#include "decoder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "gguf_matmul.h"
#include "half.h"
#include "ort_runtime.h"

namespace ropewalk {
namespace {

template <typename T>
using Owned = std::unique_ptr<T, void (*)(T*)>;

// ONNX Runtime's names of the device memory its CUDA and WebGPU providers allocate
// (onnxruntime/core/framework/allocator.h: CUDA; WEBGPU_BUFFER, which 1.30 reports as
// "WebGPU_Buf", the name onnxruntime-node's own binding uses for GPU-buffer tensors).
const char* DeviceMemoryName(const std::string& ep) { return ep == "cuda" ? "Cuda" : "WebGPU_Buf"; }

}  // namespace

Decoder::Decoder(const std::string& modelPath, const DecoderShape& shape, const std::string& ep, CopyModel copyModel,
                 const std::string& profilePrefix, float* logits, int intraOpThreads, const std::string& weightsFile)
    : shape_(shape),
      logits_(logits),
      kvType_(shape.kvFloat16 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT),
      kvElem_(shape.kvFloat16 ? 2 : 4) {
  const OrtApi& api = Ort();
  SharedEnv();  // ORT's default logger, which the CUDA provider options already use, lives in the env
  if (ep != "cpu") {
    try {
      OpenSession(modelPath, ep, profilePrefix, intraOpThreads, "");
      ep_ = ep;
    } catch (const OrtError& e) {
      fallbackReason_ = e.what();
    }
  }
  if (session_ == nullptr) OpenSession(modelPath, "cpu", profilePrefix, intraOpThreads, weightsFile);
  try {
    Check(api.CreateIoBinding(session_, &binding_), "CreateIoBinding");
    Check(api.CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &hostInfo_), "CreateCpuMemoryInfo");
    Check(api.GetAllocatorWithDefaultOptions(&hostAllocator_), "GetAllocatorWithDefaultOptions");
    // A graph without the window lengths (or a model without window layers): every layer global.
    if (!HasInput("seqlens_k_window")) shape_.windowLayers.clear();
    if (!shape_.windowLayers.empty() && static_cast<int64_t>(shape_.windowLayers.size()) != shape_.numLayers) {
      throw std::invalid_argument("windowLayers: one entry per layer");
    }
    if (OnDevice()) {
      if (copyModel.data == nullptr) throw OrtError("the KV copy graph is needed on " + ep_);
      Check(api.CreateMemoryInfo(DeviceMemoryName(ep_), OrtDeviceAllocator, 0, OrtMemTypeDefault, &deviceInfo_),
            "CreateMemoryInfo");
      Check(api.CreateAllocator(session_, deviceInfo_, &deviceAllocator_), "CreateAllocator");
      copier_ = std::make_unique<KvCopier>(copyModel.data, copyModel.bytes, ep_);
    }
    for (int64_t l = 0; l < shape_.numLayers; l++) {
      const std::string n = std::to_string(l);
      pastNames_.insert(pastNames_.end(), {"past_key_" + n, "past_value_" + n});
      presentNames_.insert(presentNames_.end(), {"present_key_" + n, "present_value_" + n});
    }
    const int64_t logitsDims[2] = {1, shape_.vocabSize};
    BindValue("logits", Wrap(hostInfo_, logits_, shape_.vocabSize * sizeof(float), logitsDims, 2,
                             ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT), true);
    const int64_t oneDim[1] = {1};
    seqlensValue_ = Wrap(hostInfo_, &seqlensK_, sizeof seqlensK_, oneDim, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    totalValue_ = Wrap(hostInfo_, &totalSeqLen_, sizeof totalSeqLen_, nullptr, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    seqlensWindowValue_ = Wrap(hostInfo_, &seqlensKWindow_, sizeof seqlensKWindow_, oneDim, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    totalWindowValue_ = Wrap(hostInfo_, &totalSeqLenWindow_, sizeof totalSeqLenWindow_, nullptr, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
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
  if (seqlensWindowValue_) api.ReleaseValue(seqlensWindowValue_), seqlensWindowValue_ = nullptr;
  if (totalWindowValue_) api.ReleaseValue(totalWindowValue_), totalWindowValue_ = nullptr;
  if (binding_) api.ReleaseIoBinding(binding_), binding_ = nullptr;  // drops its OrtValues first
  for (OrtValue*& v : kv_) ReleaseKv(v), v = nullptr;               // before the allocator they came from
  kv_.clear();
  copier_.reset();
  if (deviceAllocator_) api.ReleaseAllocator(deviceAllocator_), deviceAllocator_ = nullptr;
  if (deviceInfo_) api.ReleaseMemoryInfo(deviceInfo_), deviceInfo_ = nullptr;
  if (hostInfo_) api.ReleaseMemoryInfo(hostInfo_), hostInfo_ = nullptr;
  if (session_) api.ReleaseSession(session_), session_ = nullptr;
  DropWeights();  // after the session whose initializers point into it
}

void Decoder::DropWeights() {
  UnmapPages(weights_);
  weights_ = {};
  weightsBytes_ = 0;
}

void Decoder::OpenSession(const std::string& modelPath, const std::string& ep, const std::string& profilePrefix, int intraOpThreads,
                          const std::string& weightsFile) {
  const OrtApi& api = Ort();
  OrtSessionOptions* rawOptions = nullptr;
  Check(api.CreateSessionOptions(&rawOptions), "CreateSessionOptions");
  Owned<OrtSessionOptions> options(rawOptions, api.ReleaseSessionOptions);
  if (intraOpThreads > 0) Check(api.SetIntraOpNumThreads(options.get(), intraOpThreads), "SetIntraOpNumThreads");
  Check(api.SetSessionGraphOptimizationLevel(options.get(), ORT_ENABLE_ALL), "SetSessionGraphOptimizationLevel");
  if (!profilePrefix.empty()) Check(api.EnableProfiling(options.get(), profilePrefix.c_str()), "EnableProfiling");
  AppendExecutionProvider(options.get(), ep);
  AddRopewalkOps(options.get());  // ropewalk.MatMulQ8 and the rest, which the native CPU graphs use
#if !defined(_WIN32)  // ORTCHAR_T is wchar_t there; ReadIntoHugePages reads only on Linux
  if (!weightsFile.empty()) {
    size_t length = 0;
    weights_ = ReadIntoHugePages(weightsFile, &length);
    if (weights_.data != nullptr) {
      // ONNX Runtime finds external data by the model's `location` (the file's name in the model's
      // folder) and, on the CPU, points its initializers into this buffer (no copy).
      const size_t slash = weightsFile.find_last_of("/\\");
      const std::string name = slash == std::string::npos ? weightsFile : weightsFile.substr(slash + 1);
      const ORTCHAR_T* names[1] = {name.c_str()};
      char* buffers[1] = {static_cast<char*>(weights_.data)};
      const size_t lengths[1] = {length};
      weightsBytes_ = length;
      try {
        Check(api.AddExternalInitializersFromFilesInMemory(options.get(), names, buffers, lengths, 1), "AddExternalInitializersFromFilesInMemory");
      } catch (...) {
        DropWeights();
        throw;
      }
    }
  }
#else
  (void)weightsFile;
#endif
  try {
    Check(api.CreateSession(SharedEnv(), modelPath.c_str(), options.get(), &session_), "CreateSession");
  } catch (...) {
    DropWeights();  // the constructor that called this does not Release()
    throw;
  }
}

bool Decoder::HasInput(const char* name) const {
  const OrtApi& api = Ort();
  size_t count = 0;
  Check(api.SessionGetInputCount(session_, &count), "SessionGetInputCount");
  for (size_t i = 0; i < count; i++) {
    char* input = nullptr;
    Check(api.SessionGetInputName(session_, i, hostAllocator_, &input), "SessionGetInputName");
    const bool same = std::strcmp(input, name) == 0;
    if (OrtStatus* status = api.AllocatorFree(hostAllocator_, input)) api.ReleaseStatus(status);
    if (same) return true;
  }
  return false;
}

int64_t Decoder::CompactFloats(int64_t length, int64_t windowLength) const {
  int64_t rows = 0;
  for (size_t i = 0; i < static_cast<size_t>(shape_.numLayers * 2); i++) rows += Windowed(i) ? windowLength : length;
  return rows * shape_.numKvHeads * shape_.headDim;
}

std::string Decoder::EndProfiling() {
  const OrtApi& api = Ort();
  char* file = nullptr;
  Check(api.SessionEndProfiling(session_, hostAllocator_, &file), "SessionEndProfiling");
  std::string out = file == nullptr ? "" : file;
  if (file != nullptr) {
    if (OrtStatus* status = api.AllocatorFree(hostAllocator_, file)) api.ReleaseStatus(status);
  }
  return out;
}

std::string Decoder::KvMemory() const {
  const OrtMemoryInfo* info = deviceInfo_ != nullptr ? deviceInfo_ : hostInfo_;
  if (!kv_.empty() && kv_[0]) Check(Ort().GetTensorMemoryInfo(kv_[0], &info), "GetTensorMemoryInfo");
  const char* name = nullptr;
  Check(Ort().MemoryInfoGetName(info, &name), "MemoryInfoGetName");
  return name;
}

DecoderStats Decoder::Stats() const {
  DecoderStats s = stats_;
  s.kvCopies = copier_ ? copier_->Runs() : 0;
  return s;
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

char* Decoder::HostData(OrtValue* value) const {
  void* data = nullptr;
  Check(Ort().GetTensorMutableData(value, &data), "GetTensorMutableData");
  return static_cast<char*>(data);
}

// One KV tensor [1][Hkv][capacity][headDim] of the KV dtype: on the CPU, from 1 MiB up, over zeroed
// pages of its own (host_pages.h: no memset); else from its memory's allocator.
OrtValue* Decoder::NewKv(int64_t capacity) {
  const int64_t dims[4] = {1, shape_.numKvHeads, capacity, shape_.headDim};
  OrtValue* value = nullptr;
  const size_t bytes = static_cast<size_t>(shape_.numKvHeads * capacity * shape_.headDim) * kvElem_;
  if (!OnDevice() && bytes >= (size_t{1} << 20)) {
    const HostPages pages = MapZeroedPages(bytes);
    if (pages.data != nullptr) {
      try {
        value = Wrap(hostInfo_, pages.data, bytes, dims, 4, kvType_);
      } catch (...) {
        UnmapPages(pages);
        throw;
      }
      kvPages_[value] = pages;
      stats_.kvAllocs++;
      return value;
    }
  }
  Check(Ort().CreateTensorAsOrtValue(OnDevice() ? deviceAllocator_ : hostAllocator_, dims, 4, kvType_, &value),
        "CreateTensorAsOrtValue(KV cache)");
  stats_.kvAllocs++;
  return value;
}

// Releases a KV tensor and, for one over pages of its own, the pages (the binding must not hold
// it any more: BindKv rebinds first, Release drops the binding first).
void Decoder::ReleaseKv(OrtValue* kv) {
  if (kv == nullptr) return;
  Ort().ReleaseValue(kv);
  auto it = kvPages_.find(kv);
  if (it == kvPages_.end()) return;
  UnmapPages(it->second);
  kvPages_.erase(it);
}

// Zeroed like the JS backend's Float32Array, so rows past the held length never hold NaNs (a
// device's allocator hands out reused buffers).
void Decoder::ZeroKv(OrtValue* kv, int64_t capacity) {
  if (!OnDevice()) {
    std::memset(HostData(kv), 0, static_cast<size_t>(shape_.numKvHeads * capacity * shape_.headDim) * kvElem_);
    return;
  }
  std::vector<char> zeroRow(static_cast<size_t>(shape_.numKvHeads * shape_.headDim) * kvElem_, 0);  // 0 bits: +0.0
  Owned<OrtValue> src(WrapStaging(zeroRow, 1), Ort().ReleaseValue);
  copier_->Copy(src.get(), 1, capacity, kv);
}

// Host bytes [1][Hkv][length][headDim] of the KV dtype, wrapped as a tensor (for the copy graph).
OrtValue* Decoder::WrapStaging(std::vector<char>& bytes, int64_t length) {
  const int64_t dims[4] = {1, shape_.numKvHeads, length, shape_.headDim};
  return Wrap(hostInfo_, bytes.data(), bytes.size(), dims, 4, kvType_);
}

// Rows [0, rows) of each head from src (capacity srcCapacity) into dst (dstCapacity), the rest of
// dst zeroed: memcpy on the host, the copy graph on a device.
// Rows [from, from + rows) of each head from src (capacity srcCapacity) into dst's [0, rows)
// (dstCapacity; dst may be src), the rest of dst zeroed: memmove on the host; on a device the copy
// graph, through the host when from > 0 (the copy graph copies from row 0).
void Decoder::CopyRows(OrtValue* src, int64_t srcCapacity, OrtValue* dst, int64_t dstCapacity, int64_t rows, int64_t from,
                       bool dstZeroed) {
  if (rows == 0) return dstZeroed ? void() : ZeroKv(dst, dstCapacity);
  const size_t rowBytes = static_cast<size_t>(shape_.headDim) * kvElem_;
  if (OnDevice()) {
    if (from == 0) return copier_->Copy(src, rows, dstCapacity, dst);
    const int64_t all = from + rows;
    std::vector<char> held(static_cast<size_t>(shape_.numKvHeads * all) * rowBytes);
    Owned<OrtValue> heldValue(WrapStaging(held, all), Ort().ReleaseValue);
    copier_->Copy(src, all, all, heldValue.get());
    std::vector<char> kept(static_cast<size_t>(shape_.numKvHeads * rows) * rowBytes);
    for (int64_t h = 0; h < shape_.numKvHeads; h++) {
      std::memcpy(kept.data() + h * rows * rowBytes, held.data() + (h * all + from) * rowBytes, static_cast<size_t>(rows) * rowBytes);
    }
    Owned<OrtValue> keptValue(WrapStaging(kept, rows), Ort().ReleaseValue);
    return copier_->Copy(keptValue.get(), rows, dstCapacity, dst);
  }
  const char* s = HostData(src);
  char* d = HostData(dst);
  const bool inPlace = s == d;
  if (!inPlace && !dstZeroed) std::memset(d, 0, static_cast<size_t>(shape_.numKvHeads * dstCapacity) * rowBytes);
  for (int64_t h = 0; h < shape_.numKvHeads; h++) {
    std::memmove(d + h * dstCapacity * rowBytes, s + (h * srcCapacity + from) * rowBytes, static_cast<size_t>(rows) * rowBytes);
  }
}

void Decoder::Resize(int64_t capacity, int64_t keep) {
  if (capacity <= 0 || keep < 0 || keep > capacity || keep > capacity_) {
    throw std::invalid_argument("resize: capacity " + std::to_string(capacity) + " keeping " + std::to_string(keep) +
                                " rows of a cache of capacity " + std::to_string(capacity_));
  }
  Reallocate(false, capacity, 0, keep);
}

void Decoder::ResizeWindow(int64_t capacity, int64_t from, int64_t rows) {
  if (!WindowInputs()) return;
  if (capacity <= 0 || from < 0 || rows < 0 || rows > capacity || (rows > 0 && from + rows > windowCapacity_)) {
    throw std::invalid_argument("resize window: capacity " + std::to_string(capacity) + " keeping rows [" + std::to_string(from) + ", " +
                                std::to_string(from + rows) + ") of a window of capacity " + std::to_string(windowCapacity_));
  }
  if (capacity != windowCapacity_) return Reallocate(true, capacity, from, rows);
  if (from == 0) return;  // the rows are where they belong
  for (size_t i = 0; i < kv_.size(); i++) {
    if (Windowed(i)) CopyRows(kv_[i], capacity, kv_[i], capacity, rows, from);
  }
}

// New tensors at `capacity` for the global (windowed false) or the sliding-window layers, holding
// rows [from, from + rows) of the old ones; the others stay. All allocated before anything is swapped.
void Decoder::Reallocate(bool windowed, int64_t capacity, int64_t from, int64_t rows) {
  const size_t count = static_cast<size_t>(shape_.numLayers * 2);
  if (kv_.empty()) kv_.assign(count, nullptr);
  const int64_t oldCapacity = windowed ? windowCapacity_ : capacity_;
  std::vector<OrtValue*> fresh(kv_);
  try {
    for (size_t i = 0; i < count; i++) {
      if (Windowed(i) != windowed) continue;
      fresh[i] = nullptr;
      fresh[i] = NewKv(capacity);
      CopyRows(rows > 0 ? kv_[i] : nullptr, oldCapacity, fresh[i], capacity, rows, from, kvPages_.count(fresh[i]) != 0);
    }
    if (std::find(fresh.begin(), fresh.end(), nullptr) == fresh.end()) BindKv(fresh);
  } catch (...) {
    for (size_t i = 0; i < count; i++) if (fresh[i] && fresh[i] != kv_[i]) ReleaseKv(fresh[i]);
    // A half-rebound binding would point at released tensors: bind the old ones again.
    if (std::find(kv_.begin(), kv_.end(), nullptr) == kv_.end()) BindKv(kv_);
    throw;
  }
  for (size_t i = 0; i < count; i++) if (kv_[i] && fresh[i] != kv_[i]) ReleaseKv(kv_[i]);
  kv_.swap(fresh);
  (windowed ? windowCapacity_ : capacity_) = capacity;
}

// Binds each KV tensor as past_* and present_*: one OrtValue for both, so the graph reads the
// past from it and appends the new rows into it (GroupQueryAttention's shared buffer, which its
// CPU, CUDA and WebGPU kernels detect by past and present having the same data).
void Decoder::BindKv(const std::vector<OrtValue*>& kv) {
  const OrtApi& api = Ort();
  for (size_t i = 0; i < kv.size(); i++) {
    Check(api.BindInput(binding_, pastNames_[i].c_str(), kv[i]), "BindInput");
    Check(api.BindOutput(binding_, presentNames_[i].c_str(), kv[i]), "BindOutput");
  }
  stats_.kvBinds++;
}

// One RoPE table [rows][R/2] float32 copied into a host tensor of ONNX Runtime's CPU allocator and
// bound; on a device the bind copies it into the provider's memory (see decoder.h).
void Decoder::BindRopeTable(const char* name, const float* table, int64_t rows) {
  const int64_t dims[2] = {rows, shape_.rotaryHalf};
  OrtValue* raw = nullptr;
  Check(Ort().CreateTensorAsOrtValue(hostAllocator_, dims, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &raw),
        "CreateTensorAsOrtValue(RoPE cache)");
  Owned<OrtValue> value(raw, Ort().ReleaseValue);
  std::memcpy(HostData(value.get()), table, static_cast<size_t>(rows * shape_.rotaryHalf) * sizeof(float));
  BindValue(name, value.release(), false);
}

void Decoder::SetRope(const float* cos, const float* sin, int64_t rows) {
  if (rows <= 0) throw std::invalid_argument("RoPE cache of " + std::to_string(rows) + " positions");
  stats_.ropeRows = 0;  // until both tables are bound
  BindRopeTable("rope_cos_cache", cos, rows);
  BindRopeTable("rope_sin_cache", sin, rows);
  stats_.ropeRows = rows;
  stats_.ropeBinds++;
}

void Decoder::Bind(const int32_t* tokenIds, int64_t count, int64_t past, int64_t windowPast) {
  if (count <= 0 || past < 0 || past + count > capacity_) {
    throw std::invalid_argument("run: " + std::to_string(count) + " tokens at position " + std::to_string(past) +
                                " do not fit the KV cache capacity " + std::to_string(capacity_) + " (resize first)");
  }
  if (WindowInputs() && (windowPast < 0 || windowPast > past || windowPast + count > windowCapacity_)) {
    throw std::invalid_argument("run: " + std::to_string(count) + " tokens after " + std::to_string(windowPast) +
                                " windowed rows do not fit the window capacity " + std::to_string(windowCapacity_) + " (resize first)");
  }
  if (std::find(kv_.begin(), kv_.end(), nullptr) != kv_.end() || kv_.empty()) throw std::invalid_argument("run: the KV cache is not allocated (resize first)");
  if (past + count > stats_.ropeRows) {
    throw std::invalid_argument("run: " + std::to_string(count) + " tokens at position " + std::to_string(past) +
                                " are past the bound RoPE cache's " + std::to_string(stats_.ropeRows) +
                                " positions (setRope first)");
  }
  tokenIds_.assign(tokenIds, tokenIds + count);
  seqlensK_ = static_cast<int32_t>(past + count - 1);
  totalSeqLen_ = static_cast<int32_t>(past + count);
  const int64_t idsDims[2] = {1, count};
  BindValue("input_ids", Wrap(hostInfo_, tokenIds_.data(), count * sizeof(int64_t), idsDims, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64), false);
  // Rebound every step although the OrtValues persist: on a device, BindInput is where host
  // inputs are copied to the device.
  Check(Ort().BindInput(binding_, "seqlens_k", seqlensValue_), "BindInput");
  Check(Ort().BindInput(binding_, "total_seq_len", totalValue_), "BindInput");
  if (WindowInputs()) {
    seqlensKWindow_ = static_cast<int32_t>(windowPast + count - 1);
    totalSeqLenWindow_ = static_cast<int32_t>(windowPast + count);
    Check(Ort().BindInput(binding_, "seqlens_k_window", seqlensWindowValue_), "BindInput");
    Check(Ort().BindInput(binding_, "total_seq_len_window", totalWindowValue_), "BindInput");
  }
}

void Decoder::Run() {
  const OrtApi& api = Ort();
  Check(api.RunWithBinding(session_, nullptr, binding_), "RunWithBinding");
  if (OnDevice()) Check(api.SynchronizeBoundOutputs(binding_), "SynchronizeBoundOutputs");
  stats_.runs++;
}

void Decoder::CopyOut(int64_t length, int64_t windowLength, float* host) { CopyHost(true, length, windowLength, host); }
void Decoder::CopyIn(int64_t length, int64_t windowLength, const float* host) {
  CopyHost(false, length, windowLength, const_cast<float*>(host));
}

// Every KV tensor to or from its part of the compact float32 host layout (stride: its rows).
void Decoder::CopyHost(bool out, int64_t length, int64_t windowLength, float* host) {
  if (length < 0 || length > capacity_ || (WindowInputs() && (windowLength < 0 || windowLength > windowCapacity_ || windowLength > length))) {
    throw std::invalid_argument("KV copy of " + std::to_string(length) + " positions (" + std::to_string(windowLength) +
                                " windowed) from a cache of capacity " + std::to_string(capacity_) + " (window " +
                                std::to_string(windowCapacity_) + ")");
  }
  float* part = host;
  for (size_t i = 0; i < kv_.size(); i++) {
    const int64_t rows = Windowed(i) ? windowLength : length;
    if (rows == 0) continue;
    if (out) ReadCompact(i, rows, part);
    else WriteCompact(i, rows, part);
    part += shape_.numKvHeads * rows * shape_.headDim;
  }
}

// Rows [0, length) of KV tensor i as float32 [Hkv][length][headDim]: on a device through a host
// staging tensor of the KV dtype (the copy graph), on the host straight from its rows.
void Decoder::ReadCompact(size_t i, int64_t length, float* out) {
  const int64_t hd = shape_.headDim;
  const size_t n = static_cast<size_t>(length * hd);  // elements per head
  std::vector<char> staging;
  const char* src = nullptr;
  int64_t stride = CapacityOf(i);
  if (OnDevice()) {
    staging.resize(static_cast<size_t>(shape_.numKvHeads) * n * kvElem_);
    Owned<OrtValue> wrapped(WrapStaging(staging, length), Ort().ReleaseValue);
    copier_->Copy(kv_[i], length, length, wrapped.get());
    src = staging.data();
    stride = length;
  } else {
    src = HostData(kv_[i]);
  }
  for (int64_t h = 0; h < shape_.numKvHeads; h++) {
    const char* row = src + static_cast<size_t>(h * stride * hd) * kvElem_;
    float* dst = out + h * length * hd;
    if (kvElem_ == 4) std::memcpy(dst, row, n * sizeof(float));
    else for (size_t j = 0; j < n; j++) dst[j] = HalfToFloat(reinterpret_cast<const uint16_t*>(row)[j]);
  }
}

// The reverse of ReadCompact (a device tensor's rows past `length` come back zero).
void Decoder::WriteCompact(size_t i, int64_t length, const float* in) {
  const int64_t hd = shape_.headDim;
  const size_t n = static_cast<size_t>(length * hd);
  std::vector<char> staging;
  char* dst = nullptr;
  int64_t stride = CapacityOf(i);
  if (OnDevice()) {
    staging.resize(static_cast<size_t>(shape_.numKvHeads) * n * kvElem_);
    dst = staging.data();
    stride = length;
  } else {
    dst = HostData(kv_[i]);
  }
  for (int64_t h = 0; h < shape_.numKvHeads; h++) {
    char* row = dst + static_cast<size_t>(h * stride * hd) * kvElem_;
    const float* src = in + h * length * hd;
    if (kvElem_ == 4) std::memcpy(row, src, n * sizeof(float));
    else for (size_t j = 0; j < n; j++) reinterpret_cast<uint16_t*>(row)[j] = FloatToHalf(src[j]);
  }
  if (!OnDevice()) return;
  Owned<OrtValue> wrapped(WrapStaging(staging, length), Ort().ReleaseValue);
  copier_->Copy(wrapped.get(), length, CapacityOf(i), kv_[i]);
}

void Decoder::Shift(int64_t keep, int64_t drop, int64_t length, const float* cos, const float* sin, bool interleaved,
                    int64_t rotaryDim, const uint8_t* layerTables, int64_t windowKeep, int64_t windowDrop, int64_t windowLength) {
  if (keep < 0 || drop <= 0 || keep + drop > length || length > capacity_ || rotaryDim <= 0 || rotaryDim % 2 != 0 ||
      rotaryDim > shape_.headDim) {
    throw std::invalid_argument("shift: dropping [" + std::to_string(keep) + ", " + std::to_string(keep + drop) + ") of " +
                                std::to_string(length) + " positions (capacity " + std::to_string(capacity_) +
                                ", rotary dims " + std::to_string(rotaryDim) + ") is out of range");
  }
  if (WindowInputs() && (windowKeep < 0 || windowDrop < 0 || windowKeep + windowDrop > windowLength || windowLength > windowCapacity_)) {
    throw std::invalid_argument("shift: dropping windowed rows [" + std::to_string(windowKeep) + ", " + std::to_string(windowKeep + windowDrop) +
                                ") of " + std::to_string(windowLength) + " (window capacity " + std::to_string(windowCapacity_) + ") is out of range");
  }
  // Tensor i's (keep, drop, length): the window's for a sliding-window layer.
  const auto range = [&](size_t i) {
    return Windowed(i) ? std::array<int64_t, 3>{windowKeep, windowDrop, windowLength} : std::array<int64_t, 3>{keep, drop, length};
  };
  // Tensor i is layer i / 2's key (even i) or value; layer l turns by rotation layerTables[l]
  // (R/2 angles each; all by the first without tables).
  const auto at = [&](size_t i) {
    return layerTables ? static_cast<int64_t>(layerTables[i / 2]) * (rotaryDim / 2) : 0;
  };
  if (!OnDevice() && kvElem_ == 4) {
    for (size_t i = 0; i < kv_.size(); i++) {
      float* data = reinterpret_cast<float*>(HostData(kv_[i]));
      const auto [k, d, n] = range(i);
      ShiftTensor(data, CapacityOf(i), i % 2 == 0, k, d, n, cos + at(i), sin + at(i), interleaved, rotaryDim);
    }
    return;
  }
  // A device's or float16 rows: rare (once per context shift) and O(length), so a float32 host
  // round trip keeps one implementation.
  std::vector<float> host(static_cast<size_t>(shape_.numKvHeads * length * shape_.headDim));
  for (size_t i = 0; i < kv_.size(); i++) {
    const auto [k, d, n] = range(i);
    if (n == 0) continue;
    ReadCompact(i, n, host.data());
    ShiftTensor(host.data(), n, i % 2 == 0, k, d, n, cos + at(i), sin + at(i), interleaved, rotaryDim);
    WriteCompact(i, n, host.data());
  }
}

// One KV tensor [Hkv][stride][headDim]: in each head, rows [keep+drop, length) move down by
// `drop` in one memmove (the ranges overlap); then moved keys are rotated (as KvCache.discard).
void Decoder::ShiftTensor(float* t, int64_t stride, bool isKey, int64_t keep, int64_t drop, int64_t length,
                          const float* cos, const float* sin, bool interleaved, int64_t rotaryDim) const {
  const int64_t hd = shape_.headDim;
  const int64_t half = rotaryDim / 2;
  const int64_t rows = length - keep - drop;
  for (int64_t h = 0; h < shape_.numKvHeads; h++) {
    float* moved = t + h * stride * hd + keep * hd;
    std::memmove(moved, moved + drop * hd, static_cast<size_t>(rows * hd) * sizeof(float));
    if (!isKey) continue;
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

}  // namespace ropewalk
