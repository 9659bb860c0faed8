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
 *   cuda   float16  float16 activations and KV cache (CUDA's GroupQueryAttention has no float32
 *                   kernel), float16 weights and MatMulNBits scales, no llama.cpp emulation ops.
 * A float16 graph keeps float32 at its edges the engine sees: the RoPE rows come in as float32
 * and are cast once, the logits go out as float32; past/present/new KV rows are float16.
 */
import { InvalidOptionError } from '../errors.ts';
import type { ExecutionProvider } from './backend.ts';

/** Activation and KV-cache dtype of a graph. */
export type GraphDtype = 'float32' | 'float16';

export interface GraphTarget {
  ep: ExecutionProvider;
  dtype: GraphDtype;
}

/** Today's graph: what every bundle was before targets existed (its cache key is unchanged). */
export const CPU_TARGET: GraphTarget = Object.freeze({ ep: 'cpu', dtype: 'float32' });

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
 * What the bundle cache key adds for a target: '' for `CPU_TARGET` (so CPU bundles keep the key
 * and bytes they had), else `:<ep>-<dtype>`.
 */
export function targetKey(t: GraphTarget): string {
  return t.ep === 'cpu' && t.dtype === 'float32' ? '' : `:${t.ep}-${t.dtype}`;
}

/**
 * The graph target the engine loads for a requested EP and, when asked, dtype. Without a dtype,
 * cpu and webgpu get their float32 graphs and cuda still gets the CPU graph: a CUDA session that
 * cannot start falls back to the CPU EP (session.ts), where a float16 graph runs, but slower and
 * less exactly than the float32 one; the CUDA float16 graph is loaded with `dtype` 'float16' (and
 * is the default once the EP is chosen before the bundle is resolved, issue 16 item 3).
 * @throws InvalidOptionError as `graphTarget`.
 */
export function engineGraphTarget(ep: ExecutionProvider = 'cpu', dtype?: GraphDtype): GraphTarget {
  if (dtype !== undefined) return graphTarget(ep, dtype);
  return ep === 'webgpu' ? graphTarget('webgpu') : CPU_TARGET;
}
