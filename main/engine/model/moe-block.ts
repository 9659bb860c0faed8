/**
 * The Mixture-of-Experts MLP of one decoder layer (`ModelConfig.moe`, manifest.ts `MoeOptions`)
 * as an expert dispatch in the graph: the router picks each token's k experts and weights, and
 * each expert runs inside an ONNX `If` whose branch holds that expert's weights, taken only when
 * some token of the step routes to it; inside, the expert runs on the rows of the tokens that
 * chose it (NonZero, Gather) and its weighted output is added back at those rows (ScatterND,
 * reduction add); with many experts, groups of them sit behind one more If taken when some token
 * chose one of the group (`expertGroupSize`), so a decode step evaluates fewer untaken Ifs. A
 * decode step (one token) runs exactly k experts' matmuls, so it reads k
 * experts' weights of E; a prefill chunk runs each chosen expert once, on its tokens only, so its
 * expert FLOPs are the active ones (T·k expert rows), reading each chosen expert's weights once.
 *
 * Why not ONNX Runtime's `com.microsoft.MoE` / `QMoE`: MoE (float) has the semantics (softmax,
 * top-k, renormalised; SwiGLU with fc1 rows gate/up interleaved, measured equal to this block's
 * arithmetic at 4e-9 on the 1.30 CPU kernel), but QMoE's symmetric 4/8-bit blocks cannot hold
 * llama.cpp's Q4_K / Q5_K / Q2_K offsets, and neither computes with llama.cpp's int8 activations;
 * here every expert projection is the same `linears` step as a dense MLP's (FusedMatMul, or
 * MatMulNBits with llama.cpp's activation arithmetic), so a quantized expert matches llama.cpp as
 * a dense quantized matmul does. An expert's weights are initializers of its `then` branch
 * (measured on ONNX Runtime 1.30's CPU EP: MatMulNBits there is prepacked and gives the same
 * bits as in the main graph; an untaken If costs 4–10 µs of CPU time per session run: `expertGroupSize`).
 *
 * Routing (`MoeOptions.routing`): `softmax-topk` p = softmax(r), the k largest, divided by their
 * sum when `normalizeTopK` (transformers `Qwen3MoeSparseMoeBlock`; llama.cpp `build_moe_ffn` with
 * softmax gating and norm_w); `topk-softmax` the k largest r, softmax over them (gpt-oss). Ties
 * in TopK go to the lower expert index (ONNX TopK), as torch.topk and ggml's argsort do for
 * distinct values. The experts' outputs are summed in expert order (llama.cpp: in rank order), so
 * float32 rounding differs by one ulp-scale term.
 */
import { ModelLoadError } from '../errors.ts';
import type { ModelConfig, MoeOptions } from './manifest.ts';
import { DataType, type OnnxGraphBuilder } from './onnx-builder.ts';
import { layerWeight } from './manifest.ts';
import { applyGatedActivation } from './block-variants.ts';

/**
 * Linears that read the same input (decoder-graph.ts `linears`): y_i = x · W_iᵀ (+ b_i) for
 * `outs` [name, out features], stacked into one MatMulNBits where the weights allow.
 */
export type Linears = (input: string, outs: [string, number][], inDim: number, bias: boolean, stackedName: string) => string[];

/** What the block needs from the decoder graph. */
export interface MoeContext {
  /** The main graph's linears (the router). */
  linears: Linears;
  /**
   * Fresh linears for one expert's branch: their activation steps (half scales, block sums) are
   * cached per instance, and a value made inside one branch is not visible in another.
   */
  branchLinears: () => Linears;
  /** A float scalar constant in the graph's float type. */
  scalar: (v: number) => string;
  /** The graph's float element type (DataType.FLOAT or FLOAT16). */
  floatType: number;
}

/**
 * The MoE MLP's output [1, T, D] for the normed hidden state `h` [1, T, D] of layer `i`: row t is
 * Σ over the experts token t chose of w[t, e] · expert_e(h[t]), w [T, E] the routing weights.
 * @throws ModelLoadError when the model has no `moe` options or k is not in 1 … E.
 */
export function moeBlock(g: OnnxGraphBuilder, c: ModelConfig, i: number, h: string, ctx: MoeContext): string {
  const moe = c.moe;
  if (!moe) throw new ModelLoadError(`layer ${i} has no MoE options`);
  const { numExperts: E, expertsPerToken: k } = moe;
  if (!(k >= 1 && k <= E)) throw new ModelLoadError(`layer ${i}: ${k} experts per token of ${E} is not supported`);
  const L = (s: string) => layerWeight(i, s);
  const [logits] = ctx.linears(h, [[L('mlp.gate'), E]], c.hiddenSize, moe.routerBias, L('mlp.gate'));
  const weights = routingWeights(g, g.op('Reshape', [logits, g.int64([-1, E])]), moe, ctx.floatType); // [T, E]
  // Whether any token chose expert e ([E] bool), and each expert's column of weights [T, 1].
  const chosen = g.op('Greater', [g.op('ReduceMax', [weights, g.int64([0])], { keepdims: 0 }), ctx.scalar(0)]);
  const flags = splitEvenly(g, chosen, E, 0);
  const columns = splitEvenly(g, weights, E, 1);
  const rows = g.op('Reshape', [h, g.int64([-1, c.hiddenSize])]); // [T, D]
  const flat = g.int64([-1]);
  /** Expert e's If: its branch when some token chose it, else `before` passed on. */
  const expertIf = (e: number, before: string): string => {
    const taken = g.subgraph(`layer${i}_expert${e}`, ctx.floatType, () => {
      // The rows of the tokens that chose e, their weights, and the weighted output added back at those rows.
      const w = g.op('Reshape', [columns[e], flat]); // [T]
      const picked = g.op('Reshape', [g.op('NonZero', [g.op('Greater', [w, ctx.scalar(0)])]), flat]); // [n] int64
      const y = expertMlp(g, c, moe, i, e, g.op('Gather', [rows, picked], { axis: 0 }), ctx.branchLinears(), ctx.scalar); // [n, D]
      const weighted = g.op('Mul', [y, g.op('Unsqueeze', [g.op('Gather', [w, picked], { axis: 0 }), g.int64([1])])]);
      return [g.op('ScatterND', [before, g.op('Unsqueeze', [picked, g.int64([1])]), weighted], { reduction: 'add' })];
    });
    return g.op('If', [flags[e]], { then_branch: taken, else_branch: passOn(g, `layer${i}_expert${e}_skipped`, before, ctx.floatType) });
  };
  let sum = zerosLike(g, rows, ctx.floatType); // [T, D]
  const G = expertGroupSize(E, k);
  if (G === 1) {
    for (let e = 0; e < E; e++) sum = expertIf(e, sum);
  } else {
    // Groups of G experts, each behind one If taken when some token chose one of its experts.
    const perExpert = g.op('ReduceMax', [weights, g.int64([0])], { keepdims: 0 }); // [E]
    const groupChosen = g.op('Greater', [g.op('ReduceMax', [g.op('Reshape', [perExpert, g.int64([E / G, G])]), g.int64([1])], { keepdims: 0 }), ctx.scalar(0)]);
    const groupFlags = splitEvenly(g, groupChosen, E / G, 0);
    for (let j = 0; j < E / G; j++) {
      const before = sum;
      const taken = g.subgraph(`layer${i}_experts${j * G}_${(j + 1) * G - 1}`, ctx.floatType, () => {
        let s = before;
        for (let e = j * G; e < (j + 1) * G; e++) s = expertIf(e, s);
        return [s];
      });
      sum = g.op('If', [groupFlags[j]], { then_branch: taken, else_branch: passOn(g, `layer${i}_experts${j * G}_${(j + 1) * G - 1}_skipped`, before, ctx.floatType) });
    }
  }
  return g.op('Reshape', [sum, g.op('Shape', [h])]);
}

/**
 * How many experts share one outer `If` (1: none, each expert's If in the layer's chain). An If
 * costs ONNX Runtime a subgraph run even when not taken (measured on the 1.30 CPU EP, one thread,
 * CPU time per decode step of hidden 256, under a load of 7–9 on 2 cores: 4–10 µs per untaken If;
 * the profiler's own per-node times say 15–25 µs, its overhead included), so with groups of G a
 * decode step evaluates E/G group Ifs plus G per taken group (at most k groups): E/G + G·min(k, E/G)
 * instead of E, least near G = √(E/k). The divisor of E that minimises it, the larger on a tie
 * (measured: 32 experts top 4, 4 layers, median 3.69 → 3.52 ms with G = 2, 3.30 with G = 4;
 * 128 top 4, 2 layers, 4.30 → 2.86 (4), 2.75 (8), 3.02 (16)); 1 where no grouping evaluates fewer than E.
 * So gpt-oss-20b (32 top 4) gets groups of 4, gpt-oss-120b (128 top 4) of 8, Qwen3-30B-A3B (128 top 8) of 4.
 */
export function expertGroupSize(E: number, k: number): number {
  let best = 1;
  let cost = E;
  for (let G = 2; G < E; G++) {
    if (E % G !== 0) continue;
    const c = E / G + G * Math.min(k, E / G);
    if (c < cost || (c === cost && best > 1)) [best, cost] = [G, c];
  }
  return best;
}

/**
 * ONNX Runtime's WebGPU Split binds its input and every output as a storage buffer, 16 at most
 * per shader (Dawn's limit; a 32-way Split fails there and the whole model falls back to the CPU):
 * so at most 15 outputs per Split node.
 */
const MAX_SPLIT_OUTPUTS = 15;

/**
 * `x` cut along `axis` into n pieces of size 1 ([…, 1, …] each, in order): one Split when n ≤
 * MAX_SPLIT_OUTPUTS, else a Split into chunks of at most that many and a Split of each chunk.
 */
function splitEvenly(g: OnnxGraphBuilder, x: string, n: number, axis: number): string[] {
  if (n === 1) return [x];
  if (n <= MAX_SPLIT_OUTPUTS) return g.node('Split', [x], n, { axis, num_outputs: n });
  const sizes: number[] = [];
  for (let left = n; left > 0; left -= MAX_SPLIT_OUTPUTS) sizes.push(Math.min(MAX_SPLIT_OUTPUTS, left));
  const chunks = g.node('Split', [x, g.int64(sizes)], sizes.length, { axis });
  return chunks.flatMap((chunk, j) => splitEvenly(g, chunk, sizes[j], axis));
}

/** An If's untaken branch named `name`: `value` passed on unchanged. */
function passOn(g: OnnxGraphBuilder, name: string, value: string, floatType: number): ReturnType<OnnxGraphBuilder['subgraph']> {
  return g.subgraph(name, floatType, () => [g.op('Identity', [value])]);
}

/**
 * Routing weights w [T, E] from router logits r [T, E] (`MoeOptions.routing`, see the file
 * comment): the k chosen experts' weights scattered into zeros.
 */
function routingWeights(g: OnnxGraphBuilder, r: string, moe: MoeOptions, floatType: number): string {
  const K = g.int64([moe.expertsPerToken]);
  let values: string;
  let indices: string;
  if (moe.routing === 'softmax-topk') {
    [values, indices] = g.node('TopK', [g.op('Softmax', [r], { axis: -1 }), K], 2, { axis: -1, largest: 1, sorted: 1 });
    if (moe.normalizeTopK) values = g.op('Div', [values, g.op('ReduceSum', [values, g.int64([-1])], { keepdims: 1 })]);
  } else {
    [values, indices] = g.node('TopK', [r, K], 2, { axis: -1, largest: 1, sorted: 1 });
    values = g.op('Softmax', [values], { axis: -1 });
  }
  return g.op('ScatterElements', [zerosLike(g, r, floatType), indices, values], { axis: 1 });
}

/**
 * Zeros of `x`'s shape in the graph's float type: a float32 0 expanded to the shape (not
 * ConstantOfShape, which ONNX Runtime 1.30's WebGPU provider has no kernel for).
 */
function zerosLike(g: OnnxGraphBuilder, x: string, floatType: number): string {
  const zeros = g.op('Expand', [g.float32([0]), g.op('Shape', [x])]);
  return floatType === DataType.FLOAT ? zeros : g.op('Cast', [zeros], { to: floatType });
}

/**
 * Expert e of layer i on h [1, T, D]: down(act(gate(h)) ⊙ up(h)) [1, T, D], gate and up stacked
 * where their blocks allow (as a dense MLP's), `act` by `MoeOptions.activation`.
 */
function expertMlp(g: OnnxGraphBuilder, c: ModelConfig, moe: MoeOptions, i: number, e: number, h: string, linears: Linears, scalar: (v: number) => string): string {
  const x = (p: string) => layerWeight(i, `mlp.experts.${e}.${p}`);
  const I = moe.expertIntermediateSize;
  const [gate, up] = linears(h, [[x('gate_proj'), I], [x('up_proj'), I]], c.hiddenSize, moe.expertBias, x('gate_up_proj'));
  const act = expertActivation(g, gate, up, moe, scalar);
  return linears(act, [[x('down_proj'), c.hiddenSize]], I, moe.expertBias, x('down_proj'))[0];
}

/**
 * The expert's gated activation (block-variants.ts `applyGatedActivation`): `silu` is the dense
 * MLP's SwiGLU, silu(gate) ⊙ up; `swiglu-clamped` gpt-oss's clamped SwiGLU with `moe.swiglu`'s
 * α and limit. Throws ModelLoadError for another activation or `swiglu-clamped` without `swiglu`.
 */
function expertActivation(g: OnnxGraphBuilder, gate: string, up: string, moe: MoeOptions, scalar: (v: number) => string): string {
  if (moe.activation === 'silu') return applyGatedActivation(g, gate, up, { kind: 'silu' }, scalar);
  if (moe.activation === 'swiglu-clamped' && moe.swiglu) return applyGatedActivation(g, gate, up, { kind: 'swiglu-clamped', ...moe.swiglu }, scalar);
  throw new ModelLoadError(`expert activation ${JSON.stringify(moe.activation)} (swiglu ${JSON.stringify(moe.swiglu)}) is not supported; supported: silu, swiglu-clamped with { alpha, limit }`);
}
