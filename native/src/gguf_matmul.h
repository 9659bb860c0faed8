// ropewalk.MatMulQ8: y = x · Wᵀ over GGUF Q8_0 / Q4_0 weights in MatMulNBits' block layout, with
// llama.cpp's own CPU arithmetic (ggml-cpu's vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0), for the
// native backend's CPU graphs (main/engine/model/quantized-matmul.ts emits it; the JS backend's
// onnxruntime-node session cannot load custom ops and keeps MatMulNBits).
//
// Contract (the op, domain "ropewalk", version 1, CPU EP):
//   inputs  A float32 [..., K]; B uint8 [N, K/32, 32·bits/8] (MatMulNBits' blocks: 8 bits: q + 128
//           per byte; 4 bits: two a byte, element 2j in byte j's low nibble, 2j + 1 in its high);
//           scales float32 [N · K/32] (the blocks' fp16 scales, widened).
//   attrs   K, N (ints, as the inputs' shapes), bits 4 | 8, block_size 32.
//   output  Y float32 [..., N].
//   Per row of A and 32-block b: d = max|x_b| / 127, the activations q = round(x / d) (ties to
//   even, as _mm256_round_ps; 0 where d = 0) and d itself rounded to fp16, as quantize_row_q8_0
//   stores block_q8_0; then y_n = Σ_b (w_scale[n,b] · fp16(d_b)) · Σ_i (wq[n,b,i] − zp) · q_b,i,
//   zp 128 (8 bits) or 8 (4 bits), the integer sums exact (int32). The float sum: one row of A
//   (decode) with AVX2 or VNNI in the order of llama.cpp's AVX2 loop (8 lanes accumulated per block,
//   summed at the end); several rows (prefill) on VNNI or AMX, and every row without AVX2, block by block
//   (each block's whole int32 sum times its scale product, as ggml's generic dot products and its
//   repacked GEMMs); several rows on AVX2 each as one row. Rows of N are split over ONNX Runtime's
//   intra-op pool (KernelContext_ParallelFor).
// Errors: a bad attribute (bits, block_size, K not a multiple of 32) fails the kernel's creation; inputs
// whose shapes disagree with K and N fail the run, each with an OrtStatus naming the value.
#pragma once
#include <onnxruntime_c_api.h>

#include <cstddef>
#include <cstdint>

namespace ropewalk {

/** Adds the "ropewalk" custom op domain (MatMulQ8) to `options`. @throws OrtError. */
void AddGgufMatMulOps(OrtSessionOptions* options);

/** Activations of one row quantized as llama.cpp's block_q8_0, for `kb` 32-blocks. */
struct Q8Row {
  const int8_t* q;        // [kb · 32]: for 4-bit weights each block's evens then odds (the blocks' nibble order)
  const float* d;         // [kb]: fp16(max|x| / 127), widened
  const int32_t* start;   // [kb]: −zp · Σ q of each block (zp the weights' zero point), where a sum over stored weights starts
};

/**
 * y[n] for n in [n0, n1) over `rows` activation rows (y row-major [rows][ldy]), weights as in the
 * op's contract. The ISA variants compute the same sums; `Q8Kernel()` picks the one this CPU runs.
 */
using Q8RowsFn = void (*)(const Q8Row* x, int rows, const uint8_t* b, const float* scales, int64_t kb, int bits,
                          int64_t n0, int64_t n1, float* y, int64_t ldy);

void Q8RowsScalar(const Q8Row* x, int rows, const uint8_t* b, const float* scales, int64_t kb, int bits, int64_t n0,
                  int64_t n1, float* y, int64_t ldy);
void Q8RowsAvx2(const Q8Row* x, int rows, const uint8_t* b, const float* scales, int64_t kb, int bits, int64_t n0,
                int64_t n1, float* y, int64_t ldy);
void Q8RowsVnni(const Q8Row* x, int rows, const uint8_t* b, const float* scales, int64_t kb, int bits, int64_t n0,
                int64_t n1, float* y, int64_t ldy);
void Q8RowsAmx(const Q8Row* x, int rows, const uint8_t* b, const float* scales, int64_t kb, int bits, int64_t n0,
               int64_t n1, float* y, int64_t ldy);

/** Whether this CPU has AMX-INT8 (with AVX512-VNNI) and Linux lets the process use its tiles (asked once). */
bool Q8AmxUsable();

/** The fastest variant this CPU has: AMX-INT8, AVX512-VNNI (with VL), AVX2 + FMA, or scalar; "…" names it. */
Q8RowsFn Q8Kernel(const char** name = nullptr);

/**
 * One row x[K] quantized as block_q8_0 (see the file comment) into q[K], d[K/32] and start[K/32]
 * (Q8Row's fields) for weights of `bits` 4 | 8: with 4, each block's 32 values are stored evens
 * first, then odds, and zp is 8; with 8, zp is 128. The variants give the same bytes (the AVX2
 * one as llama.cpp's AVX2 quantize_row_q8_0); QuantizeRowQ8 runs the one this CPU has.
 */
using Q8QuantizeFn = void (*)(const float* x, int64_t k, int bits, int8_t* q, float* d, int32_t* start);
void QuantizeRowQ8(const float* x, int64_t k, int bits, int8_t* q, float* d, int32_t* start);
void QuantizeRowQ8Scalar(const float* x, int64_t k, int bits, int8_t* q, float* d, int32_t* start);
void QuantizeRowQ8Avx2(const float* x, int64_t k, int bits, int8_t* q, float* d, int32_t* start);

}  // namespace ropewalk
