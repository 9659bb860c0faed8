/**
 * An independent, plain-TypeScript reference forward pass of the decoder-only transformers the
 * engine runs (Llama / Mistral / Qwen2 / Qwen3, llama2.c checkpoints). Tests use it as the oracle
 * for the ONNX graph, so it is deliberately written from the papers and the reference
 * implementations' semantics, not from the graph builder or the engine's RoPE cache: everything
 * (including the RoPE inverse frequencies) is computed here, in float64, by straightforward loops.
 *
 * Sources for each formula:
 * - Token embedding, pre-norm residual blocks, SwiGLU MLP, final norm, classifier: Touvron et al.
 *   2023, "LLaMA"; llama2.c `run.c` `forward()`; Hugging Face transformers `modeling_llama.py`.
 * - Mixture-of-Experts MLP (`config.moe`: Qwen3-MoE, gpt-oss's routing): reference-moe.ts.
 * - RMSNorm: Zhang & Sennrich 2019, "Root Mean Square Layer Normalization":
 *     y = x / sqrt(mean(x²) + eps) · w.
 * - Linear layers: y = W x (+ b), W stored [out, in] row-major (torch.nn.Linear; run.c `matmul`).
 *   Biases on q/k/v (Qwen2, `attention_bias`) and on o (`outputBias`: Llama / Qwen3 with
 *   `attention_bias`, gpt-oss).
 * - Qwen3 q/k norm: RMSNorm over each head's headDim with `q_norm` / `k_norm` weights, applied
 *   before RoPE (transformers `modeling_qwen3.py`, `Qwen3Attention.forward`).
 * - RoPE: Su et al. 2021, "RoFormer", eq. 34: each pair (a, b) of rotated dims at position m is
 *   turned by the angle m·θ_i: (a cos − b sin, a sin + b cos), θ_i = base^(−2i/R).
 *   Pairing: `interleaved` = dims (2i, 2i+1) (llama2.c `run.c`); `half` = dims (i, i + R/2)
 *   (transformers `rotate_half`). Only the first R = rotaryDim dims of a head rotate (partial
 *   rotary, transformers `partial_rotary_factor`); the rest pass through.
 * - RoPE scaling, as transformers `modeling_rope_utils.py` computes it:
 *   - `linear` (`_compute_linear_scaling_rope_parameters`; Chen et al. 2023, "Position
 *     Interpolation"): invFreq_i / factor.
 *   - `llama3` (`_compute_llama3_parameters`): wavelen_i = 2π / invFreq_i;
 *     wavelen > orig/lowFreqFactor → invFreq/factor; wavelen < orig/highFreqFactor → invFreq;
 *     otherwise smooth = (orig/wavelen − low)/(high − low) and
 *     invFreq' = (1 − smooth)·invFreq/factor + smooth·invFreq.
 *   - `yarn` (`_compute_yarn_parameters`; Peng et al. 2023, "YaRN", NTK-by-parts):
 *     corr(n) = R·ln(orig / (n·2π)) / (2·ln base); low = max(floor(corr(betaFast)), 0),
 *     high = min(ceil(corr(betaSlow)), R − 1) (no floor / ceil with `truncate` false, gpt-oss);
 *     if low == high then high += 0.001;
 *     ramp_i = clamp((i − low)/(high − low), 0, 1) for i in [0, R/2); extrapFactor = 1 − ramp;
 *     invFreq' = (invFreq/factor)·(1 − extrapFactor) + invFreq·extrapFactor.
 *     cos and sin are multiplied by attentionFactor, default get_mscale(factor) =
 *     0.1·ln(factor) + 1 (1 when factor ≤ 1) (YaRN eq. 22).
 *   - `dynamic` (`_compute_dynamic_ntk_parameters`; "Dynamically Scaled RoPE", /u/emozilla):
 *     base' = base·((factor·L/orig) − (factor − 1))^(R/(R − 2)). This project's convention:
 *     evaluated once, with L = maxContext; when L ≤ orig the plain base is used.
 *   - `longrope` (`_compute_longrope_parameters`; Ding et al. 2024, "LongRoPE"):
 *     invFreq_i = 1 / (ext_i·base^(2i/R)), ext = longFactor when maxContext exceeds the original
 *     context, else shortFactor (this project's convention, as llama.cpp's by its context size;
 *     transformers switches by the current length); cos and sin times attentionFactor.
 * - Phi-3's fused weights (transformers `modeling_phi3.py`): qkv_proj rows are q, then k, then v;
 *   gate_up_proj rows are gate, then up (`chunk(2, dim=-1)`).
 * - Sliding window (Beltagy et al. 2020, "Longformer"; Jiang et al. 2023, "Mistral 7B"): with a
 *   window W on a layer, the query at position i attends to positions max(0, i − W + 1) … i only
 *   (transformers `sliding_window_overlay`: kv_idx > q_idx − W).
 * - Attention (one head: reference-attention.ts, with gpt-oss's attention sinks):
 *   Vaswani et al. 2017, causal scaled dot-product softmax(q·k / sqrt(headDim)) v;
 *   grouped-query attention (Ainslie et al. 2023, "GQA"): query head h reads kv head
 *   floor(h / (numHeads / numKvHeads)) (transformers `repeat_kv`; run.c `h / kv_mul`).
 * - SwiGLU MLP (Shazeer 2020, "GLU Variants"): down(silu(gate x) ⊙ up x), silu(x) = x·σ(x); or
 *   gpt-oss's clamped SwiGLU (`clampedSwiglu`; reference-activations.ts).
 * - Gemma 2 / 3 (`config.gemma`; Gemma Team 2024, "Gemma 2", §2; transformers
 *   `modeling_gemma2.py` / `modeling_gemma3.py`, read for the semantics):
 *   the embedding times float32(sqrt(hidden)) (`normalizer`); RMSNorm x̂·(1 + w) with the weights
 *   as the checkpoint stores them (`Gemma2RMSNorm`: this reference takes Hugging Face's raw w);
 *   per layer h = x + postAttnNorm(attn(inputNorm(x))), out = h + postFfnNorm(mlp(preFfnNorm(h)));
 *   MLP down(gelu_tanh(gate x) ⊙ up x), gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³)));
 *   scores q·k·attentionScale (query_pre_attn_scalar^-0.5), then c·tanh(s / c) with
 *   c = attentionSoftcap when > 0; logits c·tanh(l / c) with c = finalLogitSoftcap when > 0;
 *   Gemma 3: q/k norms (also 1 + w) and sliding layers rotated with `config.localRope`'s own
 *   frequencies (rope_local_base_freq).
 */
import {
  layerWeight,
  type ModelConfig,
  type ModelWeights,
  type Tensor32,
} from '../../main/engine/model/manifest.ts';

import { gatedReference } from './reference-activations.ts';
import { attendHead } from './reference-attention.ts';
import { referenceInvFreq, referenceRopeAttentionFactor, referenceRopeCosSin, rotateHeadInPlace } from './reference-rope.ts';
import { ReferenceMoe } from './reference-moe.ts';

export { loadLlama2cForReference } from './reference-llama2c.ts';
export { applyRopeReference, referenceInvFreq, referenceRopeAttentionFactor, referenceRopeBase, referenceRopeCosSin, rotateHeadInPlace } from './reference-rope.ts';

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

/** RMSNorm (Zhang & Sennrich 2019) of x[offset .. offset+n) into out[outOffset ..). */
export function rmsNormReference(
  x: ArrayLike<number>,
  weight: ArrayLike<number>,
  eps: number,
  out: Float64Array = new Float64Array(weight.length),
  offset = 0,
  outOffset = 0,
): Float64Array {
  const n = weight.length;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += x[offset + i] * x[offset + i];
  const inv = 1 / Math.sqrt(ss / n + eps);
  for (let i = 0; i < n; i++) out[outOffset + i] = x[offset + i] * inv * weight[i];
  return out;
}

/** y = W x (+ b), W [out, in] row-major. */
function matVec(w: Tensor32, x: Float64Array, bias?: Tensor32): Float64Array {
  const [rows, cols] = w.shape;
  if (x.length !== cols) throw new Error(`matVec: x has ${x.length} entries, weight wants ${cols}`);
  const y = new Float64Array(rows);
  const d = w.data;
  for (let r = 0; r < rows; r++) {
    let acc = 0;
    const base = r * cols;
    for (let c = 0; c < cols; c++) acc += d[base + c] * x[c];
    y[r] = bias ? acc + bias.data[r] : acc;
  }
  return y;
}

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

interface LayerWeights {
  inputNorm: Tensor32;
  q: Tensor32;
  k: Tensor32;
  v: Tensor32;
  o: Tensor32;
  oBias?: Tensor32;
  qBias?: Tensor32;
  kBias?: Tensor32;
  vBias?: Tensor32;
  qNorm?: Tensor32;
  kNorm?: Tensor32;
  /** gpt-oss: one sink logit per query head. */
  sinks?: Tensor32;
  postNorm: Tensor32;
  /** Gemma: the norms before and after the MLP (postNorm is then the one after attention). */
  preFfnNorm?: Tensor32;
  postFfnNorm?: Tensor32;
  gate?: Tensor32;
  up?: Tensor32;
  down?: Tensor32;
  /** A Mixture-of-Experts MLP in place of gate/up/down (`config.moe`; reference-moe.ts). */
  moe?: ReferenceMoe;
}

/**
 * The reference model: float64 throughout, its own KV cache (float64, grown by doubling up to
 * `maxContext`). `forward(tokens)` appends `tokens` after everything already processed and returns
 * the logits [V] of the last of them. A multi-token call runs layer by layer over all new tokens
 * (prefill form); a one-token call is a decode step.
 */
export class ReferenceModel {
  readonly config: ModelConfig;
  readonly maxContext: number;
  readonly invFreq: Float64Array;
  readonly attentionFactor: number;
  /** The sliding layers' inverse frequencies and factor (`config.localRope`), else the global ones. */
  readonly localInvFreq: Float64Array;
  readonly localAttentionFactor: number;
  private readonly embed: Tensor32;
  private readonly lmHead: Tensor32;
  private readonly finalNorm: Tensor32;
  private readonly layers: LayerWeights[];
  private readonly kvDim: number;
  private kCache: Float64Array[];
  private vCache: Float64Array[];
  private capacity = 0;
  private pos = 0;

  constructor(config: ModelConfig, weights: ModelWeights, maxContext: number = config.trainedContext) {
    this.config = config;
    this.maxContext = maxContext;
    const { hiddenSize: D, numHeads, numKvHeads, headDim, vocabSize: V, intermediateSize: H } = config;
    if (numHeads % numKvHeads !== 0) throw new Error(`numHeads ${numHeads} is not a multiple of numKvHeads ${numKvHeads}`);
    if (config.rope.rotaryDim > headDim) throw new Error(`rotaryDim ${config.rope.rotaryDim} > headDim ${headDim}`);
    this.kvDim = numKvHeads * headDim;
    const get = (name: string, shape: number[]): Tensor32 => {
      const t = weights.get(name);
      if (!t) throw new Error(`missing weight ${name}`);
      const want = shape.reduce((a, b) => a * b, 1);
      if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i]) || t.data.length !== want) {
        throw new Error(`weight ${name}: shape [${t.shape}] (${t.data.length} values), expected [${shape}]`);
      }
      return t;
    };
    this.embed = get('model.embed_tokens.weight', [V, D]);
    this.lmHead = config.tiedEmbeddings ? this.embed : get('lm_head.weight', [V, D]);
    this.finalNorm = get('model.norm.weight', [D]);
    const qDim = numHeads * headDim;
    this.layers = [];
    /** Rows [from, from + count) of a [rows, cols] weight, as its own tensor. */
    const rows = (t: Tensor32, from: number, count: number): Tensor32 => {
      const cols = t.shape[1];
      return { shape: [count, cols], data: t.data.subarray(from * cols, (from + count) * cols) };
    };
    for (let l = 0; l < config.numLayers; l++) {
      const get1 = (suffix: string, shape: number[]) => get(layerWeight(l, suffix), shape);
      // Phi-3: qkv_proj (q, k, v rows) and gate_up_proj (gate, up rows) split into the Llama names.
      const split = new Map<string, Tensor32>();
      if (config.fusedProjections) {
        const qkv = get1('self_attn.qkv_proj.weight', [qDim + 2 * this.kvDim, D]);
        const gateUp = get1('mlp.gate_up_proj.weight', [2 * H, D]);
        split.set('self_attn.q_proj.weight', rows(qkv, 0, qDim));
        split.set('self_attn.k_proj.weight', rows(qkv, qDim, this.kvDim));
        split.set('self_attn.v_proj.weight', rows(qkv, qDim + this.kvDim, this.kvDim));
        split.set('mlp.gate_proj.weight', rows(gateUp, 0, H));
        split.set('mlp.up_proj.weight', rows(gateUp, H, H));
      }
      const w = (suffix: string, shape: number[]) => split.get(suffix) ?? get1(suffix, shape);
      this.layers.push({
        inputNorm: w('input_layernorm.weight', [D]),
        q: w('self_attn.q_proj.weight', [qDim, D]),
        k: w('self_attn.k_proj.weight', [this.kvDim, D]),
        v: w('self_attn.v_proj.weight', [this.kvDim, D]),
        o: w('self_attn.o_proj.weight', [D, qDim]),
        oBias: config.outputBias ? w('self_attn.o_proj.bias', [D]) : undefined,
        qBias: config.attentionBias ? w('self_attn.q_proj.bias', [qDim]) : undefined,
        kBias: config.attentionBias ? w('self_attn.k_proj.bias', [this.kvDim]) : undefined,
        vBias: config.attentionBias ? w('self_attn.v_proj.bias', [this.kvDim]) : undefined,
        qNorm: config.qkNorm ? w('self_attn.q_norm.weight', [headDim]) : undefined,
        kNorm: config.qkNorm ? w('self_attn.k_norm.weight', [headDim]) : undefined,
        sinks: config.attentionSinks ? w('self_attn.sinks', [numHeads]) : undefined,
        postNorm: w('post_attention_layernorm.weight', [D]),
        preFfnNorm: config.gemma ? w('pre_feedforward_layernorm.weight', [D]) : undefined,
        postFfnNorm: config.gemma ? w('post_feedforward_layernorm.weight', [D]) : undefined,
        ...(config.moe
          ? { moe: new ReferenceMoe(config, weights, l) }
          : { gate: w('mlp.gate_proj.weight', [H, D]), up: w('mlp.up_proj.weight', [H, D]), down: w('mlp.down_proj.weight', [D, H]) }),
      });
    }
    this.invFreq = referenceInvFreq(config.rope, maxContext);
    this.attentionFactor = referenceRopeAttentionFactor(config.rope);
    const local = config.localRope ?? config.rope;
    this.localInvFreq = referenceInvFreq(local, maxContext);
    this.localAttentionFactor = referenceRopeAttentionFactor(local);
    this.kCache = [];
    this.vCache = [];
    this.reset();
  }

  /** Number of tokens in the KV cache (the position the next token gets). */
  get position(): number {
    return this.pos;
  }

  reset(): void {
    this.pos = 0;
    this.capacity = 0;
    this.kCache = this.layers.map(() => new Float64Array(0));
    this.vCache = this.layers.map(() => new Float64Array(0));
  }

  private ensureCapacity(end: number): void {
    if (end <= this.capacity) return;
    let cap = Math.max(this.capacity, 16);
    while (cap < end) cap *= 2;
    cap = Math.min(cap, this.maxContext);
    for (let l = 0; l < this.layers.length; l++) {
      const k = new Float64Array(cap * this.kvDim);
      k.set(this.kCache[l]);
      this.kCache[l] = k;
      const v = new Float64Array(cap * this.kvDim);
      v.set(this.vCache[l]);
      this.vCache[l] = v;
    }
    this.capacity = cap;
  }

  /**
   * A context shift on the cache, as llama.cpp's (and the engine's) is defined: positions
   * [keep, keep + drop) leave, the rows after them move down by `drop`, and their keys (stored
   * rotated at their old positions) turn by −drop·θ_i (RoPE's rotations compose: R(p − drop) =
   * R(−drop)·R(p)); values move as they are; the next token goes at the new end.
   */
  shift(keep: number, drop: number): void {
    const { numKvHeads, headDim, rope } = this.config;
    const half = rope.rotaryDim / 2;
    // A sliding layer of a model with a local RoPE turns by its own frequencies.
    const turn = (inv: Float64Array) => ({
      cos: Array.from({ length: half }, (_, i) => Math.cos(drop * inv[i])),
      sin: Array.from({ length: half }, (_, i) => -Math.sin(drop * inv[i])),
    });
    const globalTurn = turn(this.invFreq);
    const localTurn = turn(this.localInvFreq);
    for (let l = 0; l < this.layers.length; l++) {
      const { cos, sin } = (this.config.slidingWindow?.[l] ?? 0) > 0 ? localTurn : globalTurn;
      const K = this.kCache[l];
      const Vc = this.vCache[l];
      for (let r = keep + drop; r < this.pos; r++) {
        K.copyWithin((r - drop) * this.kvDim, r * this.kvDim, (r + 1) * this.kvDim);
        Vc.copyWithin((r - drop) * this.kvDim, r * this.kvDim, (r + 1) * this.kvDim);
        for (let h = 0; h < numKvHeads; h++) rotateHeadInPlace(K, (r - drop) * this.kvDim + h * headDim, cos, sin, rope.layout);
      }
    }
    this.pos -= drop;
  }

  /** Logits [V] of the last of `tokens`, processed at positions position … position+T−1. */
  forward(tokens: number[]): Float64Array {
    const T = tokens.length;
    if (T === 0) throw new Error('forward: no tokens');
    const P = this.pos;
    if (P + T > this.maxContext) {
      throw new RangeError(`context overflow: ${P} + ${T} tokens > maxContext ${this.maxContext}`);
    }
    const c = this.config;
    const { hiddenSize: D, numHeads, numKvHeads, headDim, vocabSize: V, rmsNormEps: eps } = c;
    const qDim = numHeads * headDim;
    const kvDim = this.kvDim;
    const group = numHeads / numKvHeads;
    const gemma = c.gemma;
    const scale = gemma ? gemma.attentionScale : 1 / Math.sqrt(headDim);
    const attnCap = gemma?.attentionSoftcap ?? 0;
    const rope = c.rope;
    // Gemma's norms multiply by (1 + w) of the checkpoint's raw weights.
    const norm = (x: ArrayLike<number>, w: Tensor32, out: Float64Array, offset: number, outOffset: number) =>
      gemma ? gemmaRmsNorm(x, w.data, eps, out, offset, outOffset) : rmsNormReference(x, w.data, eps, out, offset, outOffset);
    this.ensureCapacity(P + T);

    // Residual stream h [T, D] (Gemma: times float32(sqrt(D)), transformers' float32 normalizer).
    const embedScale = gemma ? Math.fround(Math.sqrt(D)) : 1;
    const h = new Float64Array(T * D);
    for (let t = 0; t < T; t++) {
      const id = tokens[t];
      if (!Number.isInteger(id) || id < 0 || id >= V) throw new RangeError(`token id ${id} outside [0, ${V})`);
      for (let i = 0; i < D; i++) h[t * D + i] = this.embed.data[id * D + i] * embedScale;
    }

    // cos/sin for each new position (angles in float64), global and (sliding layers) local.
    const table = (invFreq: Float64Array, factor: number) =>
      Array.from({ length: T }, (_, t) => {
        const { cos, sin } = referenceRopeCosSin(rope, P + t, this.maxContext, invFreq);
        const k = factor / this.attentionFactor; // referenceRopeCosSin applied the global factor
        return { cos: cos.map((v) => v * k), sin: sin.map((v) => v * k) };
      });
    const globalRows = table(this.invFreq, this.attentionFactor);
    const localRows = c.localRope ? table(this.localInvFreq, this.localAttentionFactor) : globalRows;

    const xn = new Float64Array(D);
    for (let l = 0; l < this.layers.length; l++) {
      const L = this.layers[l];
      const K = this.kCache[l];
      const Vc = this.vCache[l];
      const window = c.slidingWindow?.[l] ?? 0;
      const rows = window > 0 ? localRows : globalRows;
      // 1) q, k, v of every new token; k, v into the cache.
      const qs: Float64Array[] = [];
      for (let t = 0; t < T; t++) {
        norm(h, L.inputNorm, xn, t * D, 0);
        const q = matVec(L.q, xn, L.qBias);
        const k = matVec(L.k, xn, L.kBias);
        const v = matVec(L.v, xn, L.vBias);
        if (L.qNorm && L.kNorm) {
          for (let hh = 0; hh < numHeads; hh++) norm(q, L.qNorm, q, hh * headDim, hh * headDim);
          for (let hh = 0; hh < numKvHeads; hh++) norm(k, L.kNorm, k, hh * headDim, hh * headDim);
        }
        for (let hh = 0; hh < numHeads; hh++) rotateHeadInPlace(q, hh * headDim, rows[t].cos, rows[t].sin, rope.layout);
        for (let hh = 0; hh < numKvHeads; hh++) rotateHeadInPlace(k, hh * headDim, rows[t].cos, rows[t].sin, rope.layout);
        K.set(k, (P + t) * kvDim);
        Vc.set(v, (P + t) * kvDim);
        qs.push(q);
      }
      // 2) causal attention, o_proj, (Gemma: post-attention norm), residual.
      const attnOut = new Float64Array(T * D);
      for (let t = 0; t < T; t++) {
        const q = qs[t];
        const last = P + t; // attends to positions first … last
        const first = window > 0 ? Math.max(0, last - window + 1) : 0;
        const att = new Float64Array(qDim);
        for (let hh = 0; hh < numHeads; hh++) {
          const head = { q, qOffset: hh * headDim, keys: K, values: Vc, kvDim, kvOffset: Math.floor(hh / group) * headDim, headDim };
          attendHead({ ...head, first, last, scale, softcap: attnCap, sink: L.sinks?.data[hh] }, att, hh * headDim);
        }
        attnOut.set(matVec(L.o, att, L.oBias), t * D);
      }
      for (let t = 0; t < T; t++) {
        if (gemma) norm(attnOut, L.postNorm, attnOut, t * D, t * D);
        for (let i = 0; i < D; i++) h[t * D + i] += attnOut[t * D + i];
      }
      // 3) gated MLP (SwiGLU, or Gemma's GELU-tanh between its two norms), residual.
      for (let t = 0; t < T; t++) {
        norm(h, gemma ? L.preFfnNorm! : L.postNorm, xn, t * D, 0);
        let m: Float64Array;
        if (L.moe) m = L.moe.apply(xn);
        else {
          const g = matVec(L.gate!, xn);
          const u = matVec(L.up!, xn);
          for (let i = 0; i < g.length; i++) g[i] = gatedReference(g[i], u[i], c);
          m = matVec(L.down!, g);
        }
        if (gemma) norm(m, L.postFfnNorm!, m, 0, 0);
        for (let i = 0; i < D; i++) h[t * D + i] += m[i];
      }
    }
    this.pos = P + T;

    // Final norm and classifier for the last token only (Gemma 2: soft-capped).
    const hn = norm(h, this.finalNorm, new Float64Array(D), (T - 1) * D, 0);
    const logits = matVec(this.lmHead, hn);
    const cap = gemma?.finalLogitSoftcap ?? 0;
    if (cap > 0) for (let i = 0; i < logits.length; i++) logits[i] = cap * Math.tanh(logits[i] / cap);
    return logits;
  }
}

/** Gemma's RMSNorm: x / sqrt(mean(x²) + eps) · (1 + w), w as the checkpoint stores it. */
function gemmaRmsNorm(x: ArrayLike<number>, w: ArrayLike<number>, eps: number, out: Float64Array, offset: number, outOffset: number): Float64Array {
  return rmsNormReference(x, Array.from(w, (v) => 1 + v), eps, out, offset, outOffset);
}

/**
 * Logits [V] of the last of `tokens`, run from an empty cache with `maxContext` (default
 * `config.trainedContext`; it also fixes the `dynamic` NTK base).
 */
export function referenceLogits(
  config: ModelConfig,
  weights: ModelWeights,
  tokens: number[],
  maxContext: number = config.trainedContext,
): Float64Array {
  return new ReferenceModel(config, weights, maxContext).forward(tokens);
}
