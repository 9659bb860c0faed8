// See ort_runtime.h.
#include "ort_runtime.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>

namespace ropewalk {
namespace {
std::mutex g_mutex;  // worker threads may load the addon concurrently
const OrtApi* g_api = nullptr;
std::string g_path;
std::string g_version;
OrtEnv* g_env = nullptr;
}  // namespace

std::string LoadOrt(const std::string& libraryPath) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_api != nullptr) {
    if (libraryPath != g_path) {
      throw OrtError("ONNX Runtime is already loaded from " + g_path + "; not loading a second one from " + libraryPath);
    }
    return g_version;
  }
  void* handle = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw OrtError(std::string("dlopen: ") + dlerror());
  using GetApiBase = const OrtApiBase* (*)();
  auto getBase = reinterpret_cast<GetApiBase>(dlsym(handle, "OrtGetApiBase"));
  if (getBase == nullptr) throw OrtError("dlsym: " + libraryPath + " has no OrtGetApiBase");
  const OrtApiBase* base = getBase();
  const OrtApi* api = base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    throw OrtError("ONNX Runtime " + std::string(base->GetVersionString()) + " at " + libraryPath +
                   " does not serve C API version " + std::to_string(ORT_API_VERSION));
  }
  g_api = api;
  g_path = libraryPath;
  g_version = base->GetVersionString();
  return g_version;
}

const OrtApi& Ort() {
  if (g_api == nullptr) throw OrtError("ONNX Runtime is not loaded (call loadRuntime first)");
  return *g_api;
}

OrtEnv* SharedEnv() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_env == nullptr) {
    // Fatal only: failures reach the caller as exceptions, said in one sentence there.
    Check(Ort().CreateEnv(ORT_LOGGING_LEVEL_FATAL, "ropewalk", &g_env), "CreateEnv");
  }
  return g_env;
}

void AppendExecutionProvider(OrtSessionOptions* options, const std::string& ep) {
  const OrtApi& api = Ort();
  if (ep == "webgpu") {
    // By name: the runtime onnxruntime-node ships registers "WebGPU" (its own defaults: adapter
    // chosen by Dawn, device 0). Older runtimes refuse the name, and the caller falls back.
    Check(api.SessionOptionsAppendExecutionProvider(options, "WebGPU", nullptr, nullptr, 0),
          "SessionOptionsAppendExecutionProvider(WebGPU)");
  }
  if (ep == "cuda") {
    OrtCUDAProviderOptionsV2* raw = nullptr;
    Check(api.CreateCUDAProviderOptions(&raw), "CreateCUDAProviderOptions");
    std::unique_ptr<OrtCUDAProviderOptionsV2, void (*)(OrtCUDAProviderOptionsV2*)> cuda(raw, api.ReleaseCUDAProviderOptions);
    // Defaults (device 0, the session's arena) are what we want; UpdateCUDAProviderOptions would
    // only restate them, and it already needs the provider library loaded.
    Check(api.SessionOptionsAppendExecutionProvider_CUDA_V2(options, cuda.get()),
          "SessionOptionsAppendExecutionProvider_CUDA_V2");
  }
}

void Check(OrtStatus* status, const char* call) {
  if (status == nullptr) return;
  const OrtApi& api = *g_api;
  std::string message = std::string(call) + ": " + api.GetErrorMessage(status);
  api.ReleaseStatus(status);
  auto newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  throw OrtError(message);
}

}  // namespace ropewalk
