// ropewalk.MatMulQ8's AVX512-VNNI body (256-bit vpdpbusd, AVX512VL; gguf_matmul_simd.inc) and
// MatMulQ8K's 512-bit one (AVX512BW; gguf_matmul_k_simd.inc); called only where the CPU has them.
#define ROPEWALK_Q8_FN Q8RowsVnni
#define ROPEWALK_Q8_VNNI 1
#include "gguf_matmul_simd.inc"

#define ROPEWALK_Q8K_FN Q8KRowsAvx512
#define ROPEWALK_Q8K_512 1
#include "gguf_matmul_k_simd.inc"
