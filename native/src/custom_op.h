// What every ropewalk custom op shares: typed failures, int attributes, a matmul's inputs and
// output, and the OrtCustomOp table of a CPU op with float32 outputs.
//
// Contract: Fail(message) is an ORT_INVALID_ARGUMENT status; IntAttr fails naming the op and the
// attribute; OpenMatMulRun reads A float32 [..., K] (input 0) and `weights` weight inputs
// (1..weights) and allocates Y [..., N], failing when A's last dimension is not K or A has more
// than INT_MAX rows; Guarded turns what a compute throws (OrtError) into its run's status; MakeOp
// builds the op table (CPU EP, inputs of the given types, all required, outputs of one type: one float32 unless told).
#pragma once
#include <onnxruntime_c_api.h>

#include <climits>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "ort_runtime.h"

namespace ropewalk {

/** An ORT_INVALID_ARGUMENT status with `message` (one line, naming the op and the bad value). */
OrtStatus* Fail(const std::string& message);

/** The int attribute `name` of op `op` into `out`, or a failure naming both. */
OrtStatus* IntAttr(const OrtKernelInfo* info, const char* op, const char* name, int64_t* out);

/** An int attribute the op may leave out: `fallback` then. */
int64_t OptionalAttr(const OrtKernelInfo* info, const char* name, int64_t fallback);

/** A tensor's dimensions; its element count into `count` (and its element type into `type`, when given). @throws OrtError. */
std::vector<int64_t> Dims(const OrtValue* v, size_t* count, ONNXTensorElementDataType* type = nullptr);

/**
 * A matmul op's run: A float32 [..., K] and its weight inputs (1.., element counts in `counts`,
 * element types in `types`, data in `data`), the output Y [..., N] allocated; `rows` = A's rows (0: nothing to compute).
 */
struct MatMulRun {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t rows = 0;
  const void* data[2] = {nullptr, nullptr};
  size_t counts[2] = {0, 0};
  ONNXTensorElementDataType types[2] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED};
};

/** Opens a matmul run (see MatMulRun). @returns a status naming `op` for a bad A. @throws OrtError. */
OrtStatus* OpenMatMulRun(OrtKernelContext* ctx, const char* op, int64_t k, int64_t n, int weights, MatMulRun* run);

/** A tensor's data as `T*` (inputs too: the 1.21 C API has no const accessor; callers write only outputs). @throws OrtError. */
template <typename T>
T* TensorData(const OrtValue* v) {
  void* p = nullptr;
  Check(Ort().GetTensorMutableData(const_cast<OrtValue*>(v), &p), "GetTensorMutableData");
  return static_cast<T*>(p);
}

/** Catches what a compute throws (a failed ONNX Runtime call) as the run's status. */
template <typename Kernel, OrtStatus* (*Run)(Kernel*, OrtKernelContext*)>
OrtStatus* ORT_API_CALL Guarded(void* kernel, OrtKernelContext* ctx) {
  try {
    return Run(static_cast<Kernel*>(kernel), ctx);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
}

/** The inputs' element types of a custom op, in order. */
using InputTypes = std::vector<ONNXTensorElementDataType>;

/** One CPU custom op: inputs of `types`, `outputs` outputs of `outputType` (one float32 unless given). */
template <typename Kernel, OrtStatus* (*Run)(Kernel*, OrtKernelContext*)>
OrtCustomOp MakeOp(const char* name, InputTypes types, OrtStatus*(ORT_API_CALL* create)(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo*, void**),
                   size_t outputs = 1, ONNXTensorElementDataType outputType = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
  static const char* opName = name;
  static const InputTypes inputTypes = std::move(types);
  static const size_t outputCount = outputs;
  static const ONNXTensorElementDataType outputElement = outputType;
  OrtCustomOp op{};
  op.version = ORT_API_VERSION;
  op.GetName = [](const OrtCustomOp*) { return opName; };
  op.GetExecutionProviderType = [](const OrtCustomOp*) { return "CPUExecutionProvider"; };
  op.GetInputType = [](const OrtCustomOp*, size_t i) { return inputTypes[i]; };
  op.GetInputTypeCount = [](const OrtCustomOp*) -> size_t { return inputTypes.size(); };
  op.GetOutputType = [](const OrtCustomOp*, size_t) { return outputElement; };
  op.GetOutputTypeCount = [](const OrtCustomOp*) -> size_t { return outputCount; };
  op.KernelDestroy = [](void* kernel) { delete static_cast<Kernel*>(kernel); };
  op.GetInputCharacteristic = [](const OrtCustomOp*, size_t) { return INPUT_OUTPUT_REQUIRED; };
  op.GetOutputCharacteristic = [](const OrtCustomOp*, size_t) { return INPUT_OUTPUT_REQUIRED; };
  op.GetInputMemoryType = [](const OrtCustomOp*, size_t) { return OrtMemTypeDefault; };
  op.GetVariadicInputMinArity = [](const OrtCustomOp*) { return 1; };
  op.GetVariadicInputHomogeneity = [](const OrtCustomOp*) { return 1; };
  op.GetVariadicOutputMinArity = [](const OrtCustomOp*) { return 1; };
  op.GetVariadicOutputHomogeneity = [](const OrtCustomOp*) { return 1; };
  op.CreateKernelV2 = create;
  op.KernelComputeV2 = Guarded<Kernel, Run>;
  op.GetStartVersion = [](const OrtCustomOp*) { return 1; };
  op.GetEndVersion = [](const OrtCustomOp*) { return INT_MAX; };
  op.GetMayInplace = [](int**, int**) -> size_t { return 0; };
  op.ReleaseMayInplace = [](int*, int*) {};
  op.GetAliasMap = [](int**, int**) -> size_t { return 0; };
  op.ReleaseAliasMap = [](int*, int*) {};
  return op;
}

}  // namespace ropewalk
