/**
 * Mixture-of-Experts models on the import side: `ModelConfig.moe` from a Hugging Face config
 * (`Qwen3MoeForCausalLM`) or a GGUF file's `{arch}.expert_*` metadata, the canonical weights a MoE
 * layer has (`moeLayerWeights`), and llama.cpp's tensor names for them. llama.cpp stores a layer's
 * experts as one 3-D tensor per projection, `blk.N.ffn_{gate,up,down}_exps.weight` of row-major
 * shape [E, out, in] (ggml ne = [in, out, E]); each expert's [out, in] slice is contiguous, so an
 * expert is read as a tensor of its own at offset e · bytes/E (`expertSlice`). The graph side is
 * moe-block.ts.
 *
 * Sources: transformers `configuration_qwen3_moe.py` (num_experts, num_experts_per_tok,
 * moe_intermediate_size, norm_topk_prob default false, decoder_sparse_step, mlp_only_layers) and
 * `modeling_qwen3_moe.py` (softmax over all experts, top-k, renormalised when norm_topk_prob);
 * llama.cpp `llama-arch.cpp` (LLM_ARCH_QWEN3MOE tensor names; `expert_count`,
 * `expert_used_count`, `expert_feed_forward_length`) and `llama-model.cpp` (qwen3moe's
 * `build_moe_ffn`: SiLU experts, softmax gating, weights normalised).
 */
import { ModelLoadError } from '../errors.ts';
import { GPT_OSS_SWIGLU } from './block-variants.ts';
import { layerWeight, type ModelConfig, type MoeOptions } from './manifest.ts';

/** Hugging Face model types with MoE layers, and the architecture each becomes. */
export const MOE_MODEL_TYPES = { qwen3_moe: 'qwen3moe', gpt_oss: 'gpt-oss' } as const;

/**
 * gpt-oss's routing and experts (transformers `GptOssTopKRouter`, `GptOssExperts`; llama.cpp
 * `llm_build_openai_moe_iswa`): top-k of the biased router logits, softmax over the k, biased
 * experts with the clamped SwiGLU (`GPT_OSS_SWIGLU`).
 */
export const GPT_OSS_MOE: Omit<MoeOptions, 'numExperts' | 'expertsPerToken' | 'expertIntermediateSize'> = {
  routing: 'topk-softmax', normalizeTopK: false, routerBias: true, expertBias: true, activation: 'swiglu-clamped', swiglu: { ...GPT_OSS_SWIGLU },
};

/** llama.cpp's 3-D expert tensors by canonical projection name. */
const GGUF_EXPERT_TENSORS: Record<string, string> = { gate_proj: 'ffn_gate_exps', up_proj: 'ffn_up_exps', down_proj: 'ffn_down_exps' };

/** The canonical names of layer i's MoE weights (manifest.ts `MoeOptions`) with their shapes, in load order. */
export function moeLayerWeights(c: Pick<ModelConfig, 'hiddenSize'>, moe: MoeOptions, i: number): [string, number[]][] {
  const D = c.hiddenSize;
  const I = moe.expertIntermediateSize;
  const out: [string, number[]][] = [[layerWeight(i, 'mlp.gate.weight'), [moe.numExperts, D]]];
  if (moe.routerBias) out.push([layerWeight(i, 'mlp.gate.bias'), [moe.numExperts]]);
  for (let e = 0; e < moe.numExperts; e++) {
    const x = (p: string) => layerWeight(i, `mlp.experts.${e}.${p}`);
    out.push([x('gate_proj.weight'), [I, D]], [x('up_proj.weight'), [I, D]], [x('down_proj.weight'), [D, I]]);
    if (moe.expertBias) out.push([x('gate_proj.bias'), [I]], [x('up_proj.bias'), [I]], [x('down_proj.bias'), [D]]);
  }
  return out;
}

/**
 * Where a canonical expert weight (or bias) lives in a GGUF file: llama.cpp's stacked tensor
 * (weights [E, out, in], biases [E, out]: gpt-oss's `ffn_*_exps.bias`) and the expert's index in
 * it, or null for a weight that is not an expert's.
 */
export function ggufExpertTensor(canonical: string): { tensor: string; expert: number } | null {
  const m = /^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.(weight|bias)$/.exec(canonical);
  return m ? { tensor: `blk.${m[1]}.${GGUF_EXPERT_TENSORS[m[3]]}.${m[4]}`, expert: Number(m[2]) } : null;
}

/** The per-layer MoE tensor names of a GGUF file beyond the experts: the router. */
export const GGUF_MOE_NAMES: Record<string, string> = { 'mlp.gate.weight': 'ffn_gate_inp.weight', 'mlp.gate.bias': 'ffn_gate_inp.bias' };

/** A tensor's info (gguf-file.ts `GgufTensor`, structurally). */
interface TensorInfo {
  name: string;
  typeId: number;
  shape: number[];
  offset: number;
  byteLength: number;
}

/**
 * Expert `expert`'s slice of a stacked expert tensor — [out, in] of weights [E, out, in], [out] of
 * biases [E, out] — as a tensor of its own (name `tensor[e]`, offset e · bytes / E): its blocks are
 * whole rows, so every reader of a 2-D (1-D) tensor (raw blocks, float32 chunks) reads it as it is.
 * @throws ModelLoadError when the tensor is not 2-D or 3-D with `expert` < E.
 */
export function expertSlice<T extends TensorInfo>(t: T, expert: number, file: string): T {
  const [E, ...rest] = t.shape;
  if ((t.shape.length !== 3 && t.shape.length !== 2) || !(expert < E)) throw new ModelLoadError(`tensor ${t.name} has shape [${t.shape.join(', ')}]; expected [experts, out, in] or [experts, out] with expert ${expert}`, file);
  const bytes = t.byteLength / E;
  return { ...t, name: `${t.name}[${expert}]`, shape: rest, offset: t.offset + expert * bytes, byteLength: bytes };
}

/**
 * `moe` from a GGUF file's metadata (`{arch}.expert_count`, `expert_used_count`,
 * `expert_feed_forward_length`), as llama.cpp's graph for the architecture runs them:
 *   qwen3moe: softmax gating, the k weights normalised (llama.cpp's qwen3moe graph always
 *     normalises; Qwen3-MoE checkpoints set norm_topk_prob), SiLU experts, no biases;
 *   gpt-oss (`llm_build_openai_moe_iswa`: `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT`,
 *     `LLM_FFN_SWIGLU_OAI_MOE`): the top k of the router logits (router bias `ffn_gate_inp.bias`),
 *     softmax over those k, biased experts (`ffn_*_exps.bias`), clamped SwiGLU α 1.702, limit 7
 *     (ggml `swiglu_oai`'s fixed values).
 * @param int reads a required positive integer key under `{arch}.` (throwing ModelLoadError).
 * @throws ModelLoadError when k exceeds E.
 */
export function ggufMoeOptions(arch: 'qwen3moe' | 'gpt-oss', int: (key: string, limit: number) => number, file: string): MoeOptions {
  const numExperts = int('expert_count', 65_536);
  const expertsPerToken = int('expert_used_count', 65_536);
  if (expertsPerToken > numExperts) throw new ModelLoadError(`GGUF expert_used_count ${expertsPerToken} exceeds expert_count ${numExperts}`, file);
  const shape = { numExperts, expertsPerToken, expertIntermediateSize: int('expert_feed_forward_length', 262_144) };
  if (arch === 'gpt-oss') return { ...shape, ...GPT_OSS_MOE };
  return { ...shape, routing: 'softmax-topk', normalizeTopK: true, routerBias: false, expertBias: false, activation: 'silu' };
}

/** The MoE fields of a Hugging Face config.json (Qwen3MoeConfig). */
export interface MoeHfFields {
  num_experts?: number | null;
  /** transformers ≥ 5's name for `num_experts` (Qwen3MoeConfig.save_pretrained writes this one). */
  num_local_experts?: number | null;
  num_experts_per_tok?: number | null;
  moe_intermediate_size?: number | null;
  norm_topk_prob?: boolean | null;
  decoder_sparse_step?: number | null;
  mlp_only_layers?: number[] | null;
  shared_expert_intermediate_size?: number | null;
}

/**
 * `moe` from a Qwen3MoeConfig (E `num_experts`, or `num_local_experts` as transformers ≥ 5 writes it): every layer sparse (decoder_sparse_step 1, no mlp_only_layers),
 * softmax then top-k, renormalised when `norm_topk_prob` (transformers' default: false).
 * @throws (via `fail`) for a missing count, k > E, dense layers among the sparse ones, or a
 *   shared expert (Qwen2-MoE's; not Qwen3-MoE's).
 */
export function hfMoeOptions(c: MoeHfFields, fail: (msg: string) => never): MoeOptions {
  const need = (k: 'num_experts' | 'num_experts_per_tok' | 'moe_intermediate_size'): number => c[k] ?? fail(`config.json has no ${k}, which a MoE model needs`);
  // transformers ≥ 5 writes Qwen3MoeConfig's expert count as `num_local_experts` (`num_experts` is its alias when read).
  if (c.num_experts != null && c.num_local_experts != null && c.num_experts !== c.num_local_experts) {
    fail(`num_experts ${c.num_experts} and num_local_experts ${c.num_local_experts} disagree`);
  }
  const numExperts = c.num_experts ?? c.num_local_experts ?? need('num_experts');
  const expertsPerToken = need('num_experts_per_tok');
  if (expertsPerToken > numExperts) fail(`num_experts_per_tok ${expertsPerToken} exceeds num_experts ${numExperts}`);
  if ((c.decoder_sparse_step ?? 1) !== 1) fail(`decoder_sparse_step ${c.decoder_sparse_step} (dense layers between the MoE ones) is not supported; supported: 1`);
  if ((c.mlp_only_layers ?? []).length > 0) fail(`mlp_only_layers ${JSON.stringify(c.mlp_only_layers)} (dense layers among the MoE ones) is not supported`);
  if (c.shared_expert_intermediate_size) fail(`shared_expert_intermediate_size ${c.shared_expert_intermediate_size} (a shared expert) is not supported`);
  return {
    numExperts, expertsPerToken, expertIntermediateSize: need('moe_intermediate_size'),
    routing: 'softmax-topk', normalizeTopK: c.norm_topk_prob ?? false, routerBias: false, expertBias: false, activation: 'silu',
  };
}
