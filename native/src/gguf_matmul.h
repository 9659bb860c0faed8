// ropewalk.MatMulQ8: y = x · Wᵀ over GGUF Q8_0 / Q4_0 weights in MatMulNBits' block layout, with
// llama.cpp's own CPU arithmetic (ggml-cpu's vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0), for the
// native backend's CPU graphs (main/engine/model/quantized-matmul.ts emits it; the JS backend's
// onnxruntime-node session cannot load custom ops and keeps MatMulNBits).
//
// Contract (the op, domain "ropewalk", version 1, CPU EP):
//   inputs  A float32 [..., K]; B uint8 [N, K/32, 32·bits/8] (MatMulNBits' blocks: 8 bits: q + 128
//           per byte; 4 bits: two a byte, element 2j in byte j's low nibble, 2j + 1 in its high);
//           scales [N · K/32]: float16 (the GGUF blocks' own fp16 d: half the scale bytes a decode
//           step streams) or float32 (scales no fp16 holds exactly: MXFP4's, IQ4_XS's, import-time ones).
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

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ropewalk {

/** Adds the "ropewalk" custom op domain (MatMulQ8, MatMulQ8K, GatherQ8K; MatMulF32: float_matmul.h) to `options`. @throws OrtError. */
void AddRopewalkOps(OrtSessionOptions* options);

/** Activations of one row quantized as llama.cpp's block_q8_0, for `kb` 32-blocks. */
struct Q8Row {
  const int8_t* q;        // [kb · 32]: for 4-bit weights each block's evens then odds (the blocks' nibble order)
  const float* d;         // [kb]: fp16(max|x| / 127), widened
  const int32_t* start;   // [kb]: −zp · Σ q of each block (zp the weights' zero point), where a sum over stored weights starts
};

/**
 * A weight's 32-block scales [N · K/32] as the op's input holds them: float32 values, or (half)
 * float16 bits, widened by the kernels as they read them (F16C; exact).
 */
struct Q8Scales {
  const void* data;
  bool half;
};

/**
 * y[n] for n in [n0, n1) over `rows` activation rows (y row-major [rows][ldy]), weights as in the
 * op's contract. The ISA variants compute the same sums; `Q8Kernel()` picks the one this CPU runs.
 */
using Q8RowsFn = void (*)(const Q8Row* x, int rows, const uint8_t* b, Q8Scales scales, int64_t kb, int bits,
                          int64_t n0, int64_t n1, float* y, int64_t ldy);

void Q8RowsScalar(const Q8Row* x, int rows, const uint8_t* b, Q8Scales scales, int64_t kb, int bits, int64_t n0,
                  int64_t n1, float* y, int64_t ldy);
void Q8RowsAvx2(const Q8Row* x, int rows, const uint8_t* b, Q8Scales scales, int64_t kb, int bits, int64_t n0,
                int64_t n1, float* y, int64_t ldy);
void Q8RowsVnni(const Q8Row* x, int rows, const uint8_t* b, Q8Scales scales, int64_t kb, int bits, int64_t n0,
                int64_t n1, float* y, int64_t ldy);
void Q8RowsAmx(const Q8Row* x, int rows, const uint8_t* b, Q8Scales scales, int64_t kb, int bits, int64_t n0,
               int64_t n1, float* y, int64_t ldy);

/** Whether this CPU has AVX512-VNNI with VL and BW (the 512-bit variants' features); AVX2 with FMA (the 256-bit ones). */
bool CpuHasAvx512Vnni();
bool CpuHasAvx2Fma();

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

// ---- ropewalk.MatMulQ8K: K-quant super-blocks (gguf_matmul_k.cc) ----
//
// Contract (the op, domain "ropewalk", version 1, CPU EP):
//   inputs  A float32 [..., K]; B uint8 [N, K/256, bytes]: the GGUF tensor's super-blocks as stored
//           (ggml-common.h: block_q4_K 144 bytes = fp16 d, fp16 dmin, 12 bytes of 6-bit scales and
//           mins, 128 bytes of nibbles; block_q5_K 176 = Q4_K's with 32 bytes of 5th bits before
//           the nibbles; block_q6_K 210 bytes = 128 bytes of low nibbles, 64 of high 2-bit pairs,
//           16 int8 scales, fp16 d).
//   attrs   K, N (ints, as the shapes), ggml_type 12 (Q4_K) | 13 (Q5_K) | 14 (Q6_K), and
//           row_groups 0 (default: B's rows as the GGUF stores them) | 4 (rows 4g..4g+3 interleaved
//           by super-block, `KBlockIndex`, so a decode step's four weight rows are one stream).
//   output  Y float32 [..., N].
//   Per row of A, as llama.cpp's CPU matmul of these types: the activations quantized per 256 as
//   block_q8_K (quantize_row_q8_K_ref: m = the value of largest |x|, q = nearest_int(−127 / m · x),
//   d = −m / 127 kept in float32, and each 16 values' sum of q), then per super-block the integer
//   sums of ggml_vec_dot_q{4,5,6}_K_q8_K exact in int32 and
//   y_n = Σ_sb d_x·d_w·Σ_j sc_j·Σ q_w·q_x − d_x·dmin_w·Σ_j m_j·bsum_j (Q4_K, Q5_K; Q6_K: q_w − 32
//   and no min term), the float sums in 8 lanes (16 with AVX512) summed at the end of the row.
// Errors as MatMulQ8's: a bad attribute fails the kernel's creation (K not a multiple of 256, a type
// other than these), shapes that disagree fail the run, each naming the value.

/** GGML type ids MatMulQ8K takes. */
constexpr int kGgmlQ4K = 12, kGgmlQ5K = 13, kGgmlQ6K = 14;

/** Rows a group of B holds when `row_groups` is 4 (the rows the decode kernels read at once). */
constexpr int64_t kKRowGroup = 4;

/**
 * Where super-block i (of kb a row) of weight row n lies in B, counted in super-blocks. Rows
 * [0, grouped) lie in groups of kKRowGroup interleaved by super-block (row 4g + r's block i at
 * 4g·kb + 4i + r: the four rows' block 0, then their block 1, …); rows from `grouped` on (the last
 * N mod 4, or every row for grouped 0: the GGUF's own order) one after another.
 */
inline int64_t KBlockIndex(int64_t n, int64_t i, int64_t kb, int64_t grouped) {
  return n < grouped ? (n - n % kKRowGroup) * kb + kKRowGroup * i + n % kKRowGroup : n * kb + i;
}

/** Super-blocks from row n's block i to its block i + 1: kKRowGroup in a group, 1 after. */
inline int64_t KBlockStride(int64_t n, int64_t grouped) { return n < grouped ? kKRowGroup : 1; }

/** Row n of B as a kernel walks it: its block 0 and the bytes from each block to the next. */
struct KRowWalk {
  const uint8_t* first;
  int64_t step;
};

/** Row n's walk in B (blocks of `bytes`; KBlockIndex, KBlockStride): block i at first + i·step. */
inline KRowWalk KRowOf(const uint8_t* b, int64_t n, int64_t kb, int64_t grouped, int64_t bytes) {
  return {b + KBlockIndex(n, 0, kb, grouped) * bytes, KBlockStride(n, grouped) * bytes};
}

/**
 * f(n, i) for every row n in [n0, n1) and super-block i < kb, in B's storage order: a whole group's
 * rows block by block (their block 0, then 1, …), a row outside one (or a group cut by n0, n1)
 * alone. For kernels that visit each block once (the prefill unpackers), so B streams.
 */
template <typename F>
inline void ForKBlocksStored(int64_t n0, int64_t n1, int64_t kb, int64_t grouped, F&& f) {
  for (int64_t n = n0; n < n1;) {
    const int64_t rows = n % kKRowGroup == 0 && n + kKRowGroup <= std::min(n1, grouped) ? kKRowGroup : 1;
    for (int64_t i = 0; i < kb; i++) {
      for (int64_t r = 0; r < rows; r++) f(n + r, i);
    }
    n += rows;
  }
}

/** The rows of an N-row B stored in groups: N rounded down to kKRowGroup for row_groups 4, else 0. */
constexpr int64_t KGroupedRows(int64_t n, int64_t rowGroups) { return rowGroups == kKRowGroup ? n - n % kKRowGroup : 0; }

/** Activations of one row as llama.cpp's block_q8_K, for `kb` 256-blocks. */
struct Q8KRow {
  const int8_t* q;       // [kb · 256]
  const int16_t* bsums;  // [kb · 16]: the sum of each 16 of q, then [kb · 8]: of each 32 (QuantizeRowQ8K writes both)
  const float* d;        // [kb]: −m / 127 for m the block's value of largest magnitude (0 for a zero block)
  // The same row as MatMulQ8's 8-bit activations, for Q8KRowsPanel (`Q8KPanelViews` fills them),
  // in `KPanelBlocks` blocks of 32 a super-block: Q4_K / Q5_K's 8 of 32 values, Q6_K's 16 of 16
  // values each followed by 16 zeros (its scales are per 16).
  const int8_t* q32;       // [kb · blocks · 32]: q itself (Q4_K, Q5_K) or the padded copy (Q6_K)
  const float* d32;        // [kb · blocks]: d of each block's super-block
  const int32_t* start32;  // [kb · blocks]: −128 · Σ q of each block
  const float* sums32;     // [kb · 8]: d · Σ q of each 32 (what the Q4_K / Q5_K mins multiply)
};

/** Blocks of 32 MatMulQ8 sees in one super-block of `ggmlType` on the panel path: 16 for Q6_K, else 8. */
constexpr int64_t KPanelBlocks(int64_t ggmlType) { return ggmlType == kGgmlQ6K ? 16 : 8; }

/**
 * Q8KRowsPanel's views of a row quantized as block_q8_K, written to d32 and start32 ([kb ·
 * KPanelBlocks]), sums32 ([kb · 8], Q4_K / Q5_K) and, for Q6_K, qpad ([kb · 512] int8), and set in `row`.
 */
void Q8KPanelViews(Q8KRow* row, int64_t ggmlType, int64_t kb, float* d32, int32_t* start32, float* sums32, int8_t* qpad);

/**
 * Prefill on MatMulQ8's kernels (its VNNI panels or AMX tiles, `Q8Kernel`): the rows [n0, n1)
 * unpacked in a buffer of the thread's to 8-bit blocks of 32 (value + 128; Q4_K / Q5_K: scale
 * d·sc_j; Q6_K: each 16 values padded with 16 zeros, scale d·sc_g), multiplied by the
 * activations' 8-bit views (the same q, d per block), then for Q4_K / Q5_K the min term
 * −Σ_j (dmin·m_j)·(d_x·Σ_32 q_x) added in float. The integer sums are MatMulQ8K's; the float sums
 * in another order (within float rounding of Q8KRowsScalar). Same signature as Q8KRowsFn; x's
 * views must be filled (Q8KPanelViews).
 */
void Q8KRowsPanel(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, float* y,
                  int64_t ldy);

/** Rows [n0, n1) of a Q6_K weight as padded 8-bit blocks of 32 (16 values q + 96 = (q − 32) + 128, 16 × 128) and scales d·sc_g (AVX2). */
void UnpackQ6KToQ8Avx2(const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, uint8_t* blocks, float* scales);

/** Rows [n0, n1) of a Q4_K / Q5_K weight as 8-bit blocks (value + 128), scales d·sc_j and mins dmin·m_j transposed [kb·8][n1 − n0] (AVX2). */
void UnpackK4ToQ8Avx2(int ggmlType, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, uint8_t* blocks, float* scales, float* minsT);

/** y[r][c] −= Σ_b sums32[r][b] · minsT[b][c] for c < cols (ldy the row stride), AVX512. */
void SubtractMinsAvx512(const Q8KRow* x, int rows, int64_t blocks32, const float* minsT, int64_t cols, float* y, int64_t ldy);


/** Bytes of one super-block of `ggmlType` (144 Q4_K, 176 Q5_K, 210 Q6_K), 0 for a type MatMulQ8K does not take. */
int64_t KQuantBlockBytes(int64_t ggmlType);

/** y[n] for n in [n0, n1) over `rows` activation rows (y row-major [rows][ldy]); B as in the contract, its first `grouped` rows in groups (KBlockIndex). */
using Q8KRowsFn = void (*)(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1,
                           float* y, int64_t ldy);

void Q8KRowsScalar(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, float* y,
                   int64_t ldy);
void Q8KRowsAvx2(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
void Q8KRowsAvx512(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, float* y,
                   int64_t ldy);

/** The fastest variant this CPU has, under the names `Q8Kernel` gives its own (avx512vnni, avx2, scalar). */
Q8KRowsFn Q8KKernel(const char** name = nullptr);

// ---- ropewalk.GatherQ8K: rows of a K-quant weight, dequantized (gguf_matmul_k.cc) ----
//
// Contract (domain "ropewalk", version 1, CPU EP): inputs B uint8 [V, D/256, bytes] (MatMulQ8K's
// B: a tied embedding and classifier share one initializer), ids int64 [...]; attrs D, ggml_type
// (12 | 13 | 14), row_groups (0 | 4, as MatMulQ8K's: B's layout); output float32 [..., D]: row ids[i] of B dequantized as ggml's dequantize_row_*
// (Q4_K, Q5_K: (d·sc)·q − dmin·m; Q6_K: (d·sc)·(q − 32), in float32). An id outside
// [0, V) fails the run naming it.

/**
 * A row's kb super-blocks of `ggmlType`, the first at `first` and each `step` bytes after the one
 * before (KRowOf's walk: one block in the GGUF's layout, kKRowGroup in a group), dequantized into
 * out[kb · 256] as ggml's dequantize_row_*.
 */
void DequantizeRowK(int ggmlType, const uint8_t* first, int64_t kb, int64_t step, float* out);

/**
 * One row x[K] (K a multiple of 256) as block_q8_K (see the contract) into q[K], bsums[K/16]
 * followed by the sums of each 32 (K/32 more: `kQ8KSums` per row in all), d[K/256]; with `paired`, q holds each 128 values' four 32s in the order 0, 2, 1, 3 (the order
 * in which the 512-bit Q4_K / Q5_K kernel reads 64 bytes of nibbles: `Q8KPaired`); bsums stay in
 * the values' own order.
 */
void QuantizeRowQ8K(const float* x, int64_t k, bool paired, int8_t* q, int16_t* bsums, float* d);

/** int16 sums QuantizeRowQ8K writes per row of K: K/16 of 16 values, K/32 of 32. */
constexpr int64_t Q8KSums(int64_t k) { return k / 16 + k / 32; }

/** Whether kernel variant `fn` reads `ggmlType`'s activations in QuantizeRowQ8K's paired order. */
bool Q8KPaired(Q8KRowsFn fn, int64_t ggmlType);

}  // namespace ropewalk
