/**
 * Import of a llama2.c checkpoint (Karpathy's `run.c` legacy "v0" format) and its
 * `tokenizer.bin` into the canonical `ImportedModel`.
 *
 * Layout (run.c `read_checkpoint` / `memory_map_weights`): a header of 7 int32 LE
 *   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: separate classifier), seq_len
 * then float32 tensors: token_embedding [V, D], rms_att [L, D], wq [L, D, D], wk [L, KV, D],
 * wv [L, KV, D], wo [L, D, D], rms_ffn [L, D], w1 [L, H, D], w2 [L, D, H], w3 [L, H, D],
 * rms_final [D], freq_cis_real [S, hd/2], freq_cis_imag [S, hd/2] (unused: we compute RoPE),
 * and wcls [V, D] when not shared. RoPE is interleaved (adjacent pairs), θ = 10000, whole head.
 */
import { open, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { ModelLoadError } from '../errors.ts';
import { convertLlama2cTokenizer } from '../tokenizer/llama2c-tokenizer.ts';
import { layerWeight, type ImportedModel, type ModelConfig, type ModelWeights } from './manifest.ts';

const HEADER_BYTES = 7 * 4;
/** Refuse headers that describe more than this many float32 parameters (16 GiB) before allocating. */
const MAX_PARAMS = 4 * 1024 ** 3;
/** Largest plausible single dimension / sequence length / vocab in a llama2.c header. */
const MAX_DIM = 1 << 20;

export interface Llama2cHeader {
  dim: number;
  hiddenDim: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  vocabSize: number;
  sharedClassifier: boolean;
  seqLen: number;
}

/**
 * Parses and validates the 28-byte header against the file size.
 * @throws ModelLoadError naming the file and the bad field, or expected vs found byte count.
 */
export function parseLlama2cHeader(header: Uint8Array, fileBytes: number, file: string): Llama2cHeader {
  if (header.byteLength < HEADER_BYTES || fileBytes < HEADER_BYTES) {
    throw new ModelLoadError(`llama2.c checkpoint is ${fileBytes} bytes, shorter than its ${HEADER_BYTES}-byte header`, file);
  }
  const v = new DataView(header.buffer, header.byteOffset, HEADER_BYTES);
  const f = (i: number) => v.getInt32(i * 4, true);
  if (f(0) === 0x616b3432) {
    throw new ModelLoadError('llama2.c checkpoint versions 1+ (export.py --version) are not supported; export with --version 0', file);
  }
  const h: Llama2cHeader = {
    dim: f(0),
    hiddenDim: f(1),
    nLayers: f(2),
    nHeads: f(3),
    nKvHeads: f(4),
    vocabSize: Math.abs(f(5)),
    sharedClassifier: f(5) > 0,
    seqLen: f(6),
  };
  for (const [k, val] of Object.entries(h)) {
    if (typeof val === 'number' && (!(val > 0) || val > MAX_DIM)) {
      throw new ModelLoadError(`llama2.c header field ${k} = ${val} is out of range (1 … ${MAX_DIM})`, file);
    }
  }
  if (h.dim % h.nHeads !== 0) throw new ModelLoadError(`llama2.c header: dim ${h.dim} is not divisible by n_heads ${h.nHeads}`, file);
  if (h.nHeads % h.nKvHeads !== 0) {
    throw new ModelLoadError(`llama2.c header: n_heads ${h.nHeads} is not a multiple of n_kv_heads ${h.nKvHeads}`, file);
  }
  if ((h.dim / h.nHeads) % 2 !== 0) throw new ModelLoadError(`llama2.c header: head size ${h.dim / h.nHeads} is odd`, file);
  const params = expectedParams(h);
  if (params > MAX_PARAMS) throw new ModelLoadError(`llama2.c header describes ${params} parameters, more than the ${MAX_PARAMS} supported`, file);
  const expected = HEADER_BYTES + params * 4;
  if (fileBytes !== expected) {
    throw new ModelLoadError(
      `llama2.c checkpoint size mismatch: header (dim ${h.dim}, ${h.nLayers} layers, vocab ${h.vocabSize}) needs ${expected} bytes, file has ${fileBytes}` +
        (fileBytes < expected ? ' (truncated?)' : ''),
      file,
    );
  }
  return h;
}

function expectedParams(h: Llama2cHeader): number {
  const hd = h.dim / h.nHeads;
  const kv = hd * h.nKvHeads;
  return (
    h.vocabSize * h.dim +
    h.nLayers * (2 * h.dim + h.dim * h.dim * 2 + 2 * kv * h.dim + 3 * h.hiddenDim * h.dim) +
    h.dim +
    h.seqLen * hd + // freq_cis_real + freq_cis_imag: 2 × S × hd/2
    (h.sharedClassifier ? 0 : h.vocabSize * h.dim)
  );
}

/**
 * Imports a llama2.c checkpoint.
 * @param checkpoint path of the `.bin` checkpoint.
 * @param tokenizerPath path of its `tokenizer.bin`; default: `tokenizer.bin` or `tok<V>.bin` beside it.
 * @throws ModelLoadError for a bad checkpoint; TokenizerError for a tokenizer that does not match.
 */
/**
 * Reads and validates a llama2.c checkpoint's header and weights (no tokenizer).
 * @returns the header, the model config, and canonical weights (views into one Float32Array).
 * @throws ModelLoadError for an unreadable, truncated or absurd checkpoint.
 */
export async function readLlama2cCheckpoint(
  checkpoint: string,
): Promise<{ header: Llama2cHeader; config: ModelConfig; weights: ModelWeights }> {
  const size = (await stat(checkpoint).catch(() => null))?.size;
  if (size === undefined) throw new ModelLoadError('cannot read llama2.c checkpoint', checkpoint);
  const fh = await open(checkpoint, 'r');
  let h: Llama2cHeader;
  try {
    const head = new Uint8Array(HEADER_BYTES);
    await fh.read(head, 0, HEADER_BYTES, 0);
    h = parseLlama2cHeader(head, size, checkpoint);
  } finally {
    await fh.close();
  }
  const bytes = await readFile(checkpoint);
  // Copy into an aligned Float32Array (Buffer offsets are not 4-byte aligned in general).
  const all = new Float32Array(bytes.buffer.slice(bytes.byteOffset + HEADER_BYTES, bytes.byteOffset + bytes.byteLength));
  const hd = h.dim / h.nHeads;
  const config: ModelConfig = {
    architecture: 'llama',
    hiddenSize: h.dim,
    intermediateSize: h.hiddenDim,
    numLayers: h.nLayers,
    numHeads: h.nHeads,
    numKvHeads: h.nKvHeads,
    headDim: hd,
    vocabSize: h.vocabSize,
    rmsNormEps: 1e-5,
    tiedEmbeddings: h.sharedClassifier,
    attentionBias: false,
    qkNorm: false,
    rope: { theta: 10000, rotaryDim: hd, layout: 'interleaved' },
    trainedContext: h.seqLen,
  };
  return { header: h, config, weights: llama2cWeights(h, all) };
}

/**
 * Imports a llama2.c checkpoint with its tokenizer.
 * @param checkpoint path of the `.bin` checkpoint.
 * @param tokenizerPath path of its `tokenizer.bin`; default: `tok<V>.bin` or `tokenizer.bin` beside it.
 * @throws ModelLoadError for a bad checkpoint; TokenizerError for a tokenizer that does not match.
 */
export async function importLlama2c(checkpoint: string, tokenizerPath?: string): Promise<ImportedModel> {
  const { header: h, config, weights } = await readLlama2cCheckpoint(checkpoint);
  const tokPath = tokenizerPath ?? (await findTokenizer(checkpoint, h.vocabSize));
  const tok = convertLlama2cTokenizer(new Uint8Array(await readFile(tokPath)), tokPath, h.vocabSize);
  return {
    manifest: {
      format: 'ropewalk-bundle',
      version: 1,
      name: path.basename(checkpoint).replace(/\.bin$/, ''),
      source: { kind: 'llama2c', path: checkpoint, sha256: '' },
      config,
      // run.c ends a story at BOS ("the BOS (=1) token delimits sequences"); TinyStories has
      // no EOS, but </s> (2) ends one too.
      specialTokens: { bos: 1, eos: [1, 2] },
      addBos: true,
      chatTemplate: null,
      dtype: 'float32',
    },
    weights,
    tokenizerJson: tok.tokenizerJson,
    tokenizerConfig: { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', add_bos_token: true, model_max_length: h.seqLen },
  };
}

/**
 * Files that make up a llama2.c model source (checkpoint, then tokenizer), for content hashing.
 * @throws ModelLoadError for a bad header (validated first, so a corrupt file is reported as
 *   such rather than as a missing tokenizer) or when no tokenizer lies beside it.
 */
export async function llama2cSourceFiles(checkpoint: string): Promise<string[]> {
  const size = (await stat(checkpoint).catch(() => null))?.size;
  if (size === undefined) throw new ModelLoadError('cannot read llama2.c checkpoint', checkpoint);
  const fh = await open(checkpoint, 'r');
  try {
    const head = new Uint8Array(HEADER_BYTES);
    await fh.read(head, 0, HEADER_BYTES, 0);
    const h = parseLlama2cHeader(head, size, checkpoint);
    return [checkpoint, await findTokenizer(checkpoint, h.vocabSize)];
  } finally {
    await fh.close();
  }
}

async function findTokenizer(checkpoint: string, vocabSize: number): Promise<string> {
  const dir = path.dirname(checkpoint);
  for (const name of [`tok${vocabSize}.bin`, 'tokenizer.bin']) {
    const p = path.join(dir, name);
    if (await stat(p).then(() => true, () => false)) return p;
  }
  throw new ModelLoadError(`no tokenizer found beside the llama2.c checkpoint (looked for tok${vocabSize}.bin and tokenizer.bin)`, checkpoint);
}

function llama2cWeights(h: Llama2cHeader, all: Float32Array): ModelWeights {
  const D = h.dim;
  const hd = D / h.nHeads;
  const KV = hd * h.nKvHeads;
  const H = h.hiddenDim;
  const L = h.nLayers;
  let off = 0;
  const take = (n: number) => all.subarray(off, (off += n));
  const w: ModelWeights = new Map();
  w.set('model.embed_tokens.weight', { shape: [h.vocabSize, D], data: take(h.vocabSize * D) });
  const perLayer = (suffix: string, shape: number[]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    for (let i = 0; i < L; i++) w.set(layerWeight(i, suffix), { shape, data: take(n) });
  };
  perLayer('input_layernorm.weight', [D]);
  perLayer('self_attn.q_proj.weight', [D, D]);
  perLayer('self_attn.k_proj.weight', [KV, D]);
  perLayer('self_attn.v_proj.weight', [KV, D]);
  perLayer('self_attn.o_proj.weight', [D, D]);
  perLayer('post_attention_layernorm.weight', [D]);
  perLayer('mlp.gate_proj.weight', [H, D]); // w1
  perLayer('mlp.down_proj.weight', [D, H]); // w2
  perLayer('mlp.up_proj.weight', [H, D]); // w3
  w.set('model.norm.weight', { shape: [D], data: take(D) });
  take(h.seqLen * hd); // freq_cis_real + freq_cis_imag
  if (!h.sharedClassifier) w.set('lm_head.weight', { shape: [h.vocabSize, D], data: take(h.vocabSize * D) });
  return w;
}
