// Node-API surface of ropewalk.MatMulQ8 (gguf_matmul.h), exported by addon.cc:
//   matMulQ8Kernel: string     the ISA the op runs on here ('amx' | 'avx512vnni' | 'avx2' | 'scalar')
//   matMulQ8(isa, x: Float32Array [m·k], m, blocks: Uint8Array, scales: Float32Array | Uint16Array (float16 bits), n, k, bits): Float32Array [m·n]
//       the kernel itself, one ISA variant, one thread, no ONNX Runtime (the exactness test's way
//       in: each variant against a reference of llama.cpp's arithmetic). Throws an Error with code
//       'ORT_ARG' for sizes that disagree or an ISA this CPU lacks.
//   matMulQ8K(isa, x: Float32Array [m·k], m, blocks: Uint8Array [n · k/256 · bytes], n, k, ggmlType 12 | 13 | 14[, chunk[, rowGroups]]): Float32Array [m·n]
//       ropewalk.MatMulQ8K's kernel the same way (Q4_K / Q5_K / Q6_K super-blocks as stored in the GGUF file,
//       or with rowGroups 4 in the op's row_groups layout: KBlockIndex);
//       isa 'panel': its prefill path on MatMulQ8's kernel (Q8KRowsPanel); chunk: output rows a
//       call, as the op's tasks split them (default n, or undefined: one call).
//   matMulQ8KKernel: string    the ISA MatMulQ8K runs on here ('avx512vnni' | 'avx2' | 'scalar')
//   matMulF32(isa, x: Float32Array [k], w: Float32Array [n·k], n, k): Float32Array [n]
//       ropewalk.MatMulF32's decode kernel the same way (float_matmul.h), 'avx512' | 'avx2' | 'scalar'.
//   matMulF32Kernel: string    the ISA MatMulF32 runs on here
//   attentionHead(isa, q: Float32Array [g·hd], k, v: Float32Array | Uint16Array (float16 bits) [L·hd], g, L, hd, scale): Float32Array [g·hd]
//       ropewalk.DecodeAttention's kernel for one KV head (attention.h), 'avx512' | 'avx2' | 'scalar',
//       on float32 or float16 KV rows as k and v's type says.
//   attentionPrefill(isa, q, k, v, g, P, T, hd, scale[, step]): [T·g·hd] of q's type
//       its prefill kernel for one KV head (attention.h PrefillHeadFn): q [T·g·hd] (token-major),
//       k, v [(P+T)·hd], all Float32Arrays or all Uint16Arrays (float16 bits); hd a multiple of 16;
//       the tiles split over `step` calls (first 0 … step−1) as the op's tasks split them.
//   attentionKernel: string    the ISA DecodeAttention runs on here
//   qkNormRopeRow(x: Float32Array [hd], w [hd], cos [hd/2], sin [hd/2], interleaved: boolean, eps): Float32Array [hd]
//       ropewalk.QkNormRope's work on one head row (qk_norm_rope.h QkNormRopeRow).
#include <napi.h>

#include <algorithm>

#include <string>
#include <vector>

#include "attention.h"
#include "float_matmul.h"
#include "gguf_matmul.h"
#include "qk_norm_rope.h"

namespace ropewalk {
namespace {

[[noreturn]] void ArgError(Napi::Env env, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, "ORT_ARG"));
  throw error;
}

/** Whether this CPU runs the `isa` variant; throws ORT_ARG when it does not. */
void RequireIsa(Napi::Env env, const std::string& isa, const char* fn) {
  __builtin_cpu_init();
  if (isa == "scalar") return;
  if (isa == "avx2" && CpuHasAvx2Fma()) return;
  if (isa == "avx512vnni" && CpuHasAvx512Vnni()) return;
  if (isa == "amx" && std::string(fn) == "matMulQ8" && Q8AmxUsable()) return;
  ArgError(env, std::string(fn) + ": no " + isa + " variant on this CPU (scalar, avx2, avx512vnni" + (std::string(fn) == "matMulQ8" ? ", amx" : "") +
                    " as it has them)");
}

Q8RowsFn Variant(Napi::Env env, const std::string& isa) {
  RequireIsa(env, isa, "matMulQ8");
  return isa == "scalar" ? Q8RowsScalar : isa == "avx2" ? Q8RowsAvx2 : isa == "avx512vnni" ? Q8RowsVnni : Q8RowsAmx;
}

Napi::Value MatMulQ8(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 8 || !info[0].IsString() || !info[1].IsTypedArray() || !info[3].IsTypedArray() || !info[4].IsTypedArray()) {
    ArgError(env, "matMulQ8(isa, x, m, blocks, scales, n, k, bits)");
  }
  const std::string isa = info[0].As<Napi::String>().Utf8Value();
  const Q8RowsFn fn = Variant(env, isa);
  const Q8QuantizeFn quantize = isa == "scalar" ? QuantizeRowQ8Scalar : QuantizeRowQ8Avx2;  // each variant with its own
  const Napi::Float32Array x = info[1].As<Napi::Float32Array>();
  const Napi::Uint8Array blocks = info[3].As<Napi::Uint8Array>();
  // scales: a Float32Array (float32) or a Uint16Array (float16 bits), as the op's two scale types.
  const Napi::TypedArray scales = info[4].As<Napi::TypedArray>();
  const bool halfScales = scales.TypedArrayType() == napi_uint16_array;
  if (!halfScales && scales.TypedArrayType() != napi_float32_array) ArgError(env, "matMulQ8: scales must be a Float32Array or a Uint16Array (float16 bits)");
  const int64_t m = info[2].As<Napi::Number>().Int64Value(), n = info[5].As<Napi::Number>().Int64Value();
  const int64_t k = info[6].As<Napi::Number>().Int64Value(), bits = info[7].As<Napi::Number>().Int64Value();
  if (m <= 0 || n <= 0 || k <= 0 || k % 32 != 0 || (bits != 4 && bits != 8)) {
    ArgError(env, "matMulQ8: m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + " (a multiple of 32), bits " +
                      std::to_string(bits) + " (4 or 8)");
  }
  const int64_t kb = k / 32;
  if (static_cast<int64_t>(x.ElementLength()) != m * k || static_cast<int64_t>(blocks.ElementLength()) != n * kb * 32 * bits / 8 ||
      static_cast<int64_t>(scales.ElementLength()) != n * kb) {
    ArgError(env, "matMulQ8: x has " + std::to_string(x.ElementLength()) + " values, blocks " + std::to_string(blocks.ElementLength()) +
                      " bytes, scales " + std::to_string(scales.ElementLength()) + "; [" + std::to_string(m) + ", " + std::to_string(k) +
                      "] × [" + std::to_string(n) + ", " + std::to_string(k) + "]ᵀ at " + std::to_string(bits) + " bits needs " +
                      std::to_string(m * k) + ", " + std::to_string(n * kb * 32 * bits / 8) + ", " + std::to_string(n * kb));
  }
  std::vector<int8_t> q(static_cast<size_t>(m * k));
  std::vector<float> d(static_cast<size_t>(m * kb));
  std::vector<int32_t> start(static_cast<size_t>(m * kb));
  std::vector<Q8Row> rows(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; r++) {
    quantize(x.Data() + r * k, k, static_cast<int>(bits), q.data() + r * k, d.data() + r * kb, start.data() + r * kb);
    rows[r] = {q.data() + r * k, d.data() + r * kb, start.data() + r * kb};
  }
  Napi::Float32Array y = Napi::Float32Array::New(env, static_cast<size_t>(m * n));
  const void* scaleData = static_cast<const uint8_t*>(scales.ArrayBuffer().Data()) + scales.ByteOffset();
  fn(rows.data(), static_cast<int>(m), blocks.Data(), Q8Scales{scaleData, halfScales}, kb, static_cast<int>(bits), 0, n, y.Data(), n);
  return y;
}

Napi::Value MatMulQ8K(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 7 || info.Length() > 9 || !info[0].IsString() || !info[1].IsTypedArray() || !info[3].IsTypedArray()) {
    ArgError(env, "matMulQ8K(isa, x, m, blocks, n, k, ggmlType[, chunk[, rowGroups]])");
  }
  const std::string isa = info[0].As<Napi::String>().Utf8Value();
  RequireIsa(env, isa == "panel" ? "avx512vnni" : isa, "matMulQ8K");
  const Q8KRowsFn fn = isa == "scalar" ? Q8KRowsScalar : isa == "avx2" ? Q8KRowsAvx2 : isa == "panel" ? Q8KRowsPanel : Q8KRowsAvx512;
  const Napi::Float32Array x = info[1].As<Napi::Float32Array>();
  const Napi::Uint8Array blocks = info[3].As<Napi::Uint8Array>();
  const int64_t m = info[2].As<Napi::Number>().Int64Value(), n = info[4].As<Napi::Number>().Int64Value();
  const int64_t k = info[5].As<Napi::Number>().Int64Value(), type = info[6].As<Napi::Number>().Int64Value();
  const int64_t bytes = KQuantBlockBytes(type);
  if (m <= 0 || n <= 0 || k <= 0 || k % 256 != 0 || bytes == 0) {
    ArgError(env, "matMulQ8K: m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                      " (a multiple of 256), ggml type " + std::to_string(type) + " (12 Q4_K, 13 Q5_K or 14 Q6_K)");
  }
  const int64_t kb = k / 256;
  if (static_cast<int64_t>(x.ElementLength()) != m * k || static_cast<int64_t>(blocks.ElementLength()) != n * kb * bytes) {
    ArgError(env, "matMulQ8K: x has " + std::to_string(x.ElementLength()) + " values, blocks " + std::to_string(blocks.ElementLength()) +
                      " bytes; [" + std::to_string(m) + ", " + std::to_string(k) + "] × [" + std::to_string(n) + ", " + std::to_string(k) +
                      "]ᵀ needs " + std::to_string(m * k) + ", " + std::to_string(n * kb * bytes));
  }
  const int64_t panel = kb * KPanelBlocks(type);  // the panel path's blocks of 32 a row
  std::vector<int8_t> q(static_cast<size_t>(m * k)), qpad(static_cast<size_t>(m * panel * 32));
  std::vector<int16_t> bsums(static_cast<size_t>(m * Q8KSums(k)));
  std::vector<float> d(static_cast<size_t>(m * kb)), d32(static_cast<size_t>(m * panel)), sums32(static_cast<size_t>(m * kb * 8));
  std::vector<int32_t> start32(static_cast<size_t>(m * panel));
  std::vector<Q8KRow> rows(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; r++) {
    QuantizeRowQ8K(x.Data() + r * k, k, Q8KPaired(fn, type), q.data() + r * k, bsums.data() + r * Q8KSums(k), d.data() + r * kb);
    rows[r] = {q.data() + r * k, bsums.data() + r * Q8KSums(k), d.data() + r * kb, nullptr, nullptr, nullptr, nullptr};
    if (fn == Q8KRowsPanel) {
      Q8KPanelViews(&rows[r], type, kb, d32.data() + r * panel, start32.data() + r * panel, sums32.data() + r * kb * 8, qpad.data() + r * panel * 32);
    }
  }
  Napi::Float32Array y = Napi::Float32Array::New(env, static_cast<size_t>(m * n));
  // In chunks of output rows as the op's tasks run them (n0 > 0 after the first), or all at once.
  const int64_t chunk = info.Length() >= 8 && !info[7].IsUndefined() ? info[7].As<Napi::Number>().Int64Value() : n;
  if (chunk <= 0) ArgError(env, "matMulQ8K: chunk " + std::to_string(chunk) + " (output rows a call, > 0)");
  const int64_t rowGroups = info.Length() == 9 ? info[8].As<Napi::Number>().Int64Value() : 0;
  if (rowGroups != 0 && rowGroups != kKRowGroup) ArgError(env, "matMulQ8K: rowGroups " + std::to_string(rowGroups) + " (0 or " + std::to_string(kKRowGroup) + ")");
  const int64_t grouped = KGroupedRows(n, rowGroups);
  for (int64_t n0 = 0; n0 < n; n0 += chunk) fn(static_cast<int>(type), rows.data(), static_cast<int>(m), blocks.Data(), kb, grouped, n0, std::min(n, n0 + chunk), y.Data(), n);
  return y;
}

Napi::Value MatMulF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 5 || !info[0].IsString() || !info[1].IsTypedArray() || !info[2].IsTypedArray()) ArgError(env, "matMulF32(isa, x, w, n, k)");
  const std::string isa = info[0].As<Napi::String>().Utf8Value();
  __builtin_cpu_init();
  const bool has = isa == "scalar" || (isa == "avx2" && CpuHasAvx2Fma()) || (isa == "avx512" && __builtin_cpu_supports("avx512f"));
  if (!has) ArgError(env, "matMulF32: no " + isa + " variant on this CPU (scalar, avx2, avx512 as it has them)");
  const FloatRowsFn fn = isa == "scalar" ? FloatRowsScalar : isa == "avx2" ? FloatRowsAvx2 : FloatRowsAvx512;
  const Napi::Float32Array x = info[1].As<Napi::Float32Array>(), w = info[2].As<Napi::Float32Array>();
  const int64_t n = info[3].As<Napi::Number>().Int64Value(), k = info[4].As<Napi::Number>().Int64Value();
  if (n <= 0 || k <= 0 || static_cast<int64_t>(x.ElementLength()) != k || static_cast<int64_t>(w.ElementLength()) != n * k) {
    ArgError(env, "matMulF32: n " + std::to_string(n) + ", k " + std::to_string(k) + " for x of " + std::to_string(x.ElementLength()) + " values and w of " +
                      std::to_string(w.ElementLength()));
  }
  Napi::Float32Array y = Napi::Float32Array::New(env, static_cast<size_t>(n));
  fn(x.Data(), w.Data(), k, 0, n, y.Data());
  return y;
}

/** The attention kernels' ISA named by `isa`, or an ArgError where this CPU lacks it. */
std::string AttentionIsa(Napi::Env env, const Napi::Value& name, const char* fn) {
  const std::string isa = name.As<Napi::String>().Utf8Value();
  __builtin_cpu_init();
  const bool has = isa == "scalar" || (isa == "avx2" && CpuHasAvx2Fma()) || (isa == "avx512" && __builtin_cpu_supports("avx512f") && CpuHasAvx2Fma());
  if (!has) ArgError(env, std::string(fn) + ": no " + isa + " variant on this CPU (scalar, avx2, avx512 as it has them)");
  return isa;
}

Napi::Value AttentionHead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 8 || !info[0].IsString() || !info[1].IsTypedArray() || !info[2].IsTypedArray() || !info[3].IsTypedArray()) {
    ArgError(env, "attentionHead(isa, q, k, v, g, L, hd, scale)");
  }
  const std::string isa = AttentionIsa(env, info[0], "attentionHead");
  const Napi::Float32Array q = info[1].As<Napi::Float32Array>();
  const Napi::TypedArray k = info[2].As<Napi::TypedArray>(), v = info[3].As<Napi::TypedArray>();
  // k and v: both Float32Array (float32 KV) or both Uint16Array (float16 bits).
  const bool half = k.TypedArrayType() == napi_uint16_array && v.TypedArrayType() == napi_uint16_array;
  if (!half && (k.TypedArrayType() != napi_float32_array || v.TypedArrayType() != napi_float32_array)) {
    ArgError(env, "attentionHead: k and v must both be Float32Arrays or both Uint16Arrays (float16 bits)");
  }
  const int64_t g = info[4].As<Napi::Number>().Int64Value(), L = info[5].As<Napi::Number>().Int64Value(), hd = info[6].As<Napi::Number>().Int64Value();
  const float scale = info[7].As<Napi::Number>().FloatValue();
  if (g <= 0 || g > kMaxAttentionGroup || L <= 0 || hd <= 0 || static_cast<int64_t>(q.ElementLength()) != g * hd ||
      static_cast<int64_t>(k.ElementLength()) != L * hd || static_cast<int64_t>(v.ElementLength()) != L * hd) {
    ArgError(env, "attentionHead: g " + std::to_string(g) + ", L " + std::to_string(L) + ", hd " + std::to_string(hd) + " for q of " +
                      std::to_string(q.ElementLength()) + ", k of " + std::to_string(k.ElementLength()) + " and v of " + std::to_string(v.ElementLength()) + " values");
  }
  std::vector<float> scores(static_cast<size_t>(g * L));
  Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(g * hd));
  const void* kd = static_cast<const uint8_t*>(k.ArrayBuffer().Data()) + k.ByteOffset();
  const void* vd = static_cast<const uint8_t*>(v.ArrayBuffer().Data()) + v.ByteOffset();
  if (half) {
    const AttentionHeadHalfFn fn = isa == "scalar" ? AttentionHeadHalfScalar : isa == "avx2" ? AttentionHeadHalfAvx2 : AttentionHeadHalfAvx512;
    fn(q.Data(), static_cast<const uint16_t*>(kd), static_cast<const uint16_t*>(vd), g, L, hd, scale, scores.data(), out.Data());
  } else {
    const AttentionHeadFn fn = isa == "scalar" ? AttentionHeadScalar : isa == "avx2" ? AttentionHeadAvx2 : AttentionHeadAvx512;
    fn(q.Data(), static_cast<const float*>(kd), static_cast<const float*>(vd), g, L, hd, scale, scores.data(), out.Data());
  }
  return out;
}

Napi::Value QkNormRopeRowJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 6 || !info[0].IsTypedArray() || !info[1].IsTypedArray() || !info[2].IsTypedArray() || !info[3].IsTypedArray() ||
      !info[4].IsBoolean() || !info[5].IsNumber()) {
    ArgError(env, "qkNormRopeRow(x, w, cos, sin, interleaved, eps)");
  }
  const Napi::TypedArray arrays[4] = {info[0].As<Napi::TypedArray>(), info[1].As<Napi::TypedArray>(), info[2].As<Napi::TypedArray>(), info[3].As<Napi::TypedArray>()};
  for (const Napi::TypedArray& a : arrays) {
    if (a.TypedArrayType() != napi_float32_array) ArgError(env, "qkNormRopeRow: x, w, cos and sin must be Float32Arrays");
  }
  const int64_t hd = static_cast<int64_t>(arrays[0].ElementLength());
  const float eps = info[5].As<Napi::Number>().FloatValue();
  if (hd == 0 || hd % 2 != 0 || static_cast<int64_t>(arrays[1].ElementLength()) != hd || static_cast<int64_t>(arrays[2].ElementLength()) != hd / 2 ||
      static_cast<int64_t>(arrays[3].ElementLength()) != hd / 2 || !(eps > 0)) {
    ArgError(env, "qkNormRopeRow: x of " + std::to_string(hd) + " values (even), w of " + std::to_string(arrays[1].ElementLength()) + ", cos of " +
                      std::to_string(arrays[2].ElementLength()) + ", sin of " + std::to_string(arrays[3].ElementLength()) + " (half of x's), eps " + std::to_string(eps) + " (> 0)");
  }
  Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(hd));
  const float* data[4];
  for (int i = 0; i < 4; i++) data[i] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(arrays[i].ArrayBuffer().Data()) + arrays[i].ByteOffset());
  QkNormRopeRow(data[0], data[1], data[2], data[3], hd, info[4].As<Napi::Boolean>().Value(), eps, out.Data());
  return out;
}

Napi::Value AttentionPrefill(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 9 || info.Length() > 10 || !info[0].IsString() || !info[1].IsTypedArray() || !info[2].IsTypedArray() || !info[3].IsTypedArray()) {
    ArgError(env, "attentionPrefill(isa, q, k, v, g, P, T, hd, scale[, step])");
  }
  const std::string isa = AttentionIsa(env, info[0], "attentionPrefill");
  const Napi::TypedArray q = info[1].As<Napi::TypedArray>(), k = info[2].As<Napi::TypedArray>(), v = info[3].As<Napi::TypedArray>();
  const bool half = q.TypedArrayType() == napi_uint16_array && k.TypedArrayType() == napi_uint16_array && v.TypedArrayType() == napi_uint16_array;
  const bool single = q.TypedArrayType() == napi_float32_array && k.TypedArrayType() == napi_float32_array && v.TypedArrayType() == napi_float32_array;
  if (!half && !single) ArgError(env, "attentionPrefill: q, k and v must all be Float32Arrays or all Uint16Arrays (float16 bits)");
  const int64_t g = info[4].As<Napi::Number>().Int64Value(), P = info[5].As<Napi::Number>().Int64Value(), T = info[6].As<Napi::Number>().Int64Value();
  const int64_t hd = info[7].As<Napi::Number>().Int64Value();
  const float scale = info[8].As<Napi::Number>().FloatValue();
  const int64_t step = info.Length() > 9 ? info[9].As<Napi::Number>().Int64Value() : 1;
  if (g <= 0 || g > kMaxAttentionGroup || P < 0 || T <= 0 || hd <= 0 || hd % 16 != 0 || step <= 0 || static_cast<int64_t>(q.ElementLength()) != T * g * hd ||
      static_cast<int64_t>(k.ElementLength()) != (P + T) * hd || static_cast<int64_t>(v.ElementLength()) != (P + T) * hd) {
    ArgError(env, "attentionPrefill: g " + std::to_string(g) + ", P " + std::to_string(P) + ", T " + std::to_string(T) + ", hd " + std::to_string(hd) +
                      " (a multiple of 16), step " + std::to_string(step) + " for q of " + std::to_string(q.ElementLength()) + ", k of " +
                      std::to_string(k.ElementLength()) + " and v of " + std::to_string(v.ElementLength()) + " values");
  }
  const auto at = [](const Napi::TypedArray& a) { return static_cast<uint8_t*>(a.ArrayBuffer().Data()) + a.ByteOffset(); };
  const size_t n = static_cast<size_t>(T * g * hd);
  if (half) {
    const PrefillHeadHalfFn fn = isa == "scalar" ? AttentionPrefillHalfScalar : isa == "avx2" ? AttentionPrefillHalfAvx2 : AttentionPrefillHalfAvx512;
    Napi::Uint16Array out = Napi::Uint16Array::New(env, n);
    for (int64_t first = 0; first < step; first++) {
      fn(reinterpret_cast<const uint16_t*>(at(q)), g * hd, reinterpret_cast<const uint16_t*>(at(k)), reinterpret_cast<const uint16_t*>(at(v)), g, P, T, hd,
         scale, first, step, out.Data());
    }
    return out;
  }
  const PrefillHeadFn fn = isa == "scalar" ? AttentionPrefillScalar : isa == "avx2" ? AttentionPrefillAvx2 : AttentionPrefillAvx512;
  Napi::Float32Array out = Napi::Float32Array::New(env, n);
  for (int64_t first = 0; first < step; first++) {
    fn(reinterpret_cast<const float*>(at(q)), g * hd, reinterpret_cast<const float*>(at(k)), reinterpret_cast<const float*>(at(v)), g, P, T, hd, scale,
       first, step, out.Data());
  }
  return out;
}

}  // namespace

void ExportGgufMatMul(Napi::Env env, Napi::Object exports) {
  const char* isa = nullptr;
  Q8Kernel(&isa);
  exports.Set("matMulQ8Kernel", Napi::String::New(env, isa));
  exports.Set("matMulQ8", Napi::Function::New<MatMulQ8>(env, "matMulQ8"));
  exports.Set("matMulQ8K", Napi::Function::New<MatMulQ8K>(env, "matMulQ8K"));
  const char* kIsa = nullptr;
  Q8KKernel(&kIsa);
  exports.Set("matMulQ8KKernel", Napi::String::New(env, kIsa));
  const char* fIsa = nullptr;
  FloatKernel(&fIsa);
  exports.Set("matMulF32Kernel", Napi::String::New(env, fIsa));
  exports.Set("matMulF32", Napi::Function::New<MatMulF32>(env, "matMulF32"));
  exports.Set("attentionKernel", Napi::String::New(env, AttentionKernelsHere().name));
  exports.Set("attentionHead", Napi::Function::New<AttentionHead>(env, "attentionHead"));
  exports.Set("attentionPrefill", Napi::Function::New<AttentionPrefill>(env, "attentionPrefill"));
  exports.Set("qkNormRopeRow", Napi::Function::New<QkNormRopeRowJs>(env, "qkNormRopeRow"));
}

}  // namespace ropewalk
