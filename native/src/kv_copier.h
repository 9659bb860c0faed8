// Moves KV rows that live in an execution provider's memory (WebGPU buffers, CUDA device memory)
// by running the copy graph of main/engine/model/kv-copy-graph.ts on that EP with IoBinding:
// dst[0, :, 0:n, :] = src[0, :, 0:n, :], dst rows [n, C) = 0. Either side may be host memory (the
// graph's Slice and Pad run on the EP; ONNX Runtime moves a host tensor in or out at the binding).
//
// Why a graph: the C API of the headers we build with (1.21) has no tensor copy; CopyTensors
// (1.23) copies whole tensors, and a WebGPU "pointer" is a buffer handle that cannot be offset to
// one head's rows. A growth is rare (once per power of two), so one small run per KV tensor is
// cheap against the decode steps it enables.
#pragma once
#include <onnxruntime_c_api.h>

#include <cstdint>
#include <string>

namespace ropewalk {

class KvCopier {
 public:
  /**
   * Opens the copy graph (`model`, `bytes` long: a serialized ModelProto) on `ep` ("webgpu" or
   * "cuda"). @throws OrtError when the session cannot be created.
   */
  KvCopier(const void* model, size_t bytes, const std::string& ep);
  ~KvCopier();
  KvCopier(const KvCopier&) = delete;
  KvCopier& operator=(const KvCopier&) = delete;

  /**
   * src [1, H, S, D] and dst [1, H, C, D] (the same element type); copies rows [0, rows) of every
   * head and zeroes dst's rows [rows, C). Needs 1 <= rows <= min(S, C).
   * @throws OrtError (binding, run) naming the C API call.
   */
  void Copy(OrtValue* src, int64_t rows, int64_t dstRows, OrtValue* dst);

  /** Copy runs so far (what a decode step must leave unchanged). */
  int64_t Runs() const { return runs_; }

 private:
  OrtSession* session_ = nullptr;
  OrtMemoryInfo* hostInfo_ = nullptr;
  int64_t runs_ = 0;
};

}  // namespace ropewalk
