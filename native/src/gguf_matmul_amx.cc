// ropewalk.MatMulQ8's AMX-INT8 body (gguf_matmul_simd.inc: VNNI's, with tile multiplies for 16
// activation rows or more); called only where the CPU has AMX-INT8 and AVX512-VNNI and Linux let
// the process use the tiles (Q8AmxUsable).
#define ROPEWALK_Q8_FN Q8RowsAmx
#define ROPEWALK_Q8_VNNI 1
#define ROPEWALK_Q8_AMX 1
#include "gguf_matmul_simd.inc"
