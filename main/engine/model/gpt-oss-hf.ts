/**
 * gpt-oss from a Hugging Face folder (`GptOssForCausalLM`, model_type `gpt_oss`): its MoE options
 * from config.json and its stacked expert tensors mapped to the canonical per-expert weights
 * (manifest.ts `MoeOptions`) as the import reads them. Float safetensors only: a folder whose
 * experts are MXFP4 (`*_blocks` / `*_scales`, `quantization_config.quant_method` "mxfp4", as
 * openai/gpt-oss-20b ships) is refused naming it.
 *
 * Layout (transformers `modeling_gpt_oss.py` `GptOssExperts`, `GptOssTopKRouter`; llama.cpp
 * `convert_hf_to_gguf.py` `GptOssModel`), layer i:
 *   mlp.router.weight [E, D], .bias [E]                 → mlp.gate.weight / .bias
 *   mlp.experts.gate_up_proj [E, D, 2I] (in × out; gate = [..., ::2], up = [..., 1::2])
 *                                                       → experts.e.gate_proj / up_proj.weight [I, D]
 *   mlp.experts.gate_up_proj_bias [E, 2I] (interleaved) → experts.e.gate_proj / up_proj.bias [I]
 *   mlp.experts.down_proj [E, I, D] (in × out)          → experts.e.down_proj.weight [D, I]
 *   mlp.experts.down_proj_bias [E, D]                   → experts.e.down_proj.bias [D]
 *   everything else under its canonical (Llama) name, `self_attn.sinks` [H] included.
 */
import { GPT_OSS_SWIGLU } from './block-variants.ts';
import { layerWeight, type LazyTensor32, type ModelConfig, type MoeOptions } from './manifest.ts';
import { GPT_OSS_MOE } from './moe.ts';

/** The gpt-oss fields of a Hugging Face config.json (GptOssConfig). */
export interface GptOssHfFields {
  num_local_experts?: number | null;
  num_experts_per_tok?: number | null;
  intermediate_size: number;
  swiglu_limit?: number | null;
  quantization_config?: { quant_method?: string } | null;
}

/**
 * `moe` from a GptOssConfig: E `num_local_experts`, k `num_experts_per_tok`, expert width
 * `intermediate_size`, clamped SwiGLU with limit `swiglu_limit` (default 7) and α 1.702
 * (transformers hard-codes it in `GptOssExperts`).
 * @throws (via `fail`) for a missing count, k > E, or MXFP4 experts (`quantization_config`).
 */
export function gptOssHfOptions(c: GptOssHfFields, fail: (msg: string) => never): MoeOptions {
  const method = c.quantization_config?.quant_method;
  if (method) fail(`quantization_config.quant_method ${JSON.stringify(method)} (gpt-oss's MXFP4 *_blocks / *_scales experts in a Hugging Face folder) is not supported; use the model's GGUF file or a float (BF16 / F32) checkpoint`);
  const E = c.num_local_experts ?? fail('config.json has no num_local_experts, which gpt-oss needs');
  const k = c.num_experts_per_tok ?? fail('config.json has no num_experts_per_tok, which gpt-oss needs');
  if (k > E) fail(`num_experts_per_tok ${k} exceeds num_local_experts ${E}`);
  return { numExperts: E, expertsPerToken: k, expertIntermediateSize: c.intermediate_size, ...GPT_OSS_MOE, swiglu: { alpha: GPT_OSS_SWIGLU.alpha, limit: c.swiglu_limit ?? GPT_OSS_SWIGLU.limit } };
}

/** Layer i's stacked MoE tensors in the folder with their shapes (see the file comment). */
function stackedTensors(c: ModelConfig, moe: MoeOptions, i: number): [string, number[]][] {
  const { numExperts: E, expertIntermediateSize: I } = moe;
  const D = c.hiddenSize;
  const x = (s: string) => layerWeight(i, `mlp.${s}`);
  return [
    [x('router.weight'), [E, D]], [x('router.bias'), [E]],
    [x('experts.gate_up_proj'), [E, D, 2 * I]], [x('experts.gate_up_proj_bias'), [E, 2 * I]],
    [x('experts.down_proj'), [E, I, D]], [x('experts.down_proj_bias'), [E, D]],
  ];
}

const isMoeWeight = (name: string) => /^model\.layers\.\d+\.mlp\./.test(name);

/**
 * The tensors a gpt-oss folder must hold, with their shapes: `expected` (the canonical weights)
 * with each layer's MoE weights replaced by its stacked tensors.
 */
export function gptOssHfTensors(c: ModelConfig, expected: Map<string, number[]>): Map<string, number[]> {
  const out = new Map([...expected].filter(([name]) => !isMoeWeight(name)));
  for (let i = 0; i < c.numLayers; i++) for (const [name, shape] of stackedTensors(c, c.moe!, i)) out.set(name, shape);
  return out;
}

/**
 * The canonical weights (`expected`'s names and shapes) from a gpt-oss folder's tensors
 * (`gptOssHfTensors`' names). A stacked tensor is read once per layer and kept while that layer's
 * experts are read (one layer's experts as float32 in memory: 3.2 GB for gpt-oss-20b's).
 */
export function gptOssCanonicalSources(src: ReadonlyMap<string, LazyTensor32>, c: ModelConfig, expected: Map<string, number[]>): Map<string, LazyTensor32> {
  const moe = c.moe!;
  const I = moe.expertIntermediateSize;
  const D = c.hiddenSize;
  let cached: { layer: number; tensors: Map<string, Promise<Float32Array>> } | null = null;
  const stacked = (i: number, s: string): Promise<Float32Array> => {
    if (cached?.layer !== i) cached = { layer: i, tensors: new Map() };
    const name = layerWeight(i, `mlp.${s}`);
    let t = cached.tensors.get(name);
    if (!t) cached.tensors.set(name, (t = src.get(name)!.load()));
    return t;
  };
  const lazy = (shape: number[], load: () => Promise<Float32Array>): LazyTensor32 => ({
    shape, load,
    chunks: async function* (elements) {
      const all = await load();
      for (let o = 0; o < all.length; o += elements) yield all.subarray(o, Math.min(all.length, o + elements));
    },
  });
  const out = new Map<string, LazyTensor32>();
  for (const [name, shape] of expected) {
    const m = /^model\.layers\.(\d+)\.mlp\.(gate\.(weight|bias)|experts\.(\d+)\.(gate|up|down)_proj\.(weight|bias))$/.exec(name);
    if (!m) {
      out.set(name, src.get(name)!);
      continue;
    }
    const i = Number(m[1]);
    if (m[3]) {
      out.set(name, src.get(layerWeight(i, `mlp.router.${m[3]}`))!);
      continue;
    }
    const e = Number(m[4]);
    const [proj, kind] = [m[5], m[6]];
    out.set(name, lazy(shape, async () => {
      if (proj === 'down') {
        const t = await stacked(i, kind === 'weight' ? 'experts.down_proj' : 'experts.down_proj_bias');
        if (kind === 'bias') return t.slice(e * D, (e + 1) * D);
        const w = new Float32Array(D * I); // [D, I] from [I, D] of expert e
        for (let r = 0; r < I; r++) for (let d = 0; d < D; d++) w[d * I + r] = t[(e * I + r) * D + d];
        return w;
      }
      const odd = proj === 'up' ? 1 : 0;
      const t = await stacked(i, kind === 'weight' ? 'experts.gate_up_proj' : 'experts.gate_up_proj_bias');
      if (kind === 'bias') return Float32Array.from({ length: I }, (_, r) => t[e * 2 * I + 2 * r + odd]);
      const w = new Float32Array(I * D); // [I, D] from columns 2r + odd of [D, 2I]
      for (let d = 0; d < D; d++) for (let r = 0; r < I; r++) w[r * D + d] = t[(e * D + d) * 2 * I + 2 * r + odd];
      return w;
    }));
  }
  return out;
}
