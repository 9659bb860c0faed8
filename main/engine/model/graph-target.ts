/**
 * The graph target: which execution provider (EP) a decoder graph is built for, and the dtype
 * of its activations and KV cache. Each EP has its own rules (ONNX Runtime 1.30's kernels, in
 * `ort-kernels-1.30.json`), so the bundle builder builds one graph per target and the bundle
 * cache keys on it (`targetKey`):
 *   cpu    float32  as before: FusedMatMul (transB) on weights in their source layout [out, in],
 *                   MatMulNBits at accuracy level 4 with llama.cpp's half-scale activation blocks.
 *   webgpu float32  only ops with WebGPU kernels: MatMul on linear weights stored transposed
 *                   [in, out] (WebGPU has no FusedMatMul), GatherBlockQuantized without zero
 *                   points where they are the default (its WebGPU kernel wants zero points of
 *                   the scales' shape, which 4-bit bytes cannot have).
 *   cuda   float16  mixed precision: float16 attention and KV cache (CUDA's GroupQueryAttention
 *                   has no float32 kernel), float16 float weights and the matmuls over them; the
 *                   rest float32 (norms, RoPE, residual stream, MatMulNBits on float32 activations,
 *                   the classifier: decoder-graph.ts says why, with figures); no llama.cpp
 *                   emulation ops.
 * `NATIVE_CPU_TARGET` (cpu, float32, nativeKernels) is the CPU graph for the native backend: its
 * Q8_0 / Q4_0 / IQ4_NL / MXFP4 matmuls (4- and 8-bit blocks of 32 at their default zero points, with
 * llama.cpp's block_q8_0 activations) are the addon's `ropewalk.MatMulQ8` (native/src/gguf_matmul.h:
 * llama.cpp's int8 dot products as such, no half-scale emulation nodes) over the same blocks and
 * scales; everything else as the CPU graph. The JS backend's onnxruntime-node session cannot load
 * that op, so the engine builds this target only when the native backend will run it.
 * A float16 graph keeps float32 at its edges the engine sees: the RoPE rows come in as float32,
 * the logits go out as float32; past/present/new KV rows are float16.
 * `kvDtype` float16 on a cpu float32 target is the same graph with float16 KV (the KV cache setting,
 * decoder-graph.ts): not a bundle key of its own, since every CPU float32 bundle holds that graph
 * too, over the same data file (`hasFloat16KvGraph`, bundle.ts `KV_FLOAT16_MODEL_FILE`).
 * `CUDA_FLOAT32_REFERENCE` (cuda, float32) is the CUDA graph in float32: never loaded on CUDA (no
 * float32 GroupQueryAttention there; `graphTarget` refuses it), it runs on the CPU EP as the
 * float32 reference the float16 graph is measured against (test/integration/graph-float16.test.ts).
 */
import { InvalidOptionError } from '../errors.ts';
import type { ExecutionProvider } from './backend.ts';

/** Activation and KV-cache dtype of a graph. */
export type GraphDtype = 'float32' | 'float16';

export interface GraphTarget {
  ep: ExecutionProvider;
  dtype: GraphDtype;
  /**
   * The KV cache's dtype where it differs from `dtype`: 'float16' on a cpu float32 graph keeps
   * float32 activations and stores past/present/new KV rows in float16 (q/k/v cast to float16
   * before GroupQueryAttention, its output cast back: the CPU kernel has one type for all of
   * them). Absent: the KV cache is in `dtype`. Not part of the bundle key: a CPU float32 bundle
   * holds both graphs (`hasFloat16KvGraph`).
   */
  kvDtype?: GraphDtype;
  /** The native addon's own quantized-matmul kernel where it applies (see the file comment); cpu float32 only. */
  nativeKernels?: boolean;
  /**
   * With `nativeKernels`: attention stays ONNX Runtime's GroupQueryAttention instead of the addon's
   * DecodeAttention (decoder-graph.ts `usesDecodeAttention`). Not a target the engine loads: for
   * tests that compare the native matmuls alone against MatMulNBits (llama.cpp's int8 activations
   * turn a float32-rounding difference upstream into one int8 step), and the bench's A/B.
   */
  ortAttention?: boolean;
}

/**
 * The CPU graphs' KV cache dtype unless asked otherwise (EngineOptions.kvCacheDtype, the KV cache
 * setting, `--kv-cache`): float16, half the KV bytes per position of float32 (llama.cpp's default
 * KV type too). Chosen by the decode figures of the default backend (issue 23 item 3, bar 1.1×):
 * on the native backend the decode attention is the addon's DecodeAttention, which reads float16
 * K/V itself, and a float16-KV step costs 1.03× the float32 one at 16 tokens held and 0.84–0.90×
 * at 1,072 (fewer bytes read; Qwen3-0.6B-shaped Q4_0, 2-core AMD EPYC, docs/benchmarks.md,
 * 2026-12-06). The JS backend (the fallback when the addon cannot load) runs ONNX Runtime 1.30's
 * CPU GroupQueryAttention with four Casts a layer: 1.18× / 1.22× there (`npm run bench`, section
 * kvdtype), the price of the same halved memory; `float32` stays a setting.
 */
export const DEFAULT_KV_CACHE_DTYPE: GraphDtype = 'float16';

/** Today's graph: what every bundle was before targets existed (its cache key is unchanged). */
export const CPU_TARGET: GraphTarget = Object.freeze({ ep: 'cpu', dtype: 'float32' });

/** The CPU graph for the native backend (see the file comment). */
export const NATIVE_CPU_TARGET: GraphTarget = Object.freeze({ ep: 'cpu', dtype: 'float32', nativeKernels: true });

/** `NATIVE_CPU_TARGET` with ONNX Runtime's GroupQueryAttention (`GraphTarget.ortAttention`): tests and benches only. */
export const NATIVE_CPU_TARGET_ORT_ATTENTION: GraphTarget = Object.freeze({ ep: 'cpu', dtype: 'float32', nativeKernels: true, ortAttention: true });

/**
 * Version of `NATIVE_CPU_TARGET`'s graphs in their bundle key, bumped when the native kernels' ops
 * or attributes change (the rest of the graph is versioned by `BUNDLE_BUILDER_VERSION`).
 */
export const NATIVE_KERNELS_VERSION = 7; // 7: Qwen3's q/k norms and RoPE on ropewalk.QkNormRope; 6: full-attention layers on ropewalk.DecodeAttention (its own decode step); 5: MatMulQ8 reads Q8_0 / Q4_0 / IQ4_NL scales as float16; 4: a float classifier on ropewalk.MatMulF32; 3: MatMulQ8K / GatherQ8K super-blocks in groups of 4 rows (row_groups); 2: Q4_K and Q6_K on ropewalk.MatMulQ8K

/**
 * The CUDA graph in float32 (no llama.cpp emulation, quantized matmuls at accuracy level 0): a
 * reference to run on the CPU EP, not a target to load (see the file comment).
 */
export const CUDA_FLOAT32_REFERENCE: GraphTarget = Object.freeze({ ep: 'cuda', dtype: 'float32' });

/**
 * Whether a graph computes quantized matmuls as llama.cpp's CPU does (int8 activations at
 * MatMulNBits accuracy level 4, half-precision activation scales where its format has them):
 * the float32 CPU and WebGPU graphs. Float16 graphs and the CUDA graph (and its float32
 * reference) multiply their activations by the dequantized blocks (level 0): on a GPU the
 * emulation only costs.
 */
export function emulatesLlamaCpp(t: GraphTarget): boolean {
  return t.dtype === 'float32' && t.ep !== 'cuda';
}

export const EXECUTION_PROVIDERS: readonly ExecutionProvider[] = ['cpu', 'webgpu', 'cuda'];

/**
 * The target a graph for `ep` is built for: float32 on cpu and webgpu, float16 on cuda, unless
 * `dtype` says otherwise (float16 on cpu: the CPU-test variant of a float16 graph; float16 on
 * webgpu: adapters with `shader-f16`).
 * @throws InvalidOptionError for an unknown EP or dtype, or cuda with float32 (ONNX Runtime's
 *   CUDA GroupQueryAttention is registered for float16 and bfloat16 only).
 */
export function graphTarget(ep: ExecutionProvider, dtype?: GraphDtype): GraphTarget {
  if (!EXECUTION_PROVIDERS.includes(ep)) throw new InvalidOptionError('execution provider', `expected cpu, webgpu or cuda, got ${JSON.stringify(ep)}`);
  const d = dtype ?? (ep === 'cuda' ? 'float16' : 'float32');
  if (d !== 'float32' && d !== 'float16') throw new InvalidOptionError('graph dtype', `expected float32 or float16, got ${JSON.stringify(dtype)}`);
  if (ep === 'cuda' && d === 'float32') {
    throw new InvalidOptionError('graph dtype', 'float32 on cuda: ONNX Runtime 1.30 has no float32 CUDA GroupQueryAttention kernel; use float16');
  }
  return { ep, dtype: d };
}

/**
 * Version of the graphs without llama.cpp's arithmetic (float16 ones and the CUDA graph in float32),
 * in their bundle key, bumped when they change without the CPU graph changing (which bumps
 * `BUNDLE_BUILDER_VERSION`). 2: a float32 spine in float16 graphs (decoder-graph.ts), block
 * offsets recentred into zero points (quantized-matmul.ts `recenteredZeroPoints`).
 */
export const UNEMULATED_GRAPH_VERSION = 4;

/**
 * What the bundle cache key adds for a target: '' for `CPU_TARGET` (so CPU bundles keep the key
 * and bytes they had), `:cpu-float32-native-v<NATIVE_KERNELS_VERSION>` for `NATIVE_CPU_TARGET`
 * (`-ort-attention` after it for `NATIVE_CPU_TARGET_ORT_ATTENTION`), else `:<ep>-<dtype>`, and `-v<UNEMULATED_GRAPH_VERSION>` for the graphs it
 * versions. The KV dtype is not in it: a CPU float32 bundle holds the graph for each (bundle.ts
 * `KV_FLOAT16_MODEL_FILE`), over one data file.
 */
export function targetKey(t: GraphTarget): string {
  if (t.nativeKernels) return `:cpu-float32-native-v${NATIVE_KERNELS_VERSION}${t.ortAttention ? '-ort-attention' : ''}`;
  if (t.ep === 'cpu' && t.dtype === 'float32') return '';
  return `:${t.ep}-${t.dtype}${emulatesLlamaCpp(t) ? '' : `-v${UNEMULATED_GRAPH_VERSION}`}`;
}

/** Whether a target's bundle holds a float16-KV graph beside its own: the CPU float32 graphs. */
export function hasFloat16KvGraph(t: GraphTarget): boolean {
  return t.ep === 'cpu' && t.dtype === 'float32';
}

/** Whether a graph stores its KV cache in float16 under float32 activations (`GraphTarget.kvDtype`). */
export function halfKvOnly(t: GraphTarget): boolean {
  return t.dtype === 'float32' && t.kvDtype === 'float16';
}


/**
 * The graph target the engine loads for a requested EP and, when asked, dtype. Without a dtype:
 * cpu and webgpu get their float32 graphs, cuda its float16 graph. (The KV dtype is chosen at
 * load among the bundle's graphs, not here: `hasFloat16KvGraph`.) The EP is chosen before the
 * bundle is resolved (ep-choice.ts), so a `--ep cuda` without CUDA has become cpu here and gets
 * the CPU graph; a CUDA session that still falls back at creation is re-opened on the CPU graph
 * (Engine.open). With `nativeKernels` (the native backend will run it and its addon has the
 * kernels: native-addon.ts `nativeKernelsAvailable`) cpu float32 is `NATIVE_CPU_TARGET`.
 * @throws InvalidOptionError as `graphTarget`.
 */
export function engineGraphTarget(ep: ExecutionProvider = 'cpu', dtype?: GraphDtype, nativeKernels = false): GraphTarget {
  if (dtype !== undefined && !(ep === 'cpu' && dtype === 'float32')) return graphTarget(ep, dtype);
  if (ep !== 'cpu') return graphTarget(ep);
  return nativeKernels ? NATIVE_CPU_TARGET : CPU_TARGET;
}

/** Validates a KV cache dtype (EngineOptions.kvCacheDtype). @throws InvalidOptionError quoting it. */
export function validateKvDtype(d: unknown): GraphDtype {
  if (d !== 'float32' && d !== 'float16') throw new InvalidOptionError('KV cache dtype', `expected float32 or float16, got ${JSON.stringify(d)}`);
  return d;
}
