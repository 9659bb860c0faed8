// See gguf_matmul.h.
#include "gguf_matmul.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "attention.h"
#include "custom_op.h"
#include "float_matmul.h"
#include "half.h"
#include "ort_runtime.h"
#include "qk_norm_rope.h"

namespace ropewalk {

void QuantizeRowQ8Scalar(const float* x, int64_t k, int bits, int8_t* q, float* d, int32_t* start) {
  const bool nibbleOrder = bits == 4;
  for (int64_t b = 0; b < k / 32; b++) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(xb[i]));
    const float id = amax != 0 ? 127.f / amax : 0.f;
    d[b] = HalfToFloat(FloatToHalf(amax / 127.f));
    int8_t* qb = q + b * 32;
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) {
      // nearbyint: the current rounding mode, ties to even (as _mm256_round_ps(_MM_ROUND_NEAREST)).
      const int8_t v = static_cast<int8_t>(std::nearbyint(xb[i] * id));
      qb[nibbleOrder ? (i & 1) * 16 + (i >> 1) : i] = v;
      sum += v;
    }
    start[b] = -(nibbleOrder ? 8 : 128) * sum;
  }
}

void Q8RowsScalar(const Q8Row* x, int rows, const uint8_t* b, Q8Scales scales, int64_t kb, int bits, int64_t n0,
                  int64_t n1, float* y, int64_t ldy) {
  const int64_t blockBytes = 32 * bits / 8;
  const auto scale = [&](int64_t i) {
    return scales.half ? HalfToFloat(static_cast<const uint16_t*>(scales.data)[i]) : static_cast<const float*>(scales.data)[i];
  };
  for (int r = 0; r < rows; r++) {
    for (int64_t n = n0; n < n1; n++) {
      const uint8_t* w = b + n * kb * blockBytes;
      float sum = 0;
      for (int64_t k = 0; k < kb; k++) {
        const uint8_t* blk = w + k * blockBytes;
        const int8_t* a = x[r].q + k * 32;
        int32_t isum = 0;
        if (bits == 8) {
          for (int i = 0; i < 32; i++) isum += (static_cast<int32_t>(blk[i]) - 128) * a[i];
        } else {
          for (int i = 0; i < 16; i++) isum += ((blk[i] & 15) - 8) * a[i] + ((blk[i] >> 4) - 8) * a[16 + i];
        }
        sum += scale(n * kb + k) * x[r].d[k] * static_cast<float>(isum);
      }
      y[r * ldy + n] = sum;
    }
  }
}

void QuantizeRowQ8(const float* x, int64_t k, int bits, int8_t* q, float* d, int32_t* start) {
  static const Q8QuantizeFn fn = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? QuantizeRowQ8Avx2 : QuantizeRowQ8Scalar;
  }();
  fn(x, k, bits, q, d, start);
}

bool CpuHasAvx512Vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

bool CpuHasAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

bool Q8AmxUsable() {
  static const bool usable = [] {
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool tiles = (edx >> 24 & 1) != 0 && (edx >> 25 & 1) != 0;  // AMX-TILE, AMX-INT8
    if (!tiles || !CpuHasAvx512Vnni()) return false;
    // Linux hands out the tiles' state (XTILEDATA, xfeature 18) only on request (5.16 and later).
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return usable;
}

Q8RowsFn Q8Kernel(const char** name) {
  static const struct Choice { Q8RowsFn fn; const char* name; } choice = [] {
    __builtin_cpu_init();
    if (Q8AmxUsable()) return Choice{Q8RowsAmx, "amx"};
    if (CpuHasAvx512Vnni()) return Choice{Q8RowsVnni, "avx512vnni"};
    if (CpuHasAvx2Fma()) return Choice{Q8RowsAvx2, "avx2"};
    return Choice{Q8RowsScalar, "scalar"};
  }();
  if (name != nullptr) *name = choice.name;
  return choice.fn;
}

namespace {

struct Q8Kernel_ {
  int64_t k = 0, n = 0;
  int bits = 0;
};

// The activation rows of the node running on this thread, quantized (block_q8_0: q, d, start):
// one buffer per calling thread, shared by every MatMulQ8 node it runs (a session runs its nodes
// one at a time on its thread; the intra-op pool's tasks only read or fill it within the node's
// Compute). It was one buffer per node: 112 nodes of Qwen3-0.6B at a 256-token chunk held 63 MB,
// pages first touched in a model's first long prefill.
struct Q8Scratch {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> start;
};

Q8Scratch& ThreadQ8Scratch() {
  thread_local Q8Scratch scratch;
  return scratch;
}

/** MatMulQ8K's and GatherQ8K's row_groups (0 or kKRowGroup), or a failure naming the value. */
OrtStatus* RowGroups(const OrtKernelInfo* info, const char* op, int64_t* out) {
  *out = OptionalAttr(info, "row_groups", 0);
  if (*out == 0 || *out == kKRowGroup) return nullptr;
  return Fail(std::string("ropewalk.") + op + ": row_groups must be 0 or " + std::to_string(kKRowGroup) + ", got " + std::to_string(*out));
}

OrtStatus* ORT_API_CALL CreateKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  int64_t k = 0, n = 0, bits = 0, blockSize = 0;
  for (auto [name, out] : {std::pair{"K", &k}, {"N", &n}, {"bits", &bits}, {"block_size", &blockSize}}) {
    if (OrtStatus* s = IntAttr(info, "MatMulQ8", name, out)) return s;
  }
  if (bits != 4 && bits != 8) return Fail("ropewalk.MatMulQ8: bits must be 4 or 8, got " + std::to_string(bits));
  if (blockSize != 32) return Fail("ropewalk.MatMulQ8: block_size must be 32, got " + std::to_string(blockSize));
  if (k <= 0 || k % 32 != 0 || n <= 0) {
    return Fail("ropewalk.MatMulQ8: K must be a positive multiple of 32 and N positive, got K " + std::to_string(k) + ", N " + std::to_string(n));
  }
  auto* kern = new Q8Kernel_();
  kern->k = k, kern->n = n, kern->bits = static_cast<int>(bits);
  *kernel = kern;
  return nullptr;
}

struct Job {
  Q8RowsFn fn;
  const Q8Row* rows;
  int m;
  const uint8_t* b;
  Q8Scales scales;
  int64_t kb, n, chunk;
  int bits;
  float* y;
  const float* x;
  int64_t k;
  Q8Scratch* scratch;
};

void QuantizeTask(void* data, size_t i) {
  auto* j = static_cast<Job*>(data);
  QuantizeRowQ8(j->x + i * j->k, j->k, j->bits, j->scratch->q.data() + i * j->k, j->scratch->d.data() + i * j->kb, j->scratch->start.data() + i * j->kb);
}

void RowsTask(void* data, size_t i) {
  auto* j = static_cast<Job*>(data);
  const int64_t n0 = static_cast<int64_t>(i) * j->chunk;
  j->fn(j->rows, j->m, j->b, j->scales, j->kb, j->bits, n0, std::min(j->n, n0 + j->chunk), j->y, j->n);
}

OrtStatus* Compute(Q8Kernel_* kern, OrtKernelContext* ctx) {
  const OrtApi& api = Ort();
  const int64_t k = kern->k, n = kern->n, kb = k / 32;
  MatMulRun run;
  if (OrtStatus* st = OpenMatMulRun(ctx, "MatMulQ8", k, n, 2, &run)) return st;
  if (static_cast<int64_t>(run.counts[0]) != n * kb * 32 * kern->bits / 8 || static_cast<int64_t>(run.counts[1]) != n * kb) {
    return Fail("ropewalk.MatMulQ8: B holds " + std::to_string(run.counts[0]) + " bytes and scales " + std::to_string(run.counts[1]) +
                " values; [" + std::to_string(n) + ", " + std::to_string(k) + "] at " + std::to_string(kern->bits) + " bits needs " +
                std::to_string(n * kb * 32 * kern->bits / 8) + " and " + std::to_string(n * kb));
  }
  const int64_t m = run.rows;
  if (m == 0) return nullptr;
  const float* x = run.x;
  float* y = run.y;
  const void* bData = run.data[0];
  // The scales' element type decides how the kernels read them (the op takes float16 or float32).
  const bool halfScales = run.types[1] == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
  if (!halfScales && run.types[1] != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return Fail("ropewalk.MatMulQ8: scales must be float16 or float32, got ONNX element type " + std::to_string(static_cast<int>(run.types[1])));
  }
  const Q8Scales sData{run.data[1], halfScales};
  Q8Scratch& scratch = ThreadQ8Scratch();
  scratch.q.resize(static_cast<size_t>(m * k));
  scratch.d.resize(static_cast<size_t>(m * kb));
  scratch.start.resize(static_cast<size_t>(m * kb));
  std::vector<Q8Row> rows(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; r++) rows[r] = {scratch.q.data() + r * k, scratch.d.data() + r * kb, scratch.start.data() + r * kb};
  // Chunks of output rows: ~64 KiB of weights each (enough tasks for the pool to balance), a
  // multiple of the kernel's group of weight rows: 4 for one activation row (decode), a pair of
  // panels of 16 for more (prefill: PanelPairRows), 16 or 32 rows at least.
  const int64_t rowBytes = kb * 32 * kern->bits / 8;
  const int64_t group = m == 1 ? 4 : 32;
  const int64_t chunk = std::max<int64_t>(group == 4 ? 16 : 32, (64 << 10) / rowBytes) / group * group;
  Job job{Q8Kernel(), rows.data(), static_cast<int>(m), static_cast<const uint8_t*>(bData), sData, kb, n, chunk, kern->bits, y, x, k, &scratch};
  if (m == 1) QuantizeTask(&job, 0);
  else if (OrtStatus* st = api.KernelContext_ParallelFor(ctx, QuantizeTask, static_cast<size_t>(m), 0, &job)) return st;
  return api.KernelContext_ParallelFor(ctx, RowsTask, static_cast<size_t>((n + chunk - 1) / chunk), 0, &job);
}

// ---- ropewalk.MatMulQ8K (contract in gguf_matmul.h; kernels in gguf_matmul_k.cc) ----

struct Q8KKernel_ {
  int64_t k = 0, n = 0, type = 0;
  int64_t grouped = 0;  // B's rows in groups (KGroupedRows of row_groups)
};

// The activation rows as block_q8_K and their 8-bit views (for Q8KRowsPanel): one buffer per
// calling thread, shared by its MatMulQ8K nodes, as Q8Scratch is for MatMulQ8's.
struct Q8KScratch {
  std::vector<int8_t> q;
  std::vector<int16_t> bsums;
  std::vector<float> d;
  std::vector<float> d32, sums32;
  std::vector<int32_t> start32;
  std::vector<int8_t> qpad;
  std::vector<Q8KRow> rows;
};

Q8KScratch& ThreadQ8KScratch() {
  thread_local Q8KScratch scratch;
  return scratch;
}

/**
 * The kernel for `m` activation rows of `type`: prefill (16 rows or more) on MatMulQ8's panels
 * where those run (VNNI or AMX: Q8KRowsPanel), else MatMulQ8K's own.
 */
Q8KRowsFn KKernelFor(int64_t m, int64_t) {
  static const bool panels = Q8Kernel() == Q8RowsAmx || Q8Kernel() == Q8RowsVnni;  // decided once, not per run
  return m >= 16 && panels ? Q8KRowsPanel : Q8KKernel();
}

OrtStatus* ORT_API_CALL CreateKKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  int64_t k = 0, n = 0, type = 0;
  for (auto [name, out] : {std::pair{"K", &k}, {"N", &n}, {"ggml_type", &type}}) {
    if (OrtStatus* s = IntAttr(info, "MatMulQ8K", name, out)) return s;
  }
  if (KQuantBlockBytes(type) == 0) return Fail("ropewalk.MatMulQ8K: ggml_type must be 12 (Q4_K), 13 (Q5_K) or 14 (Q6_K), got " + std::to_string(type));
  if (k <= 0 || k % 256 != 0 || n <= 0) {
    return Fail("ropewalk.MatMulQ8K: K must be a positive multiple of 256 and N positive, got K " + std::to_string(k) + ", N " + std::to_string(n));
  }
  int64_t rowGroups = 0;
  if (OrtStatus* s = RowGroups(info, "MatMulQ8K", &rowGroups)) return s;
  auto* kern = new Q8KKernel_();
  kern->k = k, kern->n = n, kern->type = type, kern->grouped = KGroupedRows(n, rowGroups);
  *kernel = kern;
  return nullptr;
}

struct KJob {
  Q8KRowsFn fn;
  const Q8KRow* rows;
  int m;
  int type;
  const uint8_t* b;
  int64_t kb, grouped, n, chunk;
  float* y;
  const float* x;
  int64_t k;
  Q8KScratch* scratch;
};

void QuantizeKTask(void* data, size_t i) {
  auto* j = static_cast<KJob*>(data);
  Q8KScratch* scratch = j->scratch;
  QuantizeRowQ8K(j->x + i * j->k, j->k, Q8KPaired(j->fn, j->type), scratch->q.data() + i * j->k, scratch->bsums.data() + i * Q8KSums(j->k),
                 scratch->d.data() + i * j->kb);
  if (j->fn == Q8KRowsPanel) {
    const size_t blocks = static_cast<size_t>(j->kb * KPanelBlocks(j->type));
    Q8KPanelViews(&scratch->rows[i], j->type, j->kb, scratch->d32.data() + i * blocks, scratch->start32.data() + i * blocks, scratch->sums32.data() + i * j->kb * 8,
                  j->type == kGgmlQ6K ? scratch->qpad.data() + i * blocks * 32 : nullptr);
  }
}

void RowsKTask(void* data, size_t i) {
  auto* j = static_cast<KJob*>(data);
  const int64_t n0 = static_cast<int64_t>(i) * j->chunk;
  j->fn(j->type, j->rows, j->m, j->b, j->kb, j->grouped, n0, std::min(j->n, n0 + j->chunk), j->y, j->n);
}

OrtStatus* ComputeK(Q8KKernel_* kern, OrtKernelContext* ctx) {
  const OrtApi& api = Ort();
  const int64_t k = kern->k, n = kern->n, kb = k / 256, bytes = KQuantBlockBytes(kern->type);
  MatMulRun run;
  if (OrtStatus* st = OpenMatMulRun(ctx, "MatMulQ8K", k, n, 1, &run)) return st;
  if (static_cast<int64_t>(run.counts[0]) != n * kb * bytes) {
    return Fail("ropewalk.MatMulQ8K: B holds " + std::to_string(run.counts[0]) + " bytes; [" + std::to_string(n) + ", " + std::to_string(k) +
                "] of ggml type " + std::to_string(kern->type) + " needs " + std::to_string(n * kb * bytes));
  }
  const int64_t m = run.rows;
  if (m == 0) return nullptr;
  const float* x = run.x;
  float* y = run.y;
  const void* bData = run.data[0];
  const Q8KRowsFn fn = KKernelFor(m, kern->type);
  Q8KScratch& scratch = ThreadQ8KScratch();
  scratch.q.resize(static_cast<size_t>(m * k));
  scratch.bsums.resize(static_cast<size_t>(m * Q8KSums(k)));
  scratch.d.resize(static_cast<size_t>(m * kb));
  if (fn == Q8KRowsPanel) {
    const int64_t blocks = m * kb * KPanelBlocks(kern->type);
    scratch.d32.resize(static_cast<size_t>(blocks)), scratch.start32.resize(static_cast<size_t>(blocks));
    scratch.sums32.resize(static_cast<size_t>(m * kb * 8));
    if (kern->type == kGgmlQ6K) scratch.qpad.resize(static_cast<size_t>(blocks * 32));
  }
  scratch.rows.resize(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; r++) scratch.rows[r] = {scratch.q.data() + r * k, scratch.bsums.data() + r * Q8KSums(k), scratch.d.data() + r * kb, nullptr, nullptr, nullptr, nullptr};
  // Chunks of output rows: ~64 KiB of weights each (as stored; unpacked to 8 bits for the panels,
  // whose chunks are whole pairs of panels of 16 rows, as MatMulQ8's), 16 rows at least, whole groups of B's rows.
  const int64_t panelRowBytes = kb * KPanelBlocks(kern->type) * 32;
  const int64_t chunk = fn == Q8KRowsPanel ? std::max<int64_t>(32, (64 << 10) / panelRowBytes) / 32 * 32
                                           : std::max<int64_t>(16, (64 << 10) / (kb * bytes)) / kKRowGroup * kKRowGroup;
  KJob job{fn, scratch.rows.data(), static_cast<int>(m), static_cast<int>(kern->type), static_cast<const uint8_t*>(bData), kb, kern->grouped, n, chunk, y, x, k, &scratch};
  if (m == 1) QuantizeKTask(&job, 0);
  else if (OrtStatus* st = api.KernelContext_ParallelFor(ctx, QuantizeKTask, static_cast<size_t>(m), 0, &job)) return st;
  return api.KernelContext_ParallelFor(ctx, RowsKTask, static_cast<size_t>((n + chunk - 1) / chunk), 0, &job);
}

// ---- ropewalk.GatherQ8K (contract in gguf_matmul.h) ----

struct GatherKKernel_ {
  int64_t d = 0, type = 0, rowGroups = 0;
};

OrtStatus* ORT_API_CALL CreateGatherKernel(const OrtCustomOp*, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  int64_t d = 0, type = 0;
  for (auto [name, out] : {std::pair{"D", &d}, {"ggml_type", &type}}) {
    if (OrtStatus* s = IntAttr(info, "GatherQ8K", name, out)) return s;
  }
  if (KQuantBlockBytes(type) == 0) return Fail("ropewalk.GatherQ8K: ggml_type must be 12 (Q4_K), 13 (Q5_K) or 14 (Q6_K), got " + std::to_string(type));
  if (d <= 0 || d % 256 != 0) return Fail("ropewalk.GatherQ8K: D must be a positive multiple of 256, got " + std::to_string(d));
  int64_t rowGroups = 0;
  if (OrtStatus* s = RowGroups(info, "GatherQ8K", &rowGroups)) return s;
  *kernel = new GatherKKernel_{d, type, rowGroups};
  return nullptr;
}

OrtStatus* ComputeGatherK(GatherKKernel_* kern, OrtKernelContext* ctx) {
  const OrtApi& api = Ort();
  const OrtValue* b = nullptr;
  const OrtValue* ids = nullptr;
  if (OrtStatus* st = api.KernelContext_GetInput(ctx, 0, &b)) return st;
  if (OrtStatus* st = api.KernelContext_GetInput(ctx, 1, &ids)) return st;
  size_t bCount = 0, idCount = 0;
  Dims(b, &bCount);
  std::vector<int64_t> dims = Dims(ids, &idCount);
  const int64_t rowBytes = kern->d / 256 * KQuantBlockBytes(kern->type);
  if (static_cast<int64_t>(bCount) % rowBytes != 0) {
    return Fail("ropewalk.GatherQ8K: B holds " + std::to_string(bCount) + " bytes, not whole rows of " + std::to_string(rowBytes));
  }
  const int64_t rows = static_cast<int64_t>(bCount) / rowBytes;
  dims.push_back(kern->d);
  OrtValue* out = nullptr;
  if (OrtStatus* st = api.KernelContext_GetOutput(ctx, 0, dims.data(), dims.size(), &out)) return st;
  const void* bData = nullptr;
  const int64_t* idData = nullptr;
  float* y = nullptr;
  Check(api.GetTensorMutableData(const_cast<OrtValue*>(b), const_cast<void**>(&bData)), "GetTensorMutableData");
  Check(api.GetTensorMutableData(const_cast<OrtValue*>(ids), reinterpret_cast<void**>(const_cast<int64_t**>(&idData))), "GetTensorMutableData");
  Check(api.GetTensorMutableData(out, reinterpret_cast<void**>(&y)), "GetTensorMutableData");
  const int64_t kb = kern->d / 256, grouped = KGroupedRows(rows, kern->rowGroups);
  for (size_t i = 0; i < idCount; i++) {
    const int64_t id = idData[i];
    if (id < 0 || id >= rows) return Fail("ropewalk.GatherQ8K: id " + std::to_string(id) + " outside the " + std::to_string(rows) + " rows");
    const KRowWalk row = KRowOf(static_cast<const uint8_t*>(bData), id, kb, grouped, KQuantBlockBytes(kern->type));
    DequantizeRowK(static_cast<int>(kern->type), row.first, kb, row.step, y + i * kern->d);
  }
  return nullptr;
}

}  // namespace

void AddRopewalkOps(OrtSessionOptions* options) {
  // One domain for the process, never released: every session that used it must be gone first,
  // and sessions outlive no particular owner here.
  static std::mutex mutex;
  constexpr auto f32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, u8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, i64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  constexpr auto any = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;  // type-agnostic input
  static OrtCustomOp q8 = MakeOp<Q8Kernel_, Compute>("MatMulQ8", {f32, u8, any}, CreateKernel);  // scales: float16 or float32 (Compute)
  static OrtCustomOp q8k = MakeOp<Q8KKernel_, ComputeK>("MatMulQ8K", {f32, u8}, CreateKKernel);
  static OrtCustomOp gatherK = MakeOp<GatherKKernel_, ComputeGatherK>("GatherQ8K", {u8, i64}, CreateGatherKernel);
  static OrtCustomOpDomain* domain = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (domain == nullptr) {
      OrtCustomOpDomain* fresh = nullptr;
      Check(Ort().CreateCustomOpDomain("ropewalk", &fresh), "CreateCustomOpDomain");
      Check(Ort().CustomOpDomain_Add(fresh, &q8), "CustomOpDomain_Add");
      Check(Ort().CustomOpDomain_Add(fresh, &q8k), "CustomOpDomain_Add");
      Check(Ort().CustomOpDomain_Add(fresh, &gatherK), "CustomOpDomain_Add");
      Check(Ort().CustomOpDomain_Add(fresh, FloatMatMulOp()), "CustomOpDomain_Add");
      Check(Ort().CustomOpDomain_Add(fresh, DecodeAttentionOp()), "CustomOpDomain_Add");
      Check(Ort().CustomOpDomain_Add(fresh, DecodeAttentionHalfOp()), "CustomOpDomain_Add");
      Check(Ort().CustomOpDomain_Add(fresh, QkNormRopeOp()), "CustomOpDomain_Add");
      domain = fresh;
    }
  }
  Check(Ort().AddCustomOpDomain(options, domain), "AddCustomOpDomain");
}

}  // namespace ropewalk
