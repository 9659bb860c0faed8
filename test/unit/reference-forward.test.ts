/**
 * Validates the reference forward pass (`test/helpers/reference-forward.ts`) against things that
 * do not depend on it: the text llama2.c's own `run.c` produced for the real stories260K model,
 * hand-computed small cases, RoPE's relative-position property, and inverse frequencies worked out
 * by hand from the formulas of Hugging Face `modeling_rope_utils.py`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import {
  applyRopeReference,
  loadLlama2cForReference,
  referenceInvFreq,
  referenceLogits,
  referenceRopeAttentionFactor,
  referenceRopeBase,
  referenceRopeCosSin,
  ReferenceModel,
} from '../helpers/reference-forward.ts';
import { layerWeight, type ModelConfig, type ModelWeights, type RopeConfig } from '../../main/engine/model/manifest.ts';
import { mulberry32 } from '../helpers/prng.ts';

const here = dirname(fileURLToPath(import.meta.url));
const MODEL_DIR = join(here, '..', '..', '..', 'shared', 'models', 'stories260K');
const CHECKPOINT = join(MODEL_DIR, 'stories260K.bin');
const TOKENIZER = join(MODEL_DIR, 'tok512.bin');

function close(actual: number, expected: number, tol: number, what = ''): void {
  assert.ok(Math.abs(actual - expected) <= tol, `${what}: ${actual} vs ${expected} (|Δ| = ${Math.abs(actual - expected)} > ${tol})`);
}

function closeArrays(a: ArrayLike<number>, b: ArrayLike<number>, tol: number, what = ''): void {
  assert.equal(a.length, b.length, `${what}: lengths`);
  for (let i = 0; i < a.length; i++) close(a[i], b[i], tol, `${what}[${i}]`);
}

function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

function argmax(x: Float64Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** Uniform in [-1, 1) from mulberry32. */
function rng(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() * 2 - 1;
}

// ---------------------------------------------------------------------------------------------
// llama2.c tokenizer (tok512.bin), as run.c's encode/decode do it
// ---------------------------------------------------------------------------------------------

interface Llama2cTokenizer {
  /** Pieces as byte strings (one char per byte, latin1). */
  pieces: string[];
  scores: Float32Array;
  lookup: Map<string, number>;
}

function loadTokenizer(path: string, vocabSize: number): Llama2cTokenizer {
  const buf = readFileSync(path);
  let off = 4; // int32 max_token_length
  const pieces: string[] = [];
  const scores = new Float32Array(vocabSize);
  const lookup = new Map<string, number>();
  for (let i = 0; i < vocabSize; i++) {
    scores[i] = buf.readFloatLE(off);
    const len = buf.readInt32LE(off + 4);
    off += 8;
    const piece = buf.subarray(off, off + len).toString('latin1');
    off += len;
    pieces.push(piece);
    if (!lookup.has(piece)) lookup.set(piece, i);
  }
  assert.equal(off, buf.length, 'tokenizer file fully read');
  return { pieces, scores, lookup };
}

/** run.c `encode` without BOS/EOS: dummy " " prefix, per-codepoint lookup with byte fallback, merges. */
function encode(tok: Llama2cTokenizer, text: string): number[] {
  const tokens: number[] = [];
  if (text.length > 0) tokens.push(tok.lookup.get(' ')!);
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; ) {
    let j = i + 1;
    while (j < bytes.length && (bytes[j] & 0xc0) === 0x80 && j - i < 4) j++;
    const cp = bytes.subarray(i, j).toString('latin1');
    const id = tok.lookup.get(cp);
    if (id !== undefined) tokens.push(id);
    else for (let b = i; b < j; b++) tokens.push(bytes[b] + 3);
    i = j;
  }
  for (;;) {
    let bestScore = -1e10;
    let bestId = -1;
    let bestIdx = -1;
    for (let i = 0; i + 1 < tokens.length; i++) {
      const id = tok.lookup.get(tok.pieces[tokens[i]] + tok.pieces[tokens[i + 1]]);
      if (id !== undefined && tok.scores[id] > bestScore) {
        bestScore = tok.scores[id];
        bestId = id;
        bestIdx = i;
      }
    }
    if (bestIdx === -1) break;
    tokens.splice(bestIdx, 2, bestId);
  }
  return tokens;
}

/** run.c `decode` over a sequence that starts with BOS (id 1), UTF-8 decoded at the end. */
function decode(tok: Llama2cTokenizer, tokens: number[]): string {
  const bytes: number[] = [];
  for (let i = 1; i < tokens.length; i++) {
    let piece = tok.pieces[tokens[i]];
    if (tokens[i - 1] === 1 && piece.startsWith(' ')) piece = piece.slice(1);
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
    if (m) bytes.push(parseInt(m[1], 16));
    else for (const ch of piece) bytes.push(ch.charCodeAt(0));
  }
  return Buffer.from(bytes).toString('utf8');
}

// ---------------------------------------------------------------------------------------------
// (1) the real pretrained model against llama2.c's own output
// ---------------------------------------------------------------------------------------------

const REFERENCE_TEXT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ' +
  'One day, she saw a big, red ball. She wanted to play with it, but it was too high.';

test('loadLlama2cForReference reads the stories260K header and tensors', () => {
  const { config, weights } = loadLlama2cForReference(CHECKPOINT);
  assert.equal(config.hiddenSize, 64);
  assert.equal(config.intermediateSize, 172);
  assert.equal(config.numLayers, 5);
  assert.equal(config.numHeads, 8);
  assert.equal(config.numKvHeads, 4);
  assert.equal(config.headDim, 8);
  assert.equal(config.vocabSize, 512);
  assert.equal(config.trainedContext, 512);
  assert.equal(config.tiedEmbeddings, true);
  assert.deepEqual(config.rope, { theta: 10000, rotaryDim: 8, layout: 'interleaved' });
  assert.deepEqual(weights.get(layerWeight(4, 'self_attn.k_proj.weight'))!.shape, [32, 64]);
  assert.deepEqual(weights.get(layerWeight(0, 'mlp.down_proj.weight'))!.shape, [64, 172]);
  assert.equal(weights.has('lm_head.weight'), false);
});

test('greedy decoding of stories260K reproduces llama2.c run.c', () => {
  const { config, weights } = loadLlama2cForReference(CHECKPOINT);
  const tok = loadTokenizer(TOKENIZER, config.vocabSize);
  const prompt = [1, ...encode(tok, 'Once upon a time')];
  const model = new ReferenceModel(config, weights);
  const seq = [...prompt];
  let logits = model.forward(prompt);
  for (let step = 0; step < 120; step++) {
    const next = argmax(logits);
    if (next === 1) break; // run.c: BOS delimits sequences
    seq.push(next);
    logits = model.forward([next]);
  }
  const text = decode(tok, seq);
  console.log(`# stories260K greedy (${seq.length - prompt.length} tokens): ${JSON.stringify(text)}`);
  assert.ok(seq.length - prompt.length >= 100, 'generated at least 100 tokens');
  assert.equal(text.slice(0, REFERENCE_TEXT.length), REFERENCE_TEXT);
});

// ---------------------------------------------------------------------------------------------
// (2) incremental consistency
// ---------------------------------------------------------------------------------------------

test('stories260K: all-at-once, one-at-a-time and chunked forwards agree', () => {
  const { config, weights } = loadLlama2cForReference(CHECKPOINT);
  const r = rng(7);
  const tokens = [1, ...Array.from({ length: 47 }, () => 3 + Math.floor(((r() + 1) / 2) * 509))];
  const whole = referenceLogits(config, weights, tokens);

  const stepwise = new ReferenceModel(config, weights);
  let last: Float64Array = new Float64Array(0);
  for (const t of tokens) last = stepwise.forward([t]);
  assert.equal(stepwise.position, tokens.length);
  closeArrays(last, whole, 1e-9, 'one at a time');

  const chunked = new ReferenceModel(config, weights);
  let i = 0;
  for (const size of [5, 1, 17, 2, 9, 14]) {
    last = chunked.forward(tokens.slice(i, i + size));
    i += size;
  }
  assert.equal(i, tokens.length);
  closeArrays(last, whole, 1e-9, 'chunked');

  chunked.reset();
  assert.equal(chunked.position, 0);
  closeArrays(chunked.forward(tokens), whole, 0, 'after reset');
});

test('context overflow is a RangeError and leaves the cache unchanged', () => {
  const { config, weights } = loadLlama2cForReference(CHECKPOINT);
  const m = new ReferenceModel(config, weights, 8);
  m.forward([1, 2, 3, 4, 5, 6]);
  assert.throws(() => m.forward([7, 8, 9]), RangeError);
  assert.equal(m.position, 6);
  m.forward([7, 8]);
  assert.equal(m.position, 8);
});

/** A random model of the given config (all weights uniform in [-scale, scale)). */
function randomWeights(config: ModelConfig, seed: number, scale = 0.3): ModelWeights {
  const r = rng(seed);
  const w: ModelWeights = new Map();
  const add = (name: string, shape: number[], around = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    w.set(name, { shape, data: Float32Array.from({ length: n }, () => around + r() * scale) });
  };
  const { hiddenSize: D, numHeads, numKvHeads, headDim, intermediateSize: H, vocabSize: V } = config;
  add('model.embed_tokens.weight', [V, D], 0);
  if (!config.tiedEmbeddings) add('lm_head.weight', [V, D]);
  add('model.norm.weight', [D], 1);
  for (let l = 0; l < config.numLayers; l++) {
    add(layerWeight(l, 'input_layernorm.weight'), [D], 1);
    add(layerWeight(l, 'self_attn.q_proj.weight'), [numHeads * headDim, D]);
    add(layerWeight(l, 'self_attn.k_proj.weight'), [numKvHeads * headDim, D]);
    add(layerWeight(l, 'self_attn.v_proj.weight'), [numKvHeads * headDim, D]);
    add(layerWeight(l, 'self_attn.o_proj.weight'), [D, numHeads * headDim]);
    if (config.attentionBias) {
      add(layerWeight(l, 'self_attn.q_proj.bias'), [numHeads * headDim]);
      add(layerWeight(l, 'self_attn.k_proj.bias'), [numKvHeads * headDim]);
      add(layerWeight(l, 'self_attn.v_proj.bias'), [numKvHeads * headDim]);
    }
    if (config.qkNorm) {
      add(layerWeight(l, 'self_attn.q_norm.weight'), [headDim], 1);
      add(layerWeight(l, 'self_attn.k_norm.weight'), [headDim], 1);
    }
    add(layerWeight(l, 'post_attention_layernorm.weight'), [D], 1);
    add(layerWeight(l, 'mlp.gate_proj.weight'), [H, D]);
    add(layerWeight(l, 'mlp.up_proj.weight'), [H, D]);
    add(layerWeight(l, 'mlp.down_proj.weight'), [D, H]);
  }
  return w;
}

const QWENISH: ModelConfig = {
  architecture: 'qwen3',
  hiddenSize: 24,
  intermediateSize: 40,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 10,
  vocabSize: 50,
  rmsNormEps: 1e-6,
  tiedEmbeddings: false,
  attentionBias: true,
  qkNorm: true,
  rope: {
    theta: 1e6,
    rotaryDim: 8,
    layout: 'half',
    scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 16, betaFast: 32, betaSlow: 1 },
  },
  trainedContext: 64,
};

test('random GQA + bias + qkNorm + yarn + partial rotary model: incremental == all at once', () => {
  const weights = randomWeights(QWENISH, 11);
  const r = rng(3);
  const tokens = Array.from({ length: 40 }, () => Math.floor(((r() + 1) / 2) * QWENISH.vocabSize));
  const whole = referenceLogits(QWENISH, weights, tokens);
  const m = new ReferenceModel(QWENISH, weights);
  let last: Float64Array = new Float64Array(0);
  for (let i = 0; i < tokens.length; i += 3) last = m.forward(tokens.slice(i, i + 3));
  closeArrays(last, whole, 1e-9, 'chunks of 3');
});

test('GQA: a kv head shared by 2 query heads == MHA with that kv head duplicated', () => {
  const gqa: ModelConfig = { ...QWENISH, qkNorm: false, attentionBias: false, numHeads: 4, numKvHeads: 2 };
  const mha: ModelConfig = { ...gqa, numKvHeads: 4 };
  const wg = randomWeights(gqa, 5);
  const wm: ModelWeights = new Map(wg);
  const hd = gqa.headDim;
  for (let l = 0; l < gqa.numLayers; l++) {
    for (const p of ['k_proj', 'v_proj']) {
      const src = wg.get(layerWeight(l, `self_attn.${p}.weight`))!;
      const D = src.shape[1];
      const data = new Float32Array(4 * hd * D);
      // MHA kv head j copies GQA kv head floor(j / 2): query head h then reads the same numbers.
      for (let j = 0; j < 4; j++) data.set(src.data.subarray(Math.floor(j / 2) * hd * D, (Math.floor(j / 2) + 1) * hd * D), j * hd * D);
      wm.set(layerWeight(l, `self_attn.${p}.weight`), { shape: [4 * hd, D], data });
    }
  }
  const tokens = [3, 14, 15, 9, 26, 5, 35, 8, 9, 7];
  closeArrays(referenceLogits(gqa, wg, tokens), referenceLogits(mha, wm, tokens), 1e-12, 'gqa vs mha');
});

// ---------------------------------------------------------------------------------------------
// (3) hand-checkable case and RoPE properties
// ---------------------------------------------------------------------------------------------

const I4 = (s = 1) => ({ shape: [4, 4], data: Float32Array.from([s, 0, 0, 0, 0, s, 0, 0, 0, 0, s, 0, 0, 0, 0, s]) });
const ONES4 = () => ({ shape: [4], data: Float32Array.from([1, 1, 1, 1]) });
const A = [1, 1, 1, 1];
const B = [1, -1, 1, -1];

/**
 * 1 layer, hidden 4, 1 head, headDim 4 = rotaryDim 4, θ = 10000, ε = 0, all projections identity
 * (q scaled by qScale, k by kScale), norms 1, lm_head identity; tokens 0 = A, 1 = B.
 * invFreq = [10000^0, 10000^(-2/4)] = [1, 0.01].
 */
function handModel(layout: RopeConfig['layout'], opts: { qkNorm?: number[]; vBias?: number[]; qScale?: number; kScale?: number } = {}) {
  const config: ModelConfig = {
    architecture: 'llama',
    hiddenSize: 4,
    intermediateSize: 4,
    numLayers: 1,
    numHeads: 1,
    numKvHeads: 1,
    headDim: 4,
    vocabSize: 4,
    rmsNormEps: 0,
    tiedEmbeddings: false,
    attentionBias: opts.vBias !== undefined,
    qkNorm: opts.qkNorm !== undefined,
    rope: { theta: 10000, rotaryDim: 4, layout },
    trainedContext: 16,
  };
  const w: ModelWeights = new Map();
  w.set('model.embed_tokens.weight', { shape: [4, 4], data: Float32Array.from([...A, ...B, 2, 0, 0, 0, 0, 2, 0, 0]) });
  w.set('lm_head.weight', I4());
  w.set('model.norm.weight', ONES4());
  w.set(layerWeight(0, 'input_layernorm.weight'), ONES4());
  w.set(layerWeight(0, 'post_attention_layernorm.weight'), ONES4());
  w.set(layerWeight(0, 'self_attn.q_proj.weight'), I4(opts.qScale ?? 1));
  w.set(layerWeight(0, 'self_attn.k_proj.weight'), I4(opts.kScale ?? 1));
  w.set(layerWeight(0, 'self_attn.v_proj.weight'), I4());
  w.set(layerWeight(0, 'self_attn.o_proj.weight'), I4());
  for (const p of ['gate', 'up', 'down']) w.set(layerWeight(0, `mlp.${p}_proj.weight`), I4());
  if (opts.vBias) {
    w.set(layerWeight(0, 'self_attn.q_proj.bias'), { shape: [4], data: new Float32Array(4) });
    w.set(layerWeight(0, 'self_attn.k_proj.bias'), { shape: [4], data: new Float32Array(4) });
    w.set(layerWeight(0, 'self_attn.v_proj.bias'), { shape: [4], data: Float32Array.from(opts.vBias) });
  }
  if (opts.qkNorm) {
    w.set(layerWeight(0, 'self_attn.q_norm.weight'), { shape: [4], data: Float32Array.from(opts.qkNorm) });
    w.set(layerWeight(0, 'self_attn.k_norm.weight'), ONES4());
  }
  return { config, weights: w };
}

/**
 * The rest of the hand model once the attention probability p0 of position 0 (token A) seen from
 * position 1 (token B) is known: attn = p0·A + (1−p0)·B (+ v bias), h = B + attn,
 * n = h / rms(h), h2 = h + silu(n)·n, logits = h2 / rms(h2).
 */
function handTail(p0: number, vBias = [0, 0, 0, 0]): number[] {
  const rms = (x: number[]) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length);
  const silu = (x: number) => x / (1 + Math.exp(-x));
  const h = B.map((b, i) => b + p0 * A[i] + (1 - p0) * B[i] + vBias[i]);
  const n = h.map((v) => v / rms(h));
  const h2 = h.map((v, i) => v + silu(n[i]) * n[i]);
  return h2.map((v) => v / rms(h2));
}

test('hand case, position 0: one token attends to itself', () => {
  // q = k = v = A, softmax over one position = 1, attn = A, h = 2A = [2,2,2,2], n = [1,1,1,1],
  // h2 = 2 + silu(1) everywhere, logits = h2 / rms(h2) = [1,1,1,1].
  const { config, weights } = handModel('interleaved');
  closeArrays(referenceLogits(config, weights, [0]), [1, 1, 1, 1], 1e-12, 'logits');
});

test('hand case, 2 positions, interleaved layout', () => {
  // Position 1, token B = [1,-1,1,-1]; interleaved pairs (x0,x1) at angle 1·1, (x2,x3) at 1·0.01.
  // A pair (1,-1) turned by φ: (cos φ + sin φ, sin φ − cos φ).
  // q1 = k1 = [c1+s1, s1−c1, c2+s2, s2−c2]  (c1 = cos 1, s1 = sin 1, c2 = cos 0.01, s2 = sin 0.01)
  // k0 = A (position 0 is not rotated).
  // score0 = q1·A / sqrt(4) = (2 s1 + 2 s2) / 2 = s1 + s2;  score1 = |B|² / 2 = 2.
  const { config, weights } = handModel('interleaved');
  const m = new ReferenceModel(config, weights);
  const score0 = Math.sin(1) + Math.sin(0.01);
  const p0 = Math.exp(score0) / (Math.exp(score0) + Math.exp(2));
  m.forward([0]);
  closeArrays(m.forward([1]), handTail(p0), 1e-12, 'logits');
});

test('hand case, 2 positions, half layout', () => {
  // Half layout pairs (x0,x2) at angle 1 and (x1,x3) at 0.01. B: (x0,x2) = (1,1) → (c1−s1, s1+c1);
  // (x1,x3) = (−1,−1) → (−c2+s2, −s2−c2). q1 = [c1−s1, s2−c2, s1+c1, −s2−c2].
  // score0 = q1·A / 2 = (2 c1 − 2 c2) / 2 = c1 − c2;  score1 = 2.
  const { config, weights } = handModel('half');
  const score0 = Math.cos(1) - Math.cos(0.01);
  const p0 = Math.exp(score0) / (Math.exp(score0) + Math.exp(2));
  closeArrays(referenceLogits(config, weights, [0, 1]), handTail(p0), 1e-12, 'logits');
});

test('hand case, identical tokens: attention over equal values returns that value', () => {
  // Tokens A, A: whatever the scores (c1 + c2 and 2), v0 = v1 = A, so attn = A and the logits are
  // those of position 0 alone: [1,1,1,1].
  const { config, weights } = handModel('interleaved');
  closeArrays(referenceLogits(config, weights, [0, 0]), [1, 1, 1, 1], 1e-12, 'logits');
});

test('hand case with qkNorm (before RoPE) and a v bias', () => {
  // q_proj = 3·I and k_proj = 2·I: per-head RMSNorm (ε = 0) removes both scales. q_norm weight
  // w = [2,1,1,1] applies before RoPE: q1 = rot(B ⊙ w, 1) = rot([2,−1,1,−1], 1), k0 = A, k1 = rot(B, 1).
  // Interleaved: pair (2,−1) at angle 1 → (2c1 + s1, 2s1 − c1), summing to c1 + 3 s1; pair (1,−1)
  // at 0.01 sums to 2 s2. score0 = (c1 + 3 s1 + 2 s2) / 2.
  // score1 = rot(Bw)·rot(B) / 2 = (Bw)·B / 2 = (2+1+1+1)/2 = 2.5 (a rotation keeps dot products).
  // v bias [0.5, 0, 0, 0] adds to every v, so (probabilities summing to 1) to attn.
  const vBias = [0.5, 0, 0, 0];
  const { config, weights } = handModel('interleaved', { qkNorm: [2, 1, 1, 1], vBias, qScale: 3, kScale: 2 });
  const score0 = (Math.cos(1) + 3 * Math.sin(1) + 2 * Math.sin(0.01)) / 2;
  const p0 = Math.exp(score0) / (Math.exp(score0) + Math.exp(2.5));
  closeArrays(referenceLogits(config, weights, [0, 1]), handTail(p0, vBias), 1e-12, 'logits');
});

const VARIANTS: Array<{ name: string; rope: RopeConfig; maxContext: number }> = [];
for (const layout of ['interleaved', 'half'] as const) {
  for (const [rotaryDim, headDim] of [
    [16, 16],
    [8, 12],
  ]) {
    const base = { theta: 10000, rotaryDim, layout };
    const add = (name: string, rope: RopeConfig, maxContext = 4096) =>
      VARIANTS.push({ name: `${name}/${layout}/R${rotaryDim}/hd${headDim}`, rope, maxContext });
    add('plain', base);
    add('linear', { ...base, scaling: { type: 'linear', factor: 4 } });
    add('llama3', {
      ...base,
      theta: 500000,
      scaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 1024 },
    });
    add('yarn', { ...base, scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 1024, betaFast: 32, betaSlow: 1 } });
    add('dynamic', { ...base, scaling: { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 1024 } }, 8192);
  }
}
const headDimOf = (name: string) => Number(/hd(\d+)$/.exec(name)![1]);

test('RoPE relative-position property: rope(q,m)·rope(k,n) depends only on m − n', () => {
  const r = rng(42);
  for (const { name, rope, maxContext } of VARIANTS) {
    const hd = headDimOf(name);
    for (let trial = 0; trial < 5; trial++) {
      const q = Array.from({ length: hd }, r);
      const k = Array.from({ length: hd }, r);
      const m = Math.floor(((r() + 1) / 2) * 3000);
      const n = Math.floor(((r() + 1) / 2) * 3000);
      const ref = dot(applyRopeReference(q, m, rope, maxContext), applyRopeReference(k, n, rope, maxContext));
      for (const shift of [5, 1, 977]) {
        const shifted = dot(
          applyRopeReference(q, m + shift, rope, maxContext),
          applyRopeReference(k, n + shift, rope, maxContext),
        );
        close(shifted, ref, 1e-9, `${name} m=${m} n=${n} shift=${shift}`);
      }
      // Same position: q·k (pass-through dims plain, rotated dims times attentionFactor²).
      const R = rope.rotaryDim;
      const f = referenceRopeAttentionFactor(rope);
      const expected = f * f * dot(q.slice(0, R), k.slice(0, R)) + dot(q.slice(R), k.slice(R));
      close(dot(applyRopeReference(q, m, rope, maxContext), applyRopeReference(k, m, rope, maxContext)), expected, 1e-9, `${name} same position`);
    }
  }
});

test('RoPE passes dims ≥ rotaryDim through and keeps norms (scaled by the YaRN factor)', () => {
  const r = rng(9);
  for (const { name, rope, maxContext } of VARIANTS) {
    const hd = headDimOf(name);
    const R = rope.rotaryDim;
    const v = Array.from({ length: hd }, r);
    const out = applyRopeReference(v, 1234, rope, maxContext);
    for (let i = R; i < hd; i++) assert.equal(out[i], v[i], `${name}: dim ${i} passes through`);
    const f = referenceRopeAttentionFactor(rope);
    close(Math.hypot(...out.slice(0, R)), f * Math.hypot(...v.slice(0, R)), 1e-12, `${name} norm`);
    const { cos, sin } = referenceRopeCosSin(rope, 0, maxContext);
    closeArrays(cos, new Array(R / 2).fill(f), 0, `${name} cos(0)`);
    closeArrays(sin, new Array(R / 2).fill(0), 0, `${name} sin(0)`);
  }
});

test('interleaved and half layouts relate by the pair permutation (2i,2i+1) → (i, i+R/2)', () => {
  const r = rng(17);
  for (const { name, rope, maxContext } of VARIANTS.filter((x) => x.rope.layout === 'interleaved')) {
    const hd = headDimOf(name);
    const R = rope.rotaryDim;
    const perm = (x: ArrayLike<number>) => {
      const y = Array.from(x);
      for (let i = 0; i < R / 2; i++) {
        y[i] = x[2 * i];
        y[i + R / 2] = x[2 * i + 1];
      }
      return y;
    };
    const half: RopeConfig = { ...rope, layout: 'half' };
    for (const pos of [0, 1, 7, 300, 4000]) {
      const v = Array.from({ length: hd }, r);
      closeArrays(
        applyRopeReference(perm(v), pos, half, maxContext),
        perm(applyRopeReference(v, pos, rope, maxContext)),
        1e-15,
        `${name} pos ${pos}`,
      );
    }
  }
});

test('RoPE by hand: interleaved rotation of [1,0,0,1] at position 2', () => {
  // R = 4, θ = 100: invFreq = [100^0, 100^(-2/4)] = [1, 0.1]; angles at position 2: [2, 0.2].
  // Pair (1,0) at 2 → (cos 2, sin 2); pair (0,1) at 0.2 → (−sin 0.2, cos 0.2).
  const rope: RopeConfig = { theta: 100, rotaryDim: 4, layout: 'interleaved' };
  closeArrays(applyRopeReference([1, 0, 0, 1], 2, rope), [Math.cos(2), Math.sin(2), -Math.sin(0.2), Math.cos(0.2)], 1e-15, 'rot');
  // Half layout: pairs (x0,x2) = (1,0) at 2, (x1,x3) = (0,1) at 0.2 → [cos 2, −sin 0.2, sin 2, cos 0.2].
  closeArrays(
    applyRopeReference([1, 0, 0, 1], 2, { ...rope, layout: 'half' }),
    [Math.cos(2), -Math.sin(0.2), Math.sin(2), Math.cos(0.2)],
    1e-15,
    'rot half',
  );
});

// ---------------------------------------------------------------------------------------------
// (4) inverse frequencies by hand
// ---------------------------------------------------------------------------------------------

test('plain and linear inverse frequencies', () => {
  // θ = 10000, R = 8: invFreq_i = 10000^(−2i/8) = 10^(−i) → [1, 0.1, 0.01, 0.001].
  const plain: RopeConfig = { theta: 10000, rotaryDim: 8, layout: 'half' };
  closeArrays(referenceInvFreq(plain, 2048), [1, 0.1, 0.01, 0.001], 1e-15, 'plain');
  // linear, factor 4: each / 4 → [0.25, 0.025, 0.0025, 0.00025].
  closeArrays(
    referenceInvFreq({ ...plain, scaling: { type: 'linear', factor: 4 } }, 2048),
    [0.25, 0.025, 0.0025, 0.00025],
    1e-15,
    'linear',
  );
});

test('llama3 inverse frequencies (Llama 3.1 parameters)', () => {
  // θ = 500000, R = 128, factor 8, low 1, high 4, orig 8192.
  // low_freq_wavelen = 8192/1 = 8192, high_freq_wavelen = 8192/4 = 2048.
  // invFreq_i = 500000^(−2i/128) = 500000^(−i/64), wavelen_i = 2π / invFreq_i.
  const rope: RopeConfig = {
    theta: 500000,
    rotaryDim: 128,
    layout: 'half',
    scaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
  };
  const f = referenceInvFreq(rope, 131072);
  // i = 0: invFreq 1, wavelen 2π ≈ 6.28 < 2048 → unchanged: 1.
  close(f[0], 1, 1e-15, 'i=0');
  // i = 28: 500000^(−0.4375) ≈ 0.0032114460, wavelen ≈ 1956.5 < 2048 → unchanged.
  close(f[28], 0.003211445994752591, 1e-15, 'i=28');
  // i = 32: 500000^(−0.5) = 1/707.10678 ≈ 0.0014142136, wavelen = 2π·707.10678 ≈ 4442.883 (medium).
  //   smooth = (8192/4442.883 − 1)/(4 − 1) = (1.843848 − 1)/3 ≈ 0.2812826
  //   invFreq' = (1 − 0.2812826)·0.0014142136/8 + 0.2812826·0.0014142136
  //            = 0.7187174·0.00017677670 + 0.00039779503 ≈ 0.00012705113 + 0.00039779503 ≈ 0.00052484616
  close(f[32], 0.00052484616, 1e-11, 'i=32');
  // i = 34: 500000^(−34/64) ≈ 0.00093847387, wavelen ≈ 6695.11 (medium),
  //   smooth = (8192/6695.11 − 1)/3 = (1.2235797 − 1)/3 ≈ 0.0745266
  //   invFreq' = 0.9254734·(0.00093847387/8) + 0.0745266·0.00093847387
  //            = 0.9254734·0.00011730923 + 0.00006994123 ≈ 0.00010856658 + 0.00006994123 ≈ 0.00017850781
  close(f[34], 0.00017850781, 1e-11, 'i=34');
  // i = 35: 500000^(−35/64) ≈ 0.00076449699, wavelen ≈ 8218.7 > 8192 → /8 ≈ 0.000095562124.
  close(f[35], 0.0007644969883171747 / 8, 1e-15, 'i=35');
  // i = 40: 500000^(−0.625) ≈ 0.00027424818, wavelen ≈ 22910.6 > 8192 → /8 ≈ 0.000034281022.
  close(f[40], 0.0002742481756762073 / 8, 1e-15, 'i=40');
});

test('yarn inverse frequencies and attention factor', () => {
  // θ = 10000, R = 64, factor 4, orig 4096, β_fast 32, β_slow 1.
  // corr(n) = 64·ln(4096/(n·2π)) / (2·ln 10000), 2·ln 10000 ≈ 18.420681.
  //   corr(32) = 64·ln(20.371833)/18.420681 = 64·3.0141532/18.420681 ≈ 10.4722 → low = floor = 10
  //   corr(1)  = 64·ln(651.89865)/18.420681 = 64·6.4798891/18.420681 ≈ 22.5134 → high = ceil = 23
  // ramp_i = clamp((i − 10)/13, 0, 1); extrapFactor = 1 − ramp;
  // invFreq' = (base_i/4)·ramp + base_i·(1 − ramp), base_i = 10000^(−2i/64).
  const rope: RopeConfig = {
    theta: 10000,
    rotaryDim: 64,
    layout: 'half',
    scaling: { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 4096, betaFast: 32, betaSlow: 1 },
  };
  const f = referenceInvFreq(rope, 16384);
  // i ≤ 10: ramp 0 → pure extrapolation: i = 0 → 1; i = 10 → 10000^(−20/64) = 10^(−1.25) ≈ 0.056234133.
  close(f[0], 1, 1e-15, 'i=0');
  close(f[10], 10 ** -1.25, 1e-15, 'i=10');
  // i = 15: ramp 5/13 → invFreq' = base·(5/13)/4 + base·(8/13) = base·(5/52 + 32/52) = base·37/52;
  //   base = 10000^(−30/64) = 10^(−1.875) ≈ 0.013335214 → ≈ 0.0094885179.
  close(f[15], (10 ** -1.875 * 37) / 52, 1e-15, 'i=15');
  close(f[15], 0.0094885179, 1e-10, 'i=15 (number)');
  // i ≥ 23: ramp 1 → pure interpolation: i = 24 → 10000^(−48/64)/4 = 10^(−3)/4 = 0.00025.
  close(f[24], 0.00025, 1e-15, 'i=24');
  // attentionFactor = 0.1·ln 4 + 1 = 0.1·1.3862944 + 1 ≈ 1.1386294; an explicit one wins.
  close(referenceRopeAttentionFactor(rope), 1.1386294361, 1e-10, 'mscale');
  assert.equal(referenceRopeAttentionFactor({ ...rope, scaling: { ...rope.scaling!, attentionFactor: 0.7 } as RopeConfig['scaling'] }), 0.7);
  // cos/sin carry it: cos(0) = 1.1386294.
  close(referenceRopeCosSin(rope, 0, 16384).cos[5], 1.1386294361, 1e-10, 'cos scaled');
});

test('dynamic NTK base', () => {
  // θ = 10000, R = 64, factor 2, orig 2048.
  // L = 4096 > 2048: base' = 10000·(2·4096/2048 − (2 − 1))^(64/62) = 10000·3^(1.0322581)
  //   = 10000·3·3^(0.0322581) = 30000·e^(0.0322581·1.0986123) = 30000·e^(0.0354391) ≈ 31082.237
  const rope: RopeConfig = {
    theta: 10000,
    rotaryDim: 64,
    layout: 'half',
    scaling: { type: 'dynamic', factor: 2, originalMaxPositionEmbeddings: 2048 },
  };
  close(referenceRopeBase(rope, 4096), 31082.237, 1e-3, 'base at 4096');
  // invFreq_1 = base'^(−2/64)
  close(referenceInvFreq(rope, 4096)[1], 31082.236667168814 ** (-1 / 32), 1e-15, 'invFreq_1');
  // L ≤ orig: plain θ.
  assert.equal(referenceRopeBase(rope, 2048), 10000);
  assert.equal(referenceRopeBase(rope, 1000), 10000);
  closeArrays(referenceInvFreq(rope, 2048), referenceInvFreq({ ...rope, scaling: undefined }, 2048), 0, 'plain below orig');
});
