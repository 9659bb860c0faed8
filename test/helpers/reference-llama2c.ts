/**
 * The reference forward's llama2.c checkpoint loader (legacy v0 format), independent of the
 * engine's importer (main/engine/model/import-llama2c.ts): reads the file by its documented
 * layout into canonical weights for `ReferenceModel` (reference-forward.ts re-exports it).
 */
import { readFileSync } from 'node:fs';
import { layerWeight, type ModelConfig, type ModelWeights } from '../../main/engine/model/manifest.ts';

/**
 * Reads a llama2.c legacy (v0) checkpoint: 7 int32 (dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size — positive means shared classifier —, seq_len), then float32 tensors:
 * token_embedding [V,D], rms_att [L,D], wq [L,D,D], wk [L,kvDim,D], wv [L,kvDim,D], wo [L,D,D],
 * rms_ffn [L,D], w1 [L,H,D], w2 [L,D,H], w3 [L,H,D], rms_final [D], freq_cis_real and
 * freq_cis_imag [seq_len, headDim/2] (skipped), then wcls [V,D] when not shared.
 * Canonical names: w1 = gate_proj, w3 = up_proj, w2 = down_proj; q/k rows stay interleaved.
 */
export function loadLlama2cForReference(path: string): { config: ModelConfig; weights: ModelWeights } {
  const buf = readFileSync(path);
  const header = new Int32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + 28));
  const [D, H, nLayers, nHeads, nKvHeads, vocabRaw, seqLen] = header;
  const shared = vocabRaw > 0;
  const V = Math.abs(vocabRaw);
  const headDim = D / nHeads;
  const kvDim = nKvHeads * headDim;
  let off = 28;
  const take = (count: number): Float32Array => {
    const end = off + count * 4;
    if (end > buf.length) throw new Error(`llama2.c checkpoint ${path} is truncated`);
    const a = new Float32Array(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + end));
    off = end;
    return a;
  };
  const weights: ModelWeights = new Map();
  const perLayer = (suffix: string, shape: number[]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const all = take(nLayers * n);
    for (let l = 0; l < nLayers; l++) {
      weights.set(layerWeight(l, suffix), { shape, data: all.slice(l * n, (l + 1) * n) });
    }
  };
  weights.set('model.embed_tokens.weight', { shape: [V, D], data: take(V * D) });
  perLayer('input_layernorm.weight', [D]);
  perLayer('self_attn.q_proj.weight', [D, D]);
  perLayer('self_attn.k_proj.weight', [kvDim, D]);
  perLayer('self_attn.v_proj.weight', [kvDim, D]);
  perLayer('self_attn.o_proj.weight', [D, D]);
  perLayer('post_attention_layernorm.weight', [D]);
  perLayer('mlp.gate_proj.weight', [H, D]);
  perLayer('mlp.down_proj.weight', [D, H]);
  perLayer('mlp.up_proj.weight', [H, D]);
  weights.set('model.norm.weight', { shape: [D], data: take(D) });
  take(seqLen * (headDim / 2)); // freq_cis_real
  take(seqLen * (headDim / 2)); // freq_cis_imag
  if (!shared) weights.set('lm_head.weight', { shape: [V, D], data: take(V * D) });
  if (off !== buf.length) throw new Error(`llama2.c checkpoint ${path}: ${buf.length - off} trailing bytes`);
  const config: ModelConfig = {
    architecture: 'llama',
    hiddenSize: D,
    intermediateSize: H,
    numLayers: nLayers,
    numHeads: nHeads,
    numKvHeads: nKvHeads,
    headDim,
    vocabSize: V,
    rmsNormEps: 1e-5,
    tiedEmbeddings: shared,
    attentionBias: false,
    qkNorm: false,
    rope: { theta: 10000, rotaryDim: headDim, layout: 'interleaved' },
    trainedContext: seqLen,
  };
  return { config, weights };
}
