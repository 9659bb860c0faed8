/**
 * The family-specific steps of the decoder graph (decoder-graph.ts), each a few nodes over the
 * builder, so the Llama path stays as it was and a family's option set (`ModelConfig.gemma`,
 * `localRope`) switches them on:
 *   - the FFN's gated activation (SiLU, Gemma's GELU-tanh, gpt-oss's clamped SwiGLU:
 *     `applyGatedActivation`, for the dense MLP and expert blocks alike), Gemma's embedding scale
 *     and final-logit soft-cap;
 *   - GroupQueryAttention's per-layer attributes: q·k scale, logit soft-cap, sliding window, and
 *     its `head_sink` input (gpt-oss's attention sinks).
 * Formulas and sources are on each function. Only ops every graph target already has kernels for
 * (Mul, Add, Sub, Sigmoid) are used: tanh(z) = 2σ(2z) − 1, so GELU-tanh and the soft-cap need no
 * Tanh or FastGelu kernel.
 */
import { ModelLoadError } from '../errors.ts';
import { layerWeight, type ModelConfig } from './manifest.ts';
import type { OnnxGraphBuilder } from './onnx-builder.ts';

/** A float scalar constant in the graph's float type (`toF` casts it for a float16 graph). */
type Scalar = (v: number) => string;

/**
 * Gemma's scaled embedding: x · sqrt(hidden_size) (transformers `Gemma2Model.forward`
 * `normalizer`; llama.cpp `ggml_scale(inpL, sqrtf(n_embd))`). Identity without `c.gemma`.
 */
export function scaleEmbedding(g: OnnxGraphBuilder, x: string, c: ModelConfig, scalar: Scalar): string {
  return c.gemma ? g.op('Mul', [x, scalar(c.gemma.embeddingScale)]) : x;
}

/**
 * A gated FFN's activation: `silu` (Llama's SwiGLU), `gelu-tanh` (Gemma) or gpt-oss's clamped
 * SwiGLU with its α and clamp limit (`GPT_OSS_SWIGLU`: α 1.702, limit 7).
 */
export type GatedActivationKind = { kind: 'silu' } | { kind: 'gelu-tanh' } | ({ kind: 'swiglu-clamped' } & ClampedSwiglu);

/** gpt-oss's clamped SwiGLU parameters (`ModelConfig.clampedSwiglu`). */
export interface ClampedSwiglu {
  /** α in gate·σ(α·gate) (gpt-oss 1.702). */
  alpha: number;
  /** gate clamped to ≤ limit, up to [−limit, limit] (gpt-oss 7). */
  limit: number;
}

/** gpt-oss's values (gpt-oss `torch/model.py` `swiglu`; transformers `GptOssExperts` alpha, limit). */
export const GPT_OSS_SWIGLU: ClampedSwiglu = { alpha: 1.702, limit: 7 };

/** The activation a config's dense FFN uses: Gemma's GELU-tanh, `c.clampedSwiglu`, else SiLU. */
export function gatedActivationOf(c: ModelConfig): GatedActivationKind {
  if (c.gemma) return { kind: 'gelu-tanh' };
  return c.clampedSwiglu ? { kind: 'swiglu-clamped', ...c.clampedSwiglu } : { kind: 'silu' };
}

/**
 * The FFN's gate activation combined with `up`, elementwise over same-shaped gate / up (any
 * rank; the graph's float type): the dense MLP calls it through `gatedActivation`, an expert
 * block (MoE) with the kind its family uses.
 *   silu:           silu(gate)·up = gate·σ(gate)·up                  (Shazeer 2020, "GLU Variants")
 *   gelu-tanh:      gelu(gate)·up, gelu(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³))) = x·σ(x·(k₁ + k₂x²)),
 *                   k₁ = 2√(2/π), k₂ = 0.044715·k₁ (½(1 + tanh z) = σ(2z); Hendrycks & Gimpel 2016,
 *                   transformers `gelu_pytorch_tanh`)
 *   swiglu-clamped: g = min(gate, L), u = clip(up, −L, L); g·σ(α·g)·(u + 1)
 *                   (gpt-oss `swiglu`; transformers `GptOssExperts._apply_gate`), as two Clip nodes.
 * @param scalar a float constant in the graph's float type.
 * @returns the output's name, shaped as gate.
 */
export function applyGatedActivation(g: OnnxGraphBuilder, gate: string, up: string, act: GatedActivationKind, scalar: Scalar): string {
  switch (act.kind) {
    case 'silu':
      return g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
    case 'gelu-tanh': {
      const k1 = 2 * Math.sqrt(2 / Math.PI);
      const inner = g.op('Add', [scalar(k1), g.op('Mul', [scalar(0.044715 * k1), g.op('Mul', [gate, gate])])]);
      const gelu = g.op('Mul', [gate, g.op('Sigmoid', [g.op('Mul', [gate, inner])])]);
      return g.op('Mul', [gelu, up]);
    }
    case 'swiglu-clamped': {
      const gc = g.op('Clip', [gate, '', scalar(act.limit)]);
      const uc = g.op('Clip', [up, scalar(-act.limit), scalar(act.limit)]);
      const glu = g.op('Mul', [gc, g.op('Sigmoid', [g.op('Mul', [gc, scalar(act.alpha)])])]);
      return g.op('Mul', [glu, g.op('Add', [uc, scalar(1)])]);
    }
  }
}

/** The dense MLP's gate activation times `up` for config `c` (`gatedActivationOf`). */
export function gatedActivation(g: OnnxGraphBuilder, gate: string, up: string, c: ModelConfig, scalar: Scalar): string {
  return applyGatedActivation(g, gate, up, gatedActivationOf(c), scalar);
}

/**
 * Final-logit soft-cap c·tanh(l / c) = 2c·σ(2l / c) − c (Gemma 2's `final_logit_softcapping`,
 * transformers `Gemma2ForCausalLM.forward`; llama.cpp scales by 1/c, tanh, scales by c).
 * Identity when there is none.
 */
export function softcapLogits(g: OnnxGraphBuilder, logits: string, c: ModelConfig, scalar: Scalar): string {
  const cap = c.gemma?.finalLogitSoftcap ?? 0;
  if (cap === 0) return logits;
  const s = g.op('Sigmoid', [g.op('Mul', [logits, scalar(2 / cap)])]);
  return g.op('Sub', [g.op('Mul', [s, scalar(2 * cap)]), scalar(cap)]);
}

/**
 * GroupQueryAttention's attributes for layer `i`: `scale` (1/√headDim, or Gemma's
 * query_pre_attn_scalar^-0.5), `softcap` (c·tanh(s/c) on the scaled logits, ONNX Runtime's
 * `softcap`; Gemma 2's attn_logit_softcapping) and `local_window_size` (`localWindow`).
 */
export function attentionAttributes(c: ModelConfig, i: number): Record<string, { float: number } | number> {
  const scale = c.gemma?.attentionScale ?? 1 / Math.sqrt(c.headDim);
  const softcap = c.gemma?.attentionSoftcap ?? 0;
  return { scale: { float: scale }, ...(softcap > 0 ? { softcap: { float: softcap } } : {}), ...localWindow(c, i) };
}

/**
 * GroupQueryAttention's optional inputs after its seven required ones, for layer `i`: none, or
 * with attention sinks (`c.attentionSinks`) four omitted ones (cos_cache, sin_cache,
 * position_ids, attention_bias) and then `head_sink` (input 11: float [numHeads], the graph's
 * float type), whose name `sink` makes an initializer of `model.layers.{i}.self_attn.sinks`.
 * ONNX Runtime's semantics (`ContribOperators.md` GroupQueryAttention; CPU kernel from
 * onnxruntime#25269, CUDA flash attention #25432, WebGPU #25285): softmax_j =
 * exp(s_j) / (exp(head_sink[h]) + Σ_k exp(s_k)) over the scaled (and soft-capped) scores, the
 * sink unscaled — gpt-oss's formula. Measured equal to the reference forward on the CPU EP
 * (test/integration/attention-sinks.test.ts).
 */
export function attentionSinkInputs(c: ModelConfig, i: number, sink: (name: string) => string): string[] {
  return c.attentionSinks ? ['', '', '', '', sink(layerWeight(i, 'self_attn.sinks'))] : [];
}

/**
 * GroupQueryAttention's `local_window_size` for layer `i` of a sliding-window model: W itself,
 * the keys a query sees including its own (measured on ONNX Runtime 1.30's CPU kernel against the
 * reference's window mask, test/integration/sliding-window.test.ts: W − 1 is off by one key from
 * position W on); none for a full-attention layer. @throws ModelLoadError for a window under 2
 * (never tested on the kernel; no real model has one).
 */
export function localWindow(c: ModelConfig, i: number): { local_window_size?: number } {
  const w = c.slidingWindow?.[i] ?? 0;
  if (w === 0) return {};
  if (!Number.isInteger(w) || w < 2) throw new ModelLoadError(`layer ${i}'s sliding window ${w} is not supported: a window must hold at least 2 tokens`);
  return { local_window_size: w };
}
