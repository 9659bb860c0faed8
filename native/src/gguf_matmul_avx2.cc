// ropewalk.MatMulQ8's AVX2 + FMA body (gguf_matmul_simd.inc); called only where the CPU has them.
#define ROPEWALK_Q8_FN Q8RowsAvx2
#define ROPEWALK_Q8_VNNI 0
#include "gguf_matmul_simd.inc"
