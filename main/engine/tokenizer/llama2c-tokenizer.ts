/**
 * llama2.c `tokenizer.bin` → Hugging Face `tokenizer.json`.
 *
 * Contract: `convertLlama2cTokenizer(bytes, file, expectedVocabSize?)` parses llama2.c's
 * tokenizer format and returns a `tokenizer.json` object that `@huggingface/tokenizers` loads and
 * that encodes and decodes exactly like llama2.c `run.c`:
 *   - encode: a dummy " " is prepended to non-empty text, every codepoint is looked up as a piece
 *     (byte tokens `<0xNN>` for codepoints not in the vocab), then the adjacent pair whose
 *     concatenation has the highest score is merged, repeatedly.
 *   - decode: `<0xNN>` pieces become raw bytes and the leading space of the text is stripped.
 * Any malformed file throws `TokenizerError` naming the file and the byte offset.
 *
 * File format (all little-endian):
 *   int32 max_token_length
 *   then, until EOF, per piece: float32 score, int32 len, `len` bytes of UTF-8 piece text.
 * Layout llama2.c relies on: id 0 `<unk>`, 1 BOS (`\n<s>\n`), 2 EOS (`\n</s>\n`), 3..258 the byte
 * pieces `<0x00>`..`<0xFF>` (run.c's byte fallback is `byte + 3`). llama2.c's exporter replaced
 * SentencePiece's "▁" with a plain " ", so pieces carry literal spaces, and so does the output
 * vocab: the normalizer prepends " " (not "▁") and nothing else rewrites spaces, which keeps text
 * that contains a literal "▁" on byte fallback as run.c does.
 */

import { TokenizerError } from '../errors.ts';

/** Token ids llama2.c hard-codes. */
export const LLAMA2C_UNK = 0;
export const LLAMA2C_BOS = 1;
export const LLAMA2C_EOS = 2;
/** Id of the byte piece `<0x00>`; byte b is id `b + LLAMA2C_BYTE_OFFSET`. */
export const LLAMA2C_BYTE_OFFSET = 3;

/** One piece of a llama2.c tokenizer, in file order (its index is its id). */
export interface Llama2cPiece {
  text: string;
  score: number;
}

/**
 * Parses the raw `tokenizer.bin` bytes into pieces (id = index).
 * Throws `TokenizerError` (naming `file` and the byte offset) when the file is truncated, a
 * length is negative or above max_token_length, or a piece is not valid UTF-8.
 */
export function parseLlama2cTokenizer(
  bytes: Uint8Array,
  file: string,
): { maxTokenLength: number; pieces: Llama2cPiece[] } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  if (bytes.byteLength < 4) {
    throw new TokenizerError(
      `llama2.c tokenizer is truncated at byte offset ${bytes.byteLength}: expected a 4-byte header (${file})`,
    );
  }
  const maxTokenLength = view.getInt32(0, true);
  if (maxTokenLength <= 0) {
    throw new TokenizerError(
      `llama2.c tokenizer has max_token_length ${maxTokenLength} at byte offset 0; expected a positive length (${file})`,
    );
  }
  const pieces: Llama2cPiece[] = [];
  let offset = 4;
  while (offset < bytes.byteLength) {
    const id = pieces.length;
    if (offset + 8 > bytes.byteLength) {
      throw new TokenizerError(
        `llama2.c tokenizer is truncated at byte offset ${offset}: piece ${id} needs an 8-byte score and length but only ${bytes.byteLength - offset} bytes remain (${file})`,
      );
    }
    const score = view.getFloat32(offset, true);
    const len = view.getInt32(offset + 4, true);
    if (len < 0 || len > maxTokenLength) {
      throw new TokenizerError(
        `llama2.c tokenizer piece ${id} at byte offset ${offset + 4} has length ${len}, outside [0, ${maxTokenLength}] (${file})`,
      );
    }
    const start = offset + 8;
    if (start + len > bytes.byteLength) {
      throw new TokenizerError(
        `llama2.c tokenizer is truncated at byte offset ${bytes.byteLength}: piece ${id} at byte offset ${start} needs ${len} bytes but only ${bytes.byteLength - start} remain (${file})`,
      );
    }
    let text: string;
    try {
      text = utf8.decode(bytes.subarray(start, start + len));
    } catch (cause) {
      throw new TokenizerError(
        `llama2.c tokenizer piece ${id} at byte offset ${start} is not valid UTF-8 (${file})`,
        { cause },
      );
    }
    pieces.push({ text, score });
    offset = start + len;
  }
  return { maxTokenLength, pieces };
}

/** `<0xNN>` with upper-case hex, the SentencePiece / Hugging Face byte piece spelling. */
export function bytePiece(byte: number): string {
  return `<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`;
}

/**
 * Converts llama2.c `tokenizer.bin` bytes into a Hugging Face `tokenizer.json` object.
 *
 * `expectedVocabSize` is the vocab size the model checkpoint declares; a different piece count
 * throws `TokenizerError`. Also throws when the file is malformed (see `parseLlama2cTokenizer`),
 * when ids 3..258 are not the byte pieces, or when two pieces have the same text.
 * Returns `{ tokenizerJson, vocabSize }` with `vocabSize` = number of pieces.
 */
export function convertLlama2cTokenizer(
  bytes: Uint8Array,
  file: string,
  expectedVocabSize?: number,
): { tokenizerJson: object; vocabSize: number } {
  const { pieces } = parseLlama2cTokenizer(bytes, file);
  const n = pieces.length;
  if (expectedVocabSize !== undefined && n !== expectedVocabSize) {
    throw new TokenizerError(
      `tokenizer has ${n} tokens but the model has ${expectedVocabSize} (${file})`,
    );
  }
  const firstNormal = LLAMA2C_BYTE_OFFSET + 256;
  if (n < firstNormal) {
    throw new TokenizerError(
      `llama2.c tokenizer has ${n} pieces; expected at least ${firstNormal} (<unk>, <s>, </s> and 256 byte pieces) (${file})`,
    );
  }
  for (let b = 0; b < 256; b++) {
    const got = pieces[b + LLAMA2C_BYTE_OFFSET].text;
    if (got !== bytePiece(b)) {
      throw new TokenizerError(
        `llama2.c tokenizer piece ${b + LLAMA2C_BYTE_OFFSET} is ${JSON.stringify(got)}; expected the byte piece ${bytePiece(b)} (${file})`,
      );
    }
  }

  // The exporter wrote BOS/EOS as "\n<s>\n" / "\n</s>\n" so run.c prints them on their own line;
  // the SentencePiece names are the trimmed text.
  const specialNames = ['<unk>', '<s>', '</s>'];
  const texts = pieces.map((p, id) =>
    id < LLAMA2C_BYTE_OFFSET ? p.text.trim() || specialNames[id] : p.text,
  );
  const vocab: Record<string, number> = Object.create(null);
  for (let id = 0; id < n; id++) {
    const t = texts[id];
    if (t in vocab) {
      throw new TokenizerError(
        `llama2.c tokenizer pieces ${vocab[t]} and ${id} are both ${JSON.stringify(t)}; a piece must be unique (${file})`,
      );
    }
    vocab[t] = id;
  }

  return {
    tokenizerJson: {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: texts.slice(0, LLAMA2C_BYTE_OFFSET).map((content, id) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      // run.c's dummy prefix. Prepend is skipped on empty text, as run.c skips it.
      normalizer: { type: 'Prepend', prepend: ' ' },
      // No pre-tokenizer: run.c merges across the whole text, spaces included.
      pre_tokenizer: null,
      post_processor: null,
      decoder: {
        type: 'Sequence',
        decoders: [
          { type: 'ByteFallback' },
          { type: 'Fuse' },
          { type: 'Strip', content: ' ', start: 1, stop: 0 },
        ],
      },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: texts[LLAMA2C_UNK],
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: true,
        byte_fallback: true,
        ignore_merges: false,
        vocab,
        merges: mergesFromScores(texts, pieces.map((p) => p.score), (id) => id >= firstNormal),
      },
    },
    vocabSize: n,
  };
}

/**
 * BPE merges as Hugging Face's SentencePiece converter derives them: for every mergeable piece p
 * and every split p = a + b (at a codepoint boundary) with a and b both mergeable pieces, a merge
 * [a, b]; merges are ordered by p's score, highest first (stable in piece id order), and the
 * splits of one piece by (id of a, id of b). Pieces are [a, b] pairs, not "a b" strings, because
 * pieces contain spaces. Special and byte pieces must not be mergeable: SentencePiece (and run.c,
 * llama.cpp) never form them by concatenation.
 *
 * One known divergence from run.c: when two different splits of the same piece are mergeable at
 * the same time, run.c merges the leftmost, BPE the lower-ranked split. The results differ only
 * if the first merge enables a pair that scores higher than the piece itself, which a trained
 * vocab essentially never contains.
 * @param texts piece text by id; @param scores piece score by id; @param mergeable which ids take part.
 */
export function mergesFromScores(texts: string[], scores: ArrayLike<number>, mergeable: (id: number) => boolean): [string, string][] {
  const ids = new Map<string, number>();
  texts.forEach((t, id) => {
    if (mergeable(id) && !ids.has(t)) ids.set(t, id);
  });
  const found: { a: string; b: string; ia: number; ib: number; score: number }[] = [];
  for (let id = 0; id < texts.length; id++) {
    if (!mergeable(id)) continue;
    const p = texts[id];
    const local: typeof found = [];
    // Split at codepoint boundaries (a surrogate pair is one codepoint, as in run.c's UTF-8 walk).
    for (let i = 1; i < p.length; i++) {
      const c = p.charCodeAt(i);
      if (c >= 0xdc00 && c <= 0xdfff) continue;
      const a = p.slice(0, i);
      const b = p.slice(i);
      const ia = ids.get(a);
      const ib = ids.get(b);
      if (ia !== undefined && ib !== undefined) local.push({ a, b, ia, ib, score: scores[id] });
    }
    local.sort((x, y) => x.ia - y.ia || x.ib - y.ib);
    found.push(...local);
  }
  // Array.prototype.sort is stable (ES2019), so equal scores keep piece id order.
  found.sort((x, y) => y.score - x.score);
  return found.map((m) => [m.a, m.b]);
}
