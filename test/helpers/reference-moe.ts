/**
 * The reference forward's Mixture-of-Experts MLP (reference-forward.ts uses it for a config with
 * `moe`), float64, written from the models' own code, not from moe-block.ts:
 *   - router logits r = W_router · x (+ b_router: gpt-oss `GptOssTopKRouter`);
 *   - `softmax-topk` (transformers `Qwen3MoeSparseMoeBlock.forward`): p = softmax(r) over all E,
 *     the k largest p, divided by their sum when `norm_topk_prob`;
 *     `topk-softmax` (gpt-oss `GptOssTopKRouter.forward`): the k largest r, softmax over those k;
 *   - each chosen expert: down · (act(gate · x + b, up · x + b)) + b, weighted and summed, act
 *     silu(g)·u or gpt-oss's clamped SwiGLU (`swiglu-clamped`, reference-activations.ts).
 * Ties in the top-k go to the lower expert index (a stable sort by value), as torch.topk does.
 */
import { clampedSwigluReference, silu } from './reference-activations.ts';
import { layerWeight, type ModelConfig, type ModelWeights, type MoeOptions, type Tensor32 } from '../../main/engine/model/manifest.ts';

/** y = W x (+ b), W [out, in] row-major, in float64. */
function matVec(w: Tensor32, x: Float64Array, b?: Tensor32): Float64Array {
  const [n, k] = w.shape;
  const y = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    let s = b ? b.data[r] : 0;
    for (let c = 0; c < k; c++) s += w.data[r * k + c] * x[c];
    y[r] = s;
  }
  return y;
}



function softmax(v: number[]): number[] {
  const m = Math.max(...v);
  const e = v.map((x) => Math.exp(x - m));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

/** The k experts a token uses and their weights, from its router logits (see the file comment). */
export function referenceRouting(r: ArrayLike<number>, moe: MoeOptions): { expert: number; weight: number }[] {
  const scores = moe.routing === 'softmax-topk' ? softmax(Array.from(r)) : Array.from(r);
  const top = scores.map((s, e) => ({ e, s })).sort((a, b) => b.s - a.s || a.e - b.e).slice(0, moe.expertsPerToken);
  if (moe.routing === 'topk-softmax') {
    const p = softmax(top.map((t) => t.s));
    return top.map((t, i) => ({ expert: t.e, weight: p[i] }));
  }
  const sum = moe.normalizeTopK ? top.reduce((a, t) => a + t.s, 0) : 1;
  return top.map((t) => ({ expert: t.e, weight: t.s / sum }));
}

/** Layer l's MoE MLP of a reference model. */
export class ReferenceMoe {
  private readonly get: (suffix: string) => Tensor32 | undefined;
  constructor(
    private readonly config: ModelConfig,
    weights: ModelWeights,
    private readonly layer: number,
  ) {
    this.get = (suffix) => weights.get(layerWeight(layer, suffix));
  }

  /** The MLP's output [D] for the normed hidden state x [D]. */
  apply(x: Float64Array): Float64Array {
    const moe = this.config.moe!;
    const need = (s: string) => this.get(s) ?? (() => { throw new Error(`missing weight ${layerWeight(this.layer, s)}`); })();
    const bias = (s: string) => (moe.expertBias || s.startsWith('mlp.gate.') ? this.get(s) : undefined);
    const r = matVec(need('mlp.gate.weight'), x, moe.routerBias ? need('mlp.gate.bias') : undefined);
    const out = new Float64Array(this.config.hiddenSize);
    for (const { expert, weight } of referenceRouting(r, moe)) {
      const p = (name: string) => `mlp.experts.${expert}.${name}`;
      const g = matVec(need(p('gate_proj.weight')), x, bias(p('gate_proj.bias')));
      const u = matVec(need(p('up_proj.weight')), x, bias(p('up_proj.bias')));
      const sw = moe.swiglu;
      for (let i = 0; i < g.length; i++) g[i] = moe.activation === 'swiglu-clamped' && sw ? clampedSwigluReference(g[i], u[i], sw.alpha, sw.limit) : silu(g[i]) * u[i];
      const y = matVec(need(p('down_proj.weight')), g, bias(p('down_proj.bias')));
      for (let i = 0; i < out.length; i++) out[i] += weight * y[i];
    }
    return out;
  }
}
