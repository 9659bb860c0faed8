// ropewalk.MatMulQ8's and MatMulQ8K's AVX2 + FMA bodies (gguf_matmul_simd.inc, gguf_matmul_k_simd.inc); called only where the CPU has them.
#define ROPEWALK_Q8_FN Q8RowsAvx2
#define ROPEWALK_Q8_VNNI 0
#include "gguf_matmul_simd.inc"

#define ROPEWALK_Q8K_FN Q8KRowsAvx2
#define ROPEWALK_Q8K_512 0
#include "gguf_matmul_k_simd.inc"
