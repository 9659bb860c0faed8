// ropewalk.MatMulQ8's AVX2 + FMA body and activation quantizer (gguf_matmul_simd.inc) and MatMulQ8K's
// (gguf_matmul_k_simd.inc); called only where the CPU has them.
#define ROPEWALK_Q8_FN Q8RowsAvx2
#define ROPEWALK_Q8_VNNI 0
#define ROPEWALK_Q8_QUANTIZE_FN QuantizeRowQ8Avx2
#include "gguf_matmul_simd.inc"

#define ROPEWALK_Q8K_FN Q8KRowsAvx2
#define ROPEWALK_Q8K_512 0
#include "gguf_matmul_k_simd.inc"
