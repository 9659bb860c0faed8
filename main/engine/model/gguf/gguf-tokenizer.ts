/**
 * A GGUF file's tokenizer (`tokenizer.ggml.*` metadata) → an equivalent Hugging Face
 * `tokenizer.json`, plus its special tokens, `add_bos_token` and chat template.
 *
 * Two models, as llama.cpp's `llama-vocab.cpp` reads them:
 *   - `llama`: SentencePiece-style BPE over scores. Spaces are written "▁", a "▁" is prepended
 *     (`tokenizer.ggml.add_space_prefix`, default true), adjacent pieces are merged best score
 *     first, unknown characters fall back to `<0xNN>` byte pieces. Encoded here as BPE with
 *     merges derived from the scores (`mergesFromScores`, as Hugging Face's converter does).
 *   - `gpt2`: byte-level BPE with `tokenizer.ggml.merges`, after the pre-tokenizer regex named by
 *     `tokenizer.ggml.pre` (the split regexes of llama.cpp's `llm_tokenizer_bpe`).
 * Token types (llama.cpp `llama_token_type`): 1 normal, 2 unknown, 3 control, 4 user-defined,
 * 5 unused, 6 byte. Control and user-defined tokens become added tokens (control = special).
 */
import type { MetadataValue } from '@huggingface/gguf';
import { ModelLoadError } from '../../errors.ts';
import { mergesFromScores } from '../../tokenizer/llama2c-tokenizer.ts';
import type { SpecialTokens } from '../manifest.ts';

const TYPE_NORMAL = 1;
const TYPE_UNKNOWN = 2;
const TYPE_CONTROL = 3;
const TYPE_USER_DEFINED = 4;

/**
 * Pre-tokenizer split regexes by `tokenizer.ggml.pre` name (llama.cpp `llama-vocab.cpp`);
 * null: GPT-2's own regex, applied by the ByteLevel pre-tokenizer itself.
 */
const PRE_TOKENIZERS: Record<string, string | null> = {
  default: null,
  'gpt-2': null,
  gpt2: null,
  'llama-bpe': "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  // o200k (gpt-oss, GPT-4o): the split regex of its tokenizer.json, as llama.cpp's GPT4O pre-type quotes it.
  'gpt-4o': "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/**
 * End-of-turn tokens that files name only by their text, which llama.cpp's vocabulary also ends
 * generation at (llama-vocab.cpp's end-of-generation list): Gemma's `<end_of_turn>`, Phi-3's
 * `<|end|>`, harmony's (gpt-oss) `<|return|>` and `<|call|>`. In a harmony vocabulary (both of
 * the latter present) `<|end|>` only ends a message inside the reply (the analysis channel before
 * the final one), so it is not an end there, as llama.cpp drops it from its list.
 */
const END_OF_TURN_TEXTS = ['<end_of_turn>', '<|end|>', '<|return|>', '<|call|>'];
const HARMONY_ENDS = ['<|return|>', '<|call|>'];

/** `ids` with END_OF_TURN_TEXTS' ids in `texts` added, `<|end|>` taken out of a harmony vocabulary (even as its EOS). */
function withTurnEnds(ids: number[], texts: string[]): number[] {
  const harmony = HARMONY_ENDS.every((t) => texts.includes(t));
  const all = [...ids, ...END_OF_TURN_TEXTS.map((t) => texts.indexOf(t)).filter((i) => i >= 0)];
  return [...new Set(all)].filter((i) => !(harmony && texts[i] === '<|end|>'));
}

/** What import needs from the tokenizer metadata. */
export interface GgufTokenizer {
  tokenizerJson: object;
  tokenizerConfig: Record<string, unknown>;
  specialTokens: SpecialTokens;
  addBos: boolean;
  chatTemplate: string | null;
  vocabSize: number;
}

/**
 * Converts the tokenizer metadata of a GGUF file.
 * @param meta the file's metadata; @param file quoted in errors.
 * @throws ModelLoadError for a missing or unsupported tokenizer model or pre-tokenizer, arrays of
 *   different lengths, or special token ids outside the vocabulary.
 */
export function ggufTokenizer(meta: Record<string, MetadataValue>, file: string): GgufTokenizer {
  const fail = (msg: string): never => {
    throw new ModelLoadError(msg, file);
  };
  const model = meta['tokenizer.ggml.model'];
  const tokens = meta['tokenizer.ggml.tokens'];
  if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== 'string')) fail('GGUF has no tokenizer.ggml.tokens string array');
  const texts = tokens as string[];
  const n = texts.length;
  const types = (meta['tokenizer.ggml.token_type'] as number[] | undefined) ?? new Array<number>(n).fill(TYPE_NORMAL);
  if (types.length !== n) fail(`tokenizer.ggml.token_type has ${types.length} entries, tokens has ${n}`);
  const id = (key: string): number | null => {
    const v = meta[`tokenizer.ggml.${key}`];
    if (v === undefined || v === null) return null;
    const x = Number(v);
    if (x === 0xffffffff || x === -1) return null;
    if (!Number.isInteger(x) || x < 0 || x >= n) fail(`tokenizer.ggml.${key} = ${x} is not a token id (vocabulary of ${n})`);
    return x;
  };

  const added = texts
    .map((content, i) => ({ i, content, type: types[i] }))
    .filter((t) => t.type === TYPE_CONTROL || t.type === TYPE_USER_DEFINED || t.type === TYPE_UNKNOWN)
    .map((t) => ({ id: t.i, content: t.content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: t.type !== TYPE_USER_DEFINED }));

  let tokenizerModel: object;
  let normalizer: object | null = null;
  let preTokenizer: object | null = null;
  let decoder: object;
  const vocab: Record<string, number> = Object.create(null);
  texts.forEach((t, i) => {
    if (!(t in vocab)) vocab[t] = i;
  });
  if (model === 'llama') {
    const scores = (meta['tokenizer.ggml.scores'] as number[] | undefined) ?? fail('GGUF llama tokenizer has no tokenizer.ggml.scores');
    if (scores.length !== n) fail(`tokenizer.ggml.scores has ${scores.length} entries, tokens has ${n}`);
    const unk = id('unknown_token_id');
    const prefix = meta['tokenizer.ggml.add_space_prefix'] !== false;
    normalizer = {
      type: 'Sequence',
      normalizers: [...(prefix ? [{ type: 'Prepend', prepend: '▁' }] : []), { type: 'Replace', pattern: { String: ' ' }, content: '▁' }],
    };
    decoder = {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        ...(prefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
      ],
    };
    tokenizerModel = {
      type: 'BPE', dropout: null, unk_token: unk === null ? null : texts[unk], continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab,
      merges: mergesFromScores(texts, scores, (i) => types[i] === TYPE_NORMAL),
    };
  } else if (model === 'gpt2') {
    const merges = meta['tokenizer.ggml.merges'];
    if (!Array.isArray(merges)) fail('GGUF gpt2 tokenizer has no tokenizer.ggml.merges');
    const pre = String(meta['tokenizer.ggml.pre'] ?? 'default');
    if (!(pre in PRE_TOKENIZERS)) fail(`unsupported tokenizer.ggml.pre ${JSON.stringify(pre)}; supported: ${Object.keys(PRE_TOKENIZERS).join(', ')}`);
    const regex = PRE_TOKENIZERS[pre];
    preTokenizer = regex === null
      ? { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true }
      : {
          type: 'Sequence',
          pretokenizers: [
            { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false },
            { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
          ],
        };
    decoder = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
    tokenizerModel = {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false,
      byte_fallback: false, ignore_merges: pre === 'llama-bpe', vocab, merges: (merges as string[]).map((m) => splitMerge(m, fail)),
    };
  } else {
    return fail(`unsupported tokenizer.ggml.model ${JSON.stringify(model)}; supported: llama (SentencePiece), gpt2 (byte-level BPE)`);
  }

  const bos = id('bos_token_id');
  const eos = withTurnEnds([id('eos_token_id'), id('eot_token_id'), id('eom_token_id')].filter((x): x is number => x !== null), texts);
  const addBosMeta = meta['tokenizer.ggml.add_bos_token'];
  const addBos = typeof addBosMeta === 'boolean' ? addBosMeta : model === 'llama';
  if (addBos && bos === null) fail('tokenizer.ggml.add_bos_token is set but there is no tokenizer.ggml.bos_token_id');
  const chatTemplate = typeof meta['tokenizer.chat_template'] === 'string' ? (meta['tokenizer.chat_template'] as string) : null;
  return {
    tokenizerJson: {
      version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer, pre_tokenizer: preTokenizer,
      post_processor: null, decoder, model: tokenizerModel,
    },
    tokenizerConfig: {
      add_bos_token: addBos,
      ...(bos !== null ? { bos_token: texts[bos] } : {}),
      ...(eos.length ? { eos_token: texts[eos[0]] } : {}),
      ...(chatTemplate !== null ? { chat_template: chatTemplate } : {}),
    },
    specialTokens: { bos, eos },
    addBos,
    chatTemplate,
    vocabSize: n,
  };
}

/** "a b" → ["a", "b"] (byte-level pieces never hold a plain space: it is "Ġ"). */
function splitMerge(m: string, fail: (msg: string) => never): [string, string] {
  const i = m.indexOf(' ');
  if (i <= 0 || i === m.length - 1 || m.indexOf(' ', i + 1) !== -1) fail(`tokenizer.ggml.merges holds a bad merge ${JSON.stringify(m)}`);
  return [m.slice(0, i), m.slice(i + 1)];
}
