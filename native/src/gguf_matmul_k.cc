// ropewalk.MatMulQ8K's arithmetic (contract in gguf_matmul.h): block_q8_K activations and the
// scalar kernel, which is the definition the SIMD bodies (gguf_matmul_k_simd.inc) must equal in
// their integer sums; the variant chooser. From ggml's definitions (ggml-quants.c
// quantize_row_q8_K_ref, dequantize_row_q4_K / _q5_K / _q6_K for the block layouts, ggml-cpu's
// generic ggml_vec_dot_q{4,5,6}_K_q8_K for the sums), written here, not copied.
#include <cmath>
#include <cstring>
#include <vector>

#include "gguf_matmul.h"
#include "half.h"

namespace ropewalk {

int64_t KQuantBlockBytes(int64_t ggmlType) {
  if (ggmlType == kGgmlQ4K) return 144;
  if (ggmlType == kGgmlQ5K) return 176;
  if (ggmlType == kGgmlQ6K) return 210;
  return 0;
}

namespace {

// ggml's nearest_int: round half to even by adding 1.5 · 2^23 (|v| ≤ 2^22), inlined — std::nearbyint
// is a libm call per value in this file's baseline ISA (~12 % of a 1K Q4_K_M prefill).
inline int NearestInt(float v) {
  const float shifted = v + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace

bool Q8KPaired(Q8KRowsFn fn, int64_t ggmlType) { return fn == Q8KRowsAvx512 && ggmlType != kGgmlQ6K; }

void QuantizeRowQ8K(const float* x, int64_t k, bool paired, int8_t* q, int16_t* bsums, float* d) {
  for (int64_t b = 0; b < k / 256; b++) {
    const float* xb = x + b * 256;
    int8_t* qb = q + b * 256;
    float amax = 0, max = 0;
    for (int i = 0; i < 256; i++) {
      if (std::fabs(xb[i]) > amax) amax = std::fabs(xb[i]), max = xb[i];
    }
    if (amax == 0) {
      d[b] = 0;
      std::memset(qb, 0, 256);
      std::memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
      std::memset(bsums + k / 16 + b * 8, 0, 8 * sizeof(int16_t));
      continue;
    }
    const float iscale = -127.f / max;
    for (int i = 0; i < 256; i++) {
      const int v = NearestInt(iscale * xb[i]);
      qb[i] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; g++) {
      int sum = 0;
      for (int i = 0; i < 16; i++) sum += qb[16 * g + i];
      bsums[b * 16 + g] = static_cast<int16_t>(sum);
    }
    for (int g = 0; g < 8; g++) bsums[k / 16 + b * 8 + g] = static_cast<int16_t>(bsums[b * 16 + 2 * g] + bsums[b * 16 + 2 * g + 1]);
    if (paired) {  // 32s 1 and 2 of each 128 swap places
      for (int h = 0; h < 2; h++) {
        int8_t tmp[32];
        std::memcpy(tmp, qb + 128 * h + 32, 32);
        std::memcpy(qb + 128 * h + 32, qb + 128 * h + 64, 32);
        std::memcpy(qb + 128 * h + 64, tmp, 32);
      }
    }
    d[b] = 1 / iscale;
  }
}

namespace {

float Half(const uint8_t* at) {
  uint16_t h;
  std::memcpy(&h, at, 2);
  return HalfToFloat(h);
}

// Q4_K sub-block j's 6-bit scale and min (ggml's get_scale_min_k4).
void ScaleMinK4(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63, *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Value l of Q4_K / Q5_K sub-block j (Q5_K: the 5th bit from qh).
int ValueK4(const uint8_t* blk, bool five, int j, int l) {
  const uint8_t* qs = blk + (five ? 48 : 16) + 32 * (j / 2);
  const int low = (qs[l] >> (4 * (j & 1))) & 15;
  return five ? low | (((blk[16 + l] >> j) & 1) << 4) : low;
}

// One super-block of Q4_K / Q5_K against one of q8_K: d_x·d·Σ_j sc_j·Σ q·q_x − d_x·dmin·Σ_j m_j·(bsum_2j + bsum_2j+1).
float DotQ4K(const uint8_t* blk, bool five, const int8_t* q8, const int16_t* bsums, float dx) {
  int32_t isum = 0, msum = 0;
  for (int j = 0; j < 8; j++) {
    int sc, m;
    ScaleMinK4(blk + 4, j, &sc, &m);
    int32_t dot = 0;
    for (int l = 0; l < 32; l++) dot += ValueK4(blk, five, j, l) * q8[32 * j + l];
    isum += sc * dot;
    msum += m * (bsums[2 * j] + bsums[2 * j + 1]);
  }
  return dx * Half(blk) * static_cast<float>(isum) - dx * Half(blk + 2) * static_cast<float>(msum);
}

// One super-block of Q6_K against one of q8_K: d_x·d·Σ_g sc_g·Σ (q − 32)·q_x over 16 groups of 16.
float DotQ6K(const uint8_t* blk, const int8_t* q8, float dx) {
  const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
  int32_t isum = 0;
  for (int half = 0; half < 2; half++) {
    const uint8_t* ql = blk + 64 * half;
    const uint8_t* qh = blk + 128 + 32 * half;
    int32_t dots[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // the half's 8 groups of 16
    for (int l = 0; l < 32; l++) {
      const int e = l / 16;
      dots[0 + e] += (((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32) * q8[128 * half + l];
      dots[2 + e] += (((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[128 * half + 32 + l];
      dots[4 + e] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[128 * half + 64 + l];
      dots[6 + e] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[128 * half + 96 + l];
    }
    for (int g = 0; g < 8; g++) isum += scales[8 * half + g] * dots[g];
  }
  return dx * Half(blk + 208) * static_cast<float>(isum);
}

}  // namespace

void DequantizeRowK(int ggmlType, const uint8_t* first, int64_t kb, int64_t step, float* out) {
  for (int64_t i = 0; i < kb; i++, out += 256) {
    if (ggmlType != kGgmlQ6K) {
      const bool five = ggmlType == kGgmlQ5K;
      const uint8_t* blk = first + i * step;
      const float d = Half(blk), dmin = Half(blk + 2);
      for (int j = 0; j < 8; j++) {
        int sc, m;
        ScaleMinK4(blk + 4, j, &sc, &m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; l++) out[32 * j + l] = d1 * static_cast<float>(ValueK4(blk, five, j, l)) - m1;
      }
    } else {
      const uint8_t* blk = first + i * step;
      const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
      const float d = Half(blk + 208);
      for (int half = 0; half < 2; half++) {
        const uint8_t* ql = blk + 64 * half;
        const uint8_t* qh = blk + 128 + 32 * half;
        float* y = out + 128 * half;
        const int8_t* sc = scales + 8 * half;
        for (int l = 0; l < 32; l++) {
          const int e = l / 16;
          y[l] = d * static_cast<float>(sc[e]) * static_cast<float>(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
          y[l + 32] = d * static_cast<float>(sc[e + 2]) * static_cast<float>(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
          y[l + 64] = d * static_cast<float>(sc[e + 4]) * static_cast<float>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          y[l + 96] = d * static_cast<float>(sc[e + 6]) * static_cast<float>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
    }
  }
}

void Q8KRowsScalar(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, float* y,
                   int64_t ldy) {
  const int64_t bytes = KQuantBlockBytes(ggmlType);
  for (int r = 0; r < rows; r++) {
    for (int64_t n = n0; n < n1; n++) {
      float sum = 0;
      for (int64_t i = 0; i < kb; i++) {
        const uint8_t* blk = b + KBlockIndex(n, i, kb, grouped) * bytes;
        const int8_t* q8 = x[r].q + i * 256;
        sum += ggmlType == kGgmlQ6K ? DotQ6K(blk, q8, x[r].d[i]) : DotQ4K(blk, ggmlType == kGgmlQ5K, q8, x[r].bsums + i * 16, x[r].d[i]);
      }
      y[r * ldy + n] = sum;
    }
  }
}

void Q8KPanelViews(Q8KRow* row, int64_t ggmlType, int64_t kb, float* d32, int32_t* start32, float* sums32, int8_t* qpad) {
  if (ggmlType == kGgmlQ6K) {
    for (int64_t g = 0; g < kb * 16; g++) {
      d32[g] = row->d[g / 16];
      start32[g] = -128 * row->bsums[g];
      std::memcpy(qpad + 32 * g, row->q + 16 * g, 16);
      std::memset(qpad + 32 * g + 16, 0, 16);
    }
    row->q32 = qpad;
  } else {
    const int16_t* pairs = row->bsums + kb * 16;  // QuantizeRowQ8K's sums of 32
    for (int64_t b = 0; b < kb * 8; b++) {
      d32[b] = row->d[b / 8];
      start32[b] = -128 * pairs[b];
      sums32[b] = row->d[b / 8] * static_cast<float>(pairs[b]);
    }
    row->q32 = row->q;
  }
  row->d32 = d32, row->start32 = start32, row->sums32 = sums32;
}

void Q8KRowsPanel(int ggmlType, const Q8KRow* x, int rows, const uint8_t* b, int64_t kb, int64_t grouped, int64_t n0, int64_t n1, float* y,
                  int64_t ldy) {
  // The thread's own buffers for the unpacked rows, kept across calls (no allocation per chunk).
  thread_local std::vector<uint8_t> blocks;
  thread_local std::vector<float> scales, minsT;
  thread_local std::vector<Q8Row> views;
  const int64_t cols = n1 - n0, perRow = kb * KPanelBlocks(ggmlType);  // blocks of 32 a row
  blocks.resize(static_cast<size_t>(cols * perRow * 32));
  scales.resize(static_cast<size_t>(cols * perRow));
  views.resize(static_cast<size_t>(rows));
  for (int r = 0; r < rows; r++) views[r] = {x[r].q32, x[r].d32, x[r].start32};
  if (ggmlType == kGgmlQ6K) {
    UnpackQ6KToQ8Avx2(b, kb, grouped, n0, n1, blocks.data(), scales.data());
    Q8Kernel()(views.data(), rows, blocks.data(), Q8Scales{scales.data(), false}, perRow, 8, 0, cols, y + n0, ldy);
    return;
  }
  minsT.resize(static_cast<size_t>(cols * perRow));
  UnpackK4ToQ8Avx2(ggmlType, b, kb, grouped, n0, n1, blocks.data(), scales.data(), minsT.data());
  Q8Kernel()(views.data(), rows, blocks.data(), Q8Scales{scales.data(), false}, perRow, 8, 0, cols, y + n0, ldy);
  SubtractMinsAvx512(x, rows, perRow, minsT.data(), cols, y + n0, ldy);
}

Q8KRowsFn Q8KKernel(const char** name) {
  static const struct Choice { Q8KRowsFn fn; const char* name; } choice = [] {
    if (CpuHasAvx512Vnni()) return Choice{Q8KRowsAvx512, "avx512vnni"};
    if (CpuHasAvx2Fma()) return Choice{Q8KRowsAvx2, "avx2"};
    return Choice{Q8KRowsScalar, "scalar"};
  }();
  if (name != nullptr) *name = choice.name;
  return choice.fn;
}

}  // namespace ropewalk
