// ropewalk.MatMulQ8's AVX512-VNNI body (256-bit vpdpbusd, AVX512VL; gguf_matmul_simd.inc);
// called only where the CPU has them.
#define ROPEWALK_Q8_FN Q8RowsVnni
#define ROPEWALK_Q8_VNNI 1
#include "gguf_matmul_simd.inc"
