// The one ONNX Runtime of the process, reached through its versioned C API.
//
// Contract: LoadOrt(path) dlopens the libonnxruntime.so.1 that onnxruntime-node ships (the JS
// side resolves the path), so the JS backend and this addon share one runtime; a second call with
// the same path is a no-op, with another path it throws. The headers are 1.21's (Debian trixie's
// libonnxruntime-dev); GetApi(ORT_API_VERSION = 21) is served by any later runtime. Every
// OrtStatus goes through Check, which frees it and throws OrtError naming the C API call.
#pragma once
#include <onnxruntime_c_api.h>

#include <stdexcept>
#include <string>

namespace ropewalk {

/** A failed ONNX Runtime call or load; what() is one line: "<call>: <ORT message>". */
class OrtError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** Loads the runtime at `libraryPath` once per process. @throws OrtError. @returns its version. */
std::string LoadOrt(const std::string& libraryPath);

/** The loaded C API. @throws OrtError when LoadOrt has not succeeded. */
const OrtApi& Ort();

/** The process-wide OrtEnv (created on first use, never released: ORT shares one per process). */
OrtEnv* SharedEnv();

/**
 * Appends `ep` ("webgpu": by name, ONNX Runtime's defaults; "cuda": CUDA provider options V2,
 * device 0) to `options`; "cpu" appends nothing. @throws OrtError naming the failed call.
 */
void AppendExecutionProvider(OrtSessionOptions* options, const std::string& ep);

/** Throws OrtError("<call>: <message>") when status is an error; frees it either way. */
void Check(OrtStatus* status, const char* call);

}  // namespace ropewalk
