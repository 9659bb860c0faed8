// One decoder session and its KV cache, bound once with IoBinding (docs/ARCHITECTURE.md "KV cache").
//
// Graph contract (main/engine/model/io-names.ts): input_ids int64 [1, T], rope_cos_cache /
// rope_sin_cache float32 [C_rope, R/2] (the whole RoPE cache; the graph gathers the step's rows at
// positions it derives from seqlens_k), seqlens_k int32 [1] = P+T-1, total_seq_len int32 [] = P+T,
// past_key_i/past_value_i float32 or float16 (the graph's KV dtype) [1, Hkv, C, headDim] (BNSH), outputs logits float32 [1, V] and
// present_key_i/present_value_i, which are bound to the SAME OrtValues as past_*, so
// GroupQueryAttention writes only rows [P, P+T) in place and nothing of the cache moves per step.
//
// Memory, by execution provider:
//   - KV: one tensor per layer and key/value [1][Hkv][C][headDim] of the KV dtype, owned here. CPU:
//     ONNX Runtime's CPU allocator (64-byte aligned), zeroed. CUDA ("Cuda") and WebGPU
//     ("WebGPU_Buf"): the session's allocator for that device memory, so the kernels read and
//     write them in place (on WebGPU a tensor's data is a buffer handle, not an address: one
//     allocation per tensor, never offset). Resize(C', keep) is the only place the cache moves:
//     once per growth, rows [0, keep) of each head, on the device (KvCopier) or by memcpy on CPU.
//   - logits: the caller's float32 [V] host buffer (a JS Float32Array), bound once; the only
//     per-step output that leaves the runtime.
//   - RoPE cache: SetRope(cos, sin, rows), once per RoPE growth, copies the caller's tables into a
//     host tensor and binds it; on a device ONNX Runtime copies it into the provider's memory
//     (the session's allocator) when it is bound (IOBinding::BindInput: CopyOneInputAcrossDevices)
//     and the binding holds that copy until the next SetRope, so no step moves it again.
//   - token ids, seqlens_k, total_seq_len: bound per step (T int64 ids and two int32s: on a
//     device ONNX Runtime copies the ids and seqlens_k in when they are bound).
// Counters (Stats()) say what moved: a warm decode step changes none but `runs`.
// Not thread-safe: one Bind+Run at a time (the N-API layer enforces it).
#pragma once
#include <onnxruntime_c_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "host_pages.h"
#include "kv_copier.h"

namespace ropewalk {

/** Sizes the decoder needs; all positive. */
struct DecoderShape {
  int64_t numLayers;
  int64_t numKvHeads;
  int64_t headDim;
  int64_t vocabSize;
  int64_t rotaryHalf;  // R/2, columns of rope_cos_cache / rope_sin_cache
  bool kvFloat16;      // KV tensors (past/present) float16 rather than float32
  // [numLayers] or empty: 1 for a sliding-window layer, whose KV tensors have a capacity of their
  // own and hold positions [S, P) from row 0 (main/engine/cache/kv-window.ts); only when the graph
  // has seqlens_k_window / total_seq_len_window (else every layer is global).
  std::vector<uint8_t> windowLayers;
};

/** What the decoder has done since it opened (tests read it: a warm decode step moves nothing). */
struct DecoderStats {
  int64_t runs = 0;       // graph runs (prefill chunks and decode steps)
  int64_t kvBinds = 0;    // times the KV tensors were bound as past/present (once per growth)
  int64_t kvAllocs = 0;   // KV tensors allocated
  int64_t kvCopies = 0;   // device copy-graph runs (growths, saves, restores, shifts)
  int64_t ropeBinds = 0;  // times the RoPE cache was bound (once per RoPE growth)
  int64_t ropeRows = 0;   // positions the bound RoPE cache holds
};

/** The copy graph (main/engine/model/kv-copy-graph.ts), needed on a device EP. */
struct CopyModel {
  const void* data = nullptr;
  size_t bytes = 0;
};

class Decoder {
 public:
  /**
   * Opens modelPath. ep: "cpu", "cuda" (the CUDA provider, options V2) or "webgpu" (the WebGPU
   * provider by name); when the append or the session creation with it fails, falls back to
   * CPU and keeps the reason (FallbackReason()). copyModel: opened on the same EP when it is a
   * device. profilePrefix: non-empty turns ONNX Runtime's profiler on (file `<prefix>_<time>.json`)
   * until EndProfiling(). logits: host float32 [vocabSize], must outlive the decoder.
   * intraOpThreads: ONNX Runtime's intra-op thread pool size (0: its default, the physical cores).
   * weightsFile: the model's external-data file (its name as the model's `location`s give it: the
   *   last path component); non-empty on the CPU EP and on Linux, read whole into memory that may be
   *   2 MiB pages (host_pages.h ReadIntoHugePages) and handed to ONNX Runtime as that file's
   *   contents, instead of ONNX Runtime mapping the file in 4 KiB pages; empty: as ONNX Runtime maps it.
   * @throws OrtError when the model cannot be opened on the CPU either, or the copy graph not on
   *   the device the model opened on; std::runtime_error naming weightsFile when it cannot be read.
   */
  Decoder(const std::string& modelPath, const DecoderShape& shape, const std::string& ep, CopyModel copyModel,
          const std::string& profilePrefix, float* logits, int intraOpThreads = 0, const std::string& weightsFile = "");
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  /** Bytes of weights read into memory (weightsFile, CPU EP on Linux); 0: ONNX Runtime maps the file. */
  size_t WeightsInMemory() const { return weightsBytes_; }
  /** True on CUDA and WebGPU: the KV tensors are device memory. */
  bool OnDevice() const { return ep_ != "cpu"; }
  /** The execution provider in use: "cpu", "cuda" or "webgpu". */
  const std::string& ExecutionProvider() const { return ep_; }
  /** Stops the profiler and returns the file it wrote. @throws OrtError (e.g. profiling was off). */
  std::string EndProfiling();
  const std::string& FallbackReason() const { return fallbackReason_; }
  int64_t Capacity() const { return capacity_; }
  /** Capacity of the sliding-window layers' KV tensors (0 when there are none). */
  int64_t WindowCapacity() const { return windowCapacity_; }
  /** Whether the graph has the sliding-window layers' own lengths and this model has such layers. */
  bool WindowInputs() const { return !shape_.windowLayers.empty(); }
  int64_t NumLayers() const { return shape_.numLayers; }
  int64_t RotaryHalf() const { return shape_.rotaryHalf; }
  /** Floats a compact copy takes: 2 * Hkv * headDim * (length per global layer + windowLength per windowed one). */
  int64_t CompactFloats(int64_t length, int64_t windowLength) const;
  /** ONNX Runtime's name of the memory the KV tensors live in: "Cpu", "Cuda" or "WebGPU_Buf". */
  std::string KvMemory() const;
  DecoderStats Stats() const;

  /**
   * Reallocates the global layers' KV tensors (every layer's without window layers) at `capacity`
   * positions, copying rows [0, keep) of every head (the rest zeroed), and binds them as past_*
   * and present_*. @throws OrtError (allocation, copy) with the old tensors kept and bound,
   * std::invalid_argument when keep > min(old capacity, capacity).
   */
  void Resize(int64_t capacity, int64_t keep);

  /**
   * The sliding-window layers' tensors: rows [from, from + rows) move to [0, rows) (the oldest
   * leave as the window moves) at `capacity` positions (reallocated when it changes; in place
   * otherwise). On a device, a move with from > 0 goes through the host. @throws as Resize;
   * std::invalid_argument when from + rows > the old capacity or rows > capacity.
   */
  void ResizeWindow(int64_t capacity, int64_t from, int64_t rows);

  /**
   * Binds the whole RoPE cache, cos/sin float32 [rows][R/2] (copied into tensors of the
   * decoder's own, so the caller's arrays may go), as rope_cos_cache / rope_sin_cache: once per
   * RoPE growth. @throws std::invalid_argument for rows <= 0; OrtError (then no RoPE cache is
   * bound and Bind refuses until a SetRope succeeds).
   */
  void SetRope(const float* cos, const float* sin, int64_t rows);

  /**
   * Binds one step's small inputs: T token ids, seqlens_k and total_seq_len (positions past ..
   * past+T-1). @throws std::invalid_argument when past + T > Capacity() or past + T exceeds the
   * bound RoPE cache's rows; OrtError.
   */
  void Bind(const int32_t* tokenIds, int64_t count, int64_t past, int64_t windowPast);

  /** Runs the bound step; on return logits holds the last position's scores. @throws OrtError. */
  void Run();

  /**
   * Context shift (llama.cpp's n_discard): of the `length` positions held, drops [keep, keep+drop)
   * and moves rows [keep+drop, length) down by `drop` positions in every layer and head; the moved
   * keys' first rotaryDim dims are rotated by -drop positions: each pair (a, b) becomes
   * (a*cos + b*sin, b*cos - a*sin) with cos/sin [rotaryDim/2] the caller's cos(drop*invFreq_i),
   * sin(drop*invFreq_i) (unscaled). Pairs are (2i, 2i+1) when interleaved, else (i, i+R/2).
   * Values only move. On a device each tensor's rows go to the host, shift, and come back.
   * layerTables (nullable, [numLayers]): layer l turns by the layerTables[l]-th run of rotaryDim/2
   * angles in cos/sin (Gemma 3's global and local RoPE); the caller has checked its range.
   * @throws std::invalid_argument for a range outside [0, length] or length > Capacity(); OrtError.
   */
  // The sliding-window layers' rows shift by (windowKeep, windowDrop, windowLength), windowDrop
  // possibly 0 (their rows all after the cut only turn), as KvCache.windowDiscard says.
  void Shift(int64_t keep, int64_t drop, int64_t length, const float* cos, const float* sin, bool interleaved,
             int64_t rotaryDim, const uint8_t* layerTables, int64_t windowKeep, int64_t windowDrop, int64_t windowLength);

  /**
   * Copies rows [0, length) of every layer's keys and values (rows [0, windowLength) of a
   * sliding-window layer's) to/from `host`, laid out compactly, layer by layer
   * [2 (key, value)][Hkv][rows][headDim] float32 whatever the KV dtype (what the
   * engine keeps in memory for a conversation it switched away from; float16 KV is converted,
   * round to nearest even). CopyIn needs Capacity() >= length.
   * @throws std::invalid_argument when length > Capacity(); OrtError for a failed device copy.
   */
  void CopyOut(int64_t length, int64_t windowLength, float* host);
  void CopyIn(int64_t length, int64_t windowLength, const float* host);

 private:
  void OpenSession(const std::string& modelPath, const std::string& ep, const std::string& profilePrefix, int intraOpThreads,
                   const std::string& weightsFile);
  void Release();
  void DropWeights();  // gives back weights_ (nothing when empty)
  void BindKv(const std::vector<OrtValue*>& kv);
  OrtValue* NewKv(int64_t capacity);
  void ReleaseKv(OrtValue* kv);
  void ZeroKv(OrtValue* kv, int64_t capacity);
  char* HostData(OrtValue* value) const;
  void CopyRows(OrtValue* src, int64_t srcCapacity, OrtValue* dst, int64_t dstCapacity, int64_t rows, int64_t from = 0,
                bool dstZeroed = false);
  void Reallocate(bool windowed, int64_t capacity, int64_t from, int64_t rows);
  bool Windowed(size_t i) const { return !shape_.windowLayers.empty() && shape_.windowLayers[i / 2] != 0; }
  int64_t CapacityOf(size_t i) const { return Windowed(i) ? windowCapacity_ : capacity_; }
  void ReadCompact(size_t i, int64_t length, float* out);
  void WriteCompact(size_t i, int64_t length, const float* in);
  OrtValue* WrapStaging(std::vector<char>& bytes, int64_t length);
  void CopyHost(bool out, int64_t length, int64_t windowLength, float* host);
  bool HasInput(const char* name) const;
  void ShiftTensor(float* t, int64_t stride, bool isKey, int64_t keep, int64_t drop, int64_t length, const float* cos,
                   const float* sin, bool interleaved, int64_t rotaryDim) const;
  void BindValue(const char* name, OrtValue* value, bool asOutput);
  OrtValue* Wrap(const OrtMemoryInfo* info, void* data, size_t bytes, const int64_t* dims, size_t rank,
                 ONNXTensorElementDataType type);
  void BindRopeTable(const char* name, const float* table, int64_t rows);

  DecoderShape shape_;
  float* logits_;
  std::string ep_ = "cpu";
  std::string fallbackReason_;
  OrtSession* session_ = nullptr;
  OrtIoBinding* binding_ = nullptr;
  OrtMemoryInfo* hostInfo_ = nullptr;
  OrtAllocator* hostAllocator_ = nullptr;    // ONNX Runtime's default CPU allocator (not owned)
  OrtMemoryInfo* deviceInfo_ = nullptr;      // CUDA / WebGPU only
  OrtAllocator* deviceAllocator_ = nullptr;  // CUDA / WebGPU only: the session's, for deviceInfo_
  std::unique_ptr<KvCopier> copier_;         // CUDA / WebGPU only
  ONNXTensorElementDataType kvType_;  // FLOAT or FLOAT16
  size_t kvElem_;                     // bytes per KV element: 4 or 2
  std::vector<OrtValue*> kv_;  // [layer*2 + (0 key | 1 value)]: [1][Hkv][C][headDim] of kvType_
  // On the CPU each KV tensor wraps zeroed pages of its own (host_pages.h), given back in ReleaseKv.
  std::unordered_map<const OrtValue*, HostPages> kvPages_;
  // The weights file's contents (weightsFile on the CPU EP), given back after the session in Release().
  HostPages weights_;
  size_t weightsBytes_ = 0;
  int64_t capacity_ = 0;
  int64_t windowCapacity_ = 0;
  DecoderStats stats_;
  std::vector<int64_t> tokenIds_;  // input_ids [1, T], reused across steps
  int32_t seqlensK_ = 0;
  int32_t totalSeqLen_ = 0;
  OrtValue* seqlensValue_ = nullptr;  // wraps seqlensK_, bound every step
  OrtValue* totalValue_ = nullptr;    // wraps totalSeqLen_
  int32_t seqlensKWindow_ = 0;        // the sliding-window layers' own lengths (WindowInputs())
  int32_t totalSeqLenWindow_ = 0;
  OrtValue* seqlensWindowValue_ = nullptr;
  OrtValue* totalWindowValue_ = nullptr;
  std::vector<std::string> pastNames_, presentNames_;  // [layer*2 + (0 key | 1 value)]
};

}  // namespace ropewalk
