// Node-API surface of the addon (typed by main/engine/model/native-addon.ts):
//   loadRuntime(libraryPath: string): string        ORT version; once per process
//   vulkanDevices(): { name: string, type: string }[]   this machine's Vulkan devices (throws without a loader)
//   matMulQ8Kernel, matMulQ8(...)       ropewalk.MatMulQ8's ISA and its kernel alone (gguf_matmul_addon.cc)
//   new NativeDecoder(modelPath, { executionProvider: 'cpu'|'webgpu'|'cuda', numLayers, numKvHeads,
//                     headDim, vocabSize, rotaryHalf, logits: Float32Array(vocabSize),
//                     kvDtype?: 'float32'|'float16', copyModel?: Uint8Array, profilePrefix?: string,
//                     intraOpThreads?: number (0 or absent: ORT's default),
//                     weightsFile?: string (the model's external-data file: read into memory on the CPU, Linux) })
//                     kvDtype: the graph's past/present dtype (default float32)
//                     copyModel: the KV copy graph (kv-copy-graph.ts), needed for 'webgpu'/'cuda'
//     .executionProvider: 'cpu'|'webgpu'|'cuda'    .fallbackReason: string|null
//     .endProfiling(): string             stops the profiler (profilePrefix given), returns its file
//     .capacity: number
//     .weightsInMemory: number            bytes of weightsFile read into memory (0: ONNX Runtime maps the file)
//     .kvMemory: string                   ONNX Runtime's name of the KV tensors' memory ('Cpu', 'Cuda', 'WebGPU_Buf')
//     .stats: { runs, kvBinds, kvAllocs, kvCopies, ropeBinds, ropeRows }   what moved so far (numbers)
//     .resize(capacity, keep): void       grow the KV cache, keeping rows [0, keep)
//     .windowInputs: boolean              the graph has sliding-window lengths and windowLayers marks some
//     .windowCapacity: number
//     .resizeWindow(capacity, from, rows): void   sliding-window layers: rows [from, from+rows) → [0, rows)
//     .setRope(cos: Float32Array, sin: Float32Array, rows: number): void
//                                         bind the whole RoPE cache [rows, R/2] (copied), once per growth
//     .run(tokenIds: Int32Array, past: number, windowPast?: number): Promise<void>
//                                         one step, run on the libuv pool (Napi::AsyncWorker)
//     .shift(keep, drop, length, cos: Float32Array, sin: Float32Array, interleaved: boolean, rotaryDim,
//            layerTables?: Uint8Array, windowKeep?, windowDrop?, windowLength?): void
//                                         context shift: drop [keep, keep+drop), rotate the moved keys
//     .copyOut(length, dst: Float32Array, windowLength?): void  rows [0, length) ([0, windowLength) of a
//                                         windowed layer) → per layer [2][Hkv][rows][headDim]
//     .copyIn(length, src: Float32Array, windowLength?): void   the reverse (capacity >= length)
//   options.windowLayers?: Uint8Array [numLayers], 1 for a sliding-window layer
//     .dispose(): void
// Errors are JS Errors whose message is one line naming the ONNX Runtime call; `code` is
// 'ORT_LOAD' (runtime or model cannot be loaded), 'ORT_RUN' (a run or resize failed) or
// 'ORT_ARG' (bad argument), so the TypeScript side maps them to typed engine errors.
#include <napi.h>

#include <memory>
#include <stdexcept>

#include "decoder.h"
#include "ort_runtime.h"
#include "vulkan_devices.h"

namespace ropewalk {
void ExportGgufMatMul(Napi::Env env, Napi::Object exports);  // gguf_matmul_addon.cc
}  // namespace ropewalk

namespace {

using ropewalk::Decoder;
using ropewalk::DecoderShape;

[[noreturn]] void ThrowAs(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  throw error;
}

// Runs fn, turning C++ exceptions into JS errors with `code`.
template <typename Fn>
auto Guard(Napi::Env env, const char* ortCode, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    ThrowAs(env, "ORT_ARG", e.what());
  } catch (const std::exception& e) {
    ThrowAs(env, ortCode, e.what());
  }
}

int64_t PositiveInt(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber() || v.As<Napi::Number>().Int64Value() <= 0 ||
      v.As<Napi::Number>().DoubleValue() != static_cast<double>(v.As<Napi::Number>().Int64Value())) {
    ThrowAs(o.Env(), "ORT_ARG", std::string("option ") + key + " must be a positive integer");
  }
  return v.As<Napi::Number>().Int64Value();
}

Napi::Value LoadRuntime(const Napi::CallbackInfo& info) {
  if (!info[0].IsString()) ThrowAs(info.Env(), "ORT_ARG", "loadRuntime(libraryPath): expected a string");
  std::string path = info[0].As<Napi::String>();
  return Napi::String::New(info.Env(), Guard(info.Env(), "ORT_LOAD", [&] { return ropewalk::LoadOrt(path); }));
}

Napi::Value VulkanDevices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto devices = Guard(env, "ORT_LOAD", [] { return ropewalk::ListVulkanDevices(); });
  Napi::Array out = Napi::Array::New(env, devices.size());
  for (size_t i = 0; i < devices.size(); i++) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("name", devices[i].name);
    d.Set("type", devices[i].type);
    out.Set(static_cast<uint32_t>(i), d);
  }
  return out;
}

class NativeDecoder;

// One step off the JS thread; holds the decoder's JS object so it outlives the run.
class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Env env, NativeDecoder* owner, Napi::Object self);
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;
  Napi::Promise Promise() { return deferred_.Promise(); }

 private:
  NativeDecoder* owner_;
  Napi::ObjectReference self_;
  Napi::Promise::Deferred deferred_;
};

class NativeDecoder : public Napi::ObjectWrap<NativeDecoder> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeDecoder",
                       {InstanceAccessor<&NativeDecoder::ExecutionProvider>("executionProvider"),
                        InstanceAccessor<&NativeDecoder::FallbackReason>("fallbackReason"),
                        InstanceAccessor<&NativeDecoder::Capacity>("capacity"),
                        InstanceAccessor<&NativeDecoder::WeightsInMemory>("weightsInMemory"),
                        InstanceAccessor<&NativeDecoder::WindowCapacity>("windowCapacity"),
                        InstanceAccessor<&NativeDecoder::WindowInputs>("windowInputs"),
                        InstanceMethod<&NativeDecoder::ResizeWindow>("resizeWindow"),
                        InstanceAccessor<&NativeDecoder::KvMemory>("kvMemory"),
                        InstanceAccessor<&NativeDecoder::Stats>("stats"),
                        InstanceMethod<&NativeDecoder::Resize>("resize"), InstanceMethod<&NativeDecoder::Run>("run"),
                        InstanceMethod<&NativeDecoder::SetRope>("setRope"),
                        InstanceMethod<&NativeDecoder::Shift>("shift"), InstanceMethod<&NativeDecoder::CopyOut>("copyOut"),
                        InstanceMethod<&NativeDecoder::CopyIn>("copyIn"),
                        InstanceMethod<&NativeDecoder::EndProfiling>("endProfiling"),
                        InstanceMethod<&NativeDecoder::Dispose>("dispose")});
  }

  explicit NativeDecoder(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeDecoder>(info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString() || !info[1].IsObject()) {
      ThrowAs(env, "ORT_ARG", "new NativeDecoder(modelPath, options): expected a string and an object");
    }
    std::string modelPath = info[0].As<Napi::String>();
    Napi::Object o = info[1].As<Napi::Object>();
    std::string kvDtype = o.Has("kvDtype") && !o.Get("kvDtype").IsUndefined() ? o.Get("kvDtype").ToString().Utf8Value() : "float32";
    if (kvDtype != "float32" && kvDtype != "float16") {
      ThrowAs(env, "ORT_ARG", "kvDtype must be 'float32' or 'float16', got '" + kvDtype + "'");
    }
    DecoderShape shape{PositiveInt(o, "numLayers"), PositiveInt(o, "numKvHeads"), PositiveInt(o, "headDim"),
                       PositiveInt(o, "vocabSize"), PositiveInt(o, "rotaryHalf"), kvDtype == "float16", {}};
    Napi::Value windows = o.Get("windowLayers");
    if (!windows.IsUndefined()) {
      if (!windows.IsTypedArray() || windows.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array ||
          static_cast<int64_t>(windows.As<Napi::Uint8Array>().ElementLength()) != shape.numLayers) {
        ThrowAs(env, "ORT_ARG", "windowLayers must be a Uint8Array of numLayers (" + std::to_string(shape.numLayers) + ") entries");
      }
      Napi::Uint8Array w = windows.As<Napi::Uint8Array>();
      bool any = false;
      for (size_t i = 0; i < w.ElementLength(); i++) any = any || w[i] != 0;
      if (any) shape.windowLayers.assign(w.Data(), w.Data() + w.ElementLength());
    }
    std::string ep = o.Get("executionProvider").ToString();
    if (ep != "cpu" && ep != "webgpu" && ep != "cuda") {
      ThrowAs(env, "ORT_ARG", "executionProvider must be 'cpu', 'webgpu' or 'cuda', got '" + ep + "'");
    }
    std::string profilePrefix = o.Has("profilePrefix") && !o.Get("profilePrefix").IsUndefined() ? o.Get("profilePrefix").ToString().Utf8Value() : "";
    int intraOpThreads = 0;
    if (o.Has("intraOpThreads") && !o.Get("intraOpThreads").IsUndefined()) {
      const double t = o.Get("intraOpThreads").ToNumber().DoubleValue();
      if (!(t >= 0 && t <= 1024 && t == static_cast<int>(t))) ThrowAs(env, "ORT_ARG", "intraOpThreads must be a whole number from 0 to 1024, got " + std::to_string(t));
      intraOpThreads = static_cast<int>(t);
    }
    std::string weightsFile;
    if (o.Has("weightsFile") && !o.Get("weightsFile").IsUndefined()) {
      if (!o.Get("weightsFile").IsString()) ThrowAs(env, "ORT_ARG", "weightsFile must be a path string");
      weightsFile = o.Get("weightsFile").As<Napi::String>().Utf8Value();
    }
    Napi::Value logits = o.Get("logits");
    if (!logits.IsTypedArray() || logits.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array ||
        logits.As<Napi::Float32Array>().ElementLength() != static_cast<size_t>(shape.vocabSize)) {
      ThrowAs(env, "ORT_ARG", "logits must be a Float32Array of vocabSize (" + std::to_string(shape.vocabSize) + ") floats");
    }
    ropewalk::CopyModel copyModel;
    Napi::Value copy = o.Get("copyModel");
    if (!copy.IsUndefined()) {
      if (!copy.IsTypedArray() || copy.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
        ThrowAs(env, "ORT_ARG", "copyModel must be a Uint8Array (the KV copy graph)");
      }
      copyModel = {copy.As<Napi::Uint8Array>().Data(), copy.As<Napi::Uint8Array>().ByteLength()};
    }
    logits_ = Napi::Persistent(logits.As<Napi::Object>());
    float* logitsData = logits.As<Napi::Float32Array>().Data();
    decoder_ = Guard(env, "ORT_LOAD", [&] { return std::make_unique<Decoder>(modelPath, shape, ep, copyModel, profilePrefix, logitsData, intraOpThreads, weightsFile); });
  }

  Decoder& Live(Napi::Env env) {
    if (!decoder_) ThrowAs(env, "ORT_ARG", "the native decoder was disposed");
    if (busy_) ThrowAs(env, "ORT_ARG", "the native decoder is already running a step");
    return *decoder_;
  }

  void Finish() { busy_ = false; }
  void RunBound() { decoder_->Run(); }

 private:
  Napi::Value ExecutionProvider(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), decoder_ ? decoder_->ExecutionProvider() : "cpu");
  }
  Napi::Value EndProfiling(const Napi::CallbackInfo& info) {
    Decoder& d = Live(info.Env());
    return Napi::String::New(info.Env(), Guard(info.Env(), "ORT_RUN", [&] { return d.EndProfiling(); }));
  }
  Napi::Value FallbackReason(const Napi::CallbackInfo& info) {
    if (!decoder_ || decoder_->FallbackReason().empty()) return info.Env().Null();
    return Napi::String::New(info.Env(), decoder_->FallbackReason());
  }
  Napi::Value WeightsInMemory(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), decoder_ ? static_cast<double>(decoder_->WeightsInMemory()) : 0);
  }
  Napi::Value Capacity(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), decoder_ ? static_cast<double>(decoder_->Capacity()) : 0);
  }
  Napi::Value WindowCapacity(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), decoder_ ? static_cast<double>(decoder_->WindowCapacity()) : 0);
  }
  Napi::Value WindowInputs(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), decoder_ && decoder_->WindowInputs());
  }
  void ResizeWindow(const Napi::CallbackInfo& info) {
    Decoder& d = Live(info.Env());
    const int64_t capacity = info[0].ToNumber().Int64Value();
    const int64_t from = info[1].ToNumber().Int64Value();
    const int64_t rows = info[2].ToNumber().Int64Value();
    Guard(info.Env(), "ORT_RUN", [&] { d.ResizeWindow(capacity, from, rows); });
  }

  Napi::Value KvMemory(const Napi::CallbackInfo& info) {
    Decoder& d = Live(info.Env());
    return Napi::String::New(info.Env(), Guard(info.Env(), "ORT_RUN", [&] { return d.KvMemory(); }));
  }
  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const ropewalk::DecoderStats s = Live(env).Stats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("runs", Napi::Number::New(env, static_cast<double>(s.runs)));
    o.Set("kvBinds", Napi::Number::New(env, static_cast<double>(s.kvBinds)));
    o.Set("kvAllocs", Napi::Number::New(env, static_cast<double>(s.kvAllocs)));
    o.Set("kvCopies", Napi::Number::New(env, static_cast<double>(s.kvCopies)));
    o.Set("ropeBinds", Napi::Number::New(env, static_cast<double>(s.ropeBinds)));
    o.Set("ropeRows", Napi::Number::New(env, static_cast<double>(s.ropeRows)));
    return o;
  }

  void Resize(const Napi::CallbackInfo& info) {
    Decoder& d = Live(info.Env());
    const int64_t capacity = info[0].ToNumber().Int64Value();
    const int64_t keep = info[1].ToNumber().Int64Value();
    Guard(info.Env(), "ORT_RUN", [&] { d.Resize(capacity, keep); });
  }

  // Synchronous: a shift happens once per context-full, and the engine lives in a worker thread.
  void Shift(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Decoder& d = Live(env);
    for (int i = 3; i <= 4; i++) {
      if (!info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
        ThrowAs(env, "ORT_ARG", "shift: cos and sin must be Float32Arrays");
      }
    }
    const int64_t keep = info[0].ToNumber().Int64Value();
    const int64_t drop = info[1].ToNumber().Int64Value();
    const int64_t length = info[2].ToNumber().Int64Value();
    Napi::Float32Array cos = info[3].As<Napi::Float32Array>();
    Napi::Float32Array sin = info[4].As<Napi::Float32Array>();
    const bool interleaved = info[5].ToBoolean().Value();
    const int64_t rotaryDim = info[6].ToNumber().Int64Value();
    // Optional layer tables (Uint8Array [numLayers]): layer l turns by the tables[l]-th rotaryDim/2 angles.
    const bool hasTables = info.Length() > 7 && !info[7].IsUndefined();
    const size_t tables = hasTables ? cos.ElementLength() / static_cast<size_t>(rotaryDim > 0 ? rotaryDim / 2 : 1) : 1;
    if (rotaryDim <= 0 || cos.ElementLength() != tables * static_cast<size_t>(rotaryDim / 2) || sin.ElementLength() != cos.ElementLength()) {
      ThrowAs(env, "ORT_ARG", "shift: cos/sin must hold rotaryDim/2 (" + std::to_string(rotaryDim / 2) + ") floats per table, got " +
                                  std::to_string(cos.ElementLength()) + "/" + std::to_string(sin.ElementLength()));
    }
    const uint8_t* layerTables = nullptr;
    if (hasTables) {
      if (!info[7].IsTypedArray() || info[7].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) ThrowAs(env, "ORT_ARG", "shift: layer tables must be a Uint8Array");
      Napi::Uint8Array t = info[7].As<Napi::Uint8Array>();
      if (static_cast<int64_t>(t.ElementLength()) != d.NumLayers()) ThrowAs(env, "ORT_ARG", "shift: one layer table entry per layer");
      for (size_t i = 0; i < t.ElementLength(); i++) {
        if (t[i] >= tables) ThrowAs(env, "ORT_ARG", "shift: a layer table entry past the rotations given");
      }
      layerTables = t.Data();
    }
    // The sliding-window layers' own range (absent: the same as the others').
    const auto arg = [&](size_t i, int64_t fallback) { return info.Length() > i && !info[i].IsUndefined() ? info[i].ToNumber().Int64Value() : fallback; };
    const int64_t windowKeep = arg(8, keep), windowDrop = arg(9, drop), windowLength = arg(10, length);
    Guard(env, "ORT_RUN", [&] { d.Shift(keep, drop, length, cos.Data(), sin.Data(), interleaved, rotaryDim, layerTables, windowKeep, windowDrop, windowLength); });
  }

  void CopyOut(const Napi::CallbackInfo& info) { Copy(info, true); }
  void CopyIn(const Napi::CallbackInfo& info) { Copy(info, false); }

  // Synchronous, like Shift: once per conversation switch.
  void Copy(const Napi::CallbackInfo& info, bool out) {
    Napi::Env env = info.Env();
    Decoder& d = Live(env);
    if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
      ThrowAs(env, "ORT_ARG", "KV copy: the host buffer must be a Float32Array");
    }
    const int64_t length = info[0].ToNumber().Int64Value();
    Napi::Float32Array host = info[1].As<Napi::Float32Array>();
    const int64_t windowLength = info.Length() > 2 && !info[2].IsUndefined() ? info[2].ToNumber().Int64Value() : length;
    if (length < 0 || windowLength < 0) ThrowAs(env, "ORT_ARG", "KV copy: negative length");
    const size_t want = static_cast<size_t>(d.CompactFloats(length, windowLength));
    if (host.ElementLength() != want) {
      ThrowAs(env, "ORT_ARG", "KV copy: " + std::to_string(length) + " positions need " + std::to_string(want) +
                                  " floats, the buffer holds " + std::to_string(host.ElementLength()));
    }
    Guard(env, "ORT_RUN", [&] { out ? d.CopyOut(length, windowLength, host.Data()) : d.CopyIn(length, windowLength, host.Data()); });
  }

  // Synchronous, like Shift: once per RoPE growth. The tables are copied, so they need not outlive it.
  void SetRope(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Decoder& d = Live(env);
    for (int i = 0; i <= 1; i++) {
      if (!info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
        ThrowAs(env, "ORT_ARG", "setRope: cos and sin must be Float32Arrays");
      }
    }
    Napi::Float32Array cos = info[0].As<Napi::Float32Array>();
    Napi::Float32Array sin = info[1].As<Napi::Float32Array>();
    const int64_t rows = info[2].ToNumber().Int64Value();
    const size_t want = static_cast<size_t>(rows < 0 ? 0 : rows) * static_cast<size_t>(d.RotaryHalf());
    if (rows <= 0 || cos.ElementLength() != want || sin.ElementLength() != want) {
      ThrowAs(env, "ORT_ARG", "setRope: cos/sin hold " + std::to_string(cos.ElementLength()) + "/" + std::to_string(sin.ElementLength()) +
                                  " floats; " + std::to_string(rows) + " positions need " + std::to_string(want));
    }
    Guard(env, "ORT_RUN", [&] { d.SetRope(cos.Data(), sin.Data(), rows); });
  }

  // Validates and binds one step's inputs on the JS thread (the ids are copied there).
  void BindStep(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Decoder& d = Live(env);
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
      ThrowAs(env, "ORT_ARG", "tokenIds must be an Int32Array");
    }
    Napi::Int32Array ids = info[0].As<Napi::Int32Array>();
    const int64_t count = static_cast<int64_t>(ids.ElementLength());
    const int64_t past = info[1].ToNumber().Int64Value();
    const int64_t windowPast = info.Length() > 2 && !info[2].IsUndefined() ? info[2].ToNumber().Int64Value() : past;
    Guard(env, "ORT_RUN", [&] { d.Bind(ids.Data(), count, past, windowPast); });
  }

  // Off the JS thread although the engine already lives in a worker. Measured (2 shared cores):
  // the same step run synchronously was 0.146 ms against 0.163 ms here on stories260K and equal
  // within noise (48 / 44 ms) with Qwen3-0.6B attention shapes; but a synchronous step never
  // yields to the worker's event loop, so a cancel message would wait for the whole generation.
  Napi::Value Run(const Napi::CallbackInfo& info) {
    BindStep(info);
    busy_ = true;
    auto* worker = new RunWorker(info.Env(), this, info.This().As<Napi::Object>());
    Napi::Promise promise = worker->Promise();
    worker->Queue();
    return promise;
  }

  void Dispose(const Napi::CallbackInfo& info) {
    Live(info.Env());
    decoder_.reset();
    logits_.Reset();
  }

  std::unique_ptr<Decoder> decoder_;
  Napi::ObjectReference logits_;  // keeps the bound logits buffer alive
  bool busy_ = false;
};

RunWorker::RunWorker(Napi::Env env, NativeDecoder* owner, Napi::Object self)
    : Napi::AsyncWorker(env, "ropewalk.decoderStep"),
      owner_(owner),
      self_(Napi::Persistent(self)),
      deferred_(Napi::Promise::Deferred::New(env)) {}

void RunWorker::Execute() {
  try {
    owner_->RunBound();
  } catch (const std::exception& e) {
    SetError(e.what());
  }
}

void RunWorker::OnOK() {
  owner_->Finish();
  deferred_.Resolve(Env().Undefined());
}

void RunWorker::OnError(const Napi::Error& e) {
  owner_->Finish();
  Napi::Error error = Napi::Error::New(Env(), e.Message());
  error.Set("code", Napi::String::New(Env(), "ORT_RUN"));
  deferred_.Reject(error.Value());
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("loadRuntime", Napi::Function::New<LoadRuntime>(env, "loadRuntime"));
  exports.Set("vulkanDevices", Napi::Function::New<VulkanDevices>(env, "vulkanDevices"));
  exports.Set("NativeDecoder", NativeDecoder::Define(env));
  ropewalk::ExportGgufMatMul(env, exports);  // matMulQ8Kernel, matMulQ8: gguf_matmul_addon.cc
  return exports;
}

}  // namespace

NODE_API_MODULE(ropewalk_native, Init)
