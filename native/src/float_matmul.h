// ropewalk.MatMulF32: y = x · Wᵀ over a float32 weight in its source layout [N, K], for the native
// backend's CPU graphs: main/engine/model/decoder-graph.ts emits it for a float classifier (one
// row, the last position's), where ONNX Runtime's Gemm would keep a prepacked copy of the weight
// beside it (a tied embedding held twice). The JS backend's onnxruntime-node session cannot load
// custom ops and keeps Gemm.
//
// Contract (the op, domain "ropewalk", version 1, CPU EP):
//   inputs  A float32 [..., K]; B float32 [N, K].
//   attrs   K, N (ints, as the inputs' shapes).
//   output  Y float32 [..., N].
//   Per row of A, y_n = Σ_k W[n,k] · x_k by this file's dot products, one weight row after the
//   other, so that a task's rows are one sequential read (four rows read side by side are four
//   streams, which the hardware prefetcher follows worse: 31 against 35 GB/s here), in one order
//   on every ISA: 4 accumulators of 16 lanes over steps of 64 values (GCC's vector extension,
//   lowered to a zmm, two ymm or four xmm), folded (0+2) + (1+3), the 16 lanes summed in order,
//   then the values left over added one by one (ggml-cpu's ggml_vec_dot_f32 shape; the AVX-512 and
//   AVX2 + FMA variants give the same bits, the scalar one rounds each product apart). Rows of N are split over ONNX Runtime's intra-op pool
//   (KernelContext_ParallelFor) in chunks of about 256 KiB of weights. Several rows of A read W
//   once each (the graphs give it one; a prefill's linears stay on MLAS, which prepacks B once).
// Errors: K or N not positive fails the kernel's creation; inputs whose shapes disagree with K and
// N fail the run, each with an OrtStatus naming the value.
#pragma once
#include <onnxruntime_c_api.h>

#include <cstdint>

namespace ropewalk {

/**
 * y[n] = Σ_k w[n·k ..][k] · x[k] for n in [n0, n1): x float32 [k], w float32 [N, k] row-major,
 * y float32 [N]. The ISA variants compile one rule (the file comment's order); `FloatKernel()`
 * picks the one this CPU runs.
 */
using FloatRowsFn = void (*)(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y);

void FloatRowsScalar(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y);
void FloatRowsAvx2(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y);
void FloatRowsAvx512(const float* x, const float* w, int64_t k, int64_t n0, int64_t n1, float* y);

/** The fastest variant this CPU has: AVX-512F, AVX2 + FMA, or scalar; `name` gets "avx512" | "avx2" | "scalar". */
FloatRowsFn FloatKernel(const char** name = nullptr);

/** The op's table (see the file comment), for the "ropewalk" domain. */
OrtCustomOp* FloatMatMulOp();

}  // namespace ropewalk
