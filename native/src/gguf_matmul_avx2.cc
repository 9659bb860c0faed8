// ropewalk.MatMulQ8's AVX2 + FMA body and activation quantizer (gguf_matmul_simd.inc); called only
// where the CPU has them.
#define ROPEWALK_Q8_FN Q8RowsAvx2
#define ROPEWALK_Q8_VNNI 0
#define ROPEWALK_Q8_QUANTIZE_FN QuantizeRowQ8Avx2
#include "gguf_matmul_simd.inc"
