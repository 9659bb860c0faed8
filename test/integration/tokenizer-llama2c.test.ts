/**
 * llama2.c tokenizer.bin → tokenizer.json: the converted tokenizer, loaded by
 * `@huggingface/tokenizers`, must give the ids llama2.c `run.c` gives for the real tok512.bin.
 * The oracle below is run.c's `encode` written here from its algorithm, working on the pieces
 * and scores read straight from the file (not from the converter); then decode(encode(s)) == s,
 * and malformed files fail with `TokenizerError` naming the byte offset.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Tokenizer } from '@huggingface/tokenizers';
import { TokenizerError } from '../../main/engine/errors.ts';
import { convertLlama2cTokenizer } from '../../main/engine/tokenizer/llama2c-tokenizer.ts';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { STORIES_TOKENIZER } from '../helpers/paths.ts';
import { mulberry32 } from '../helpers/prng.ts';

const BIN = readFileSync(STORIES_TOKENIZER);

// ---------------------------------------------------------------------------------------------
// Oracle: llama2.c run.c, from its algorithm.

/** Pieces and scores in file order: int32 max_len, then (float32 score, int32 len, bytes)*. */
function readBin(buf: Buffer): { pieces: string[]; scores: number[] } {
  const pieces: string[] = [];
  const scores: number[] = [];
  let at = 4;
  while (at < buf.length) {
    scores.push(buf.readFloatLE(at));
    const len = buf.readInt32LE(at + 4);
    pieces.push(buf.toString('utf8', at + 8, at + 8 + len));
    at += 8 + len;
  }
  return { pieces, scores };
}

const { pieces, scores } = readBin(BIN);
const pieceId = new Map<string, number>();
pieces.forEach((p, i) => pieceId.set(p, i));

/** run.c `encode(text, bos, eos=0)`. */
function runcEncode(text: string, bos: boolean): number[] {
  const tokens: number[] = [];
  if (bos) tokens.push(1);
  if (text.length > 0) tokens.push(pieceId.get(' ')!); // the dummy prefix
  for (const ch of text) {
    const id = pieceId.get(ch);
    if (id !== undefined) tokens.push(id);
    else for (const b of Buffer.from(ch, 'utf8')) tokens.push(b + 3);
  }
  for (;;) {
    let best = -1e10;
    let bestId = -1;
    let bestIdx = -1;
    for (let i = 0; i + 1 < tokens.length; i++) {
      const id = pieceId.get(pieces[tokens[i]] + pieces[tokens[i + 1]]);
      if (id !== undefined && scores[id] > best) {
        best = scores[id];
        bestId = id;
        bestIdx = i;
      }
    }
    if (bestIdx === -1) break;
    tokens.splice(bestIdx, 2, bestId);
  }
  return tokens;
}

/**
 * What run.c prints for a sequence that starts with BOS: `decode(prev, token)` for every token
 * after the first, stripping the space after BOS and turning `<0xNN>` into the raw byte.
 */
function runcDecode(ids: number[]): string {
  const bytes: number[] = [];
  for (let i = 1; i < ids.length; i++) {
    let piece = pieces[ids[i]];
    if (ids[i - 1] === 1 && piece.startsWith(' ')) piece = piece.slice(1);
    const m = /^<0x([0-9A-F]{2})>$/.exec(piece);
    if (m) bytes.push(parseInt(m[1], 16));
    else bytes.push(...Buffer.from(piece, 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

// ---------------------------------------------------------------------------------------------
// Test strings.


const FIXED = [
  'Once upon a time, there was a little girl named Lily.',
  'Once upon a time',
  'Lily and Tim were very happy. They played with the big red ball!',
  '',
  ' ',
  '  ',
  'a',
  ' hello',
  'hello ',
  '  hello  world  ',
  'two  spaces   three',
  'line one\nline two\n\nline four\n',
  '\n',
  '\tTabs\tand\r\nCRLF',
  'Digits 0123456789 and 3.14159, 42!',
  'Punctuation: ;:!?.,()[]{}<>"\'`~@#$%^&*-_=+|\\/',
  'Emoji 🙂 smile',
  '🙂',
  '🙂🙂🙂',
  '你好世界',
  'Hello 你好世界!',
  'Accents: café, naïve, résumé, jalapeño, Ærø, ñ',
  'é',
  'â€™ mojibake',
  'Curly “quotes” and ‘single’ and – dashes — and … ellipsis',
  'non\u00a0breaking and hair\u200aspace',
  'a▁b ▁ leading ▁▁',
  '<s> not special </s> <unk>',
  'the the the the',
  ' the then there these',
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.',
];

function randomStrings(): string[] {
  const rand = mulberry32(0x5eed);
  const out: string[] = [];
  // Printable ASCII, where most merges happen.
  for (let i = 0; i < 200; i++) {
    const len = Math.floor(rand() * 40);
    let s = '';
    for (let j = 0; j < len; j++) s += String.fromCharCode(0x20 + Math.floor(rand() * 95));
    out.push(s);
  }
  // Words and spaces from the stories, to exercise long merges and space runs.
  const words = ['Once', 'upon', 'a', 'time', 'there', 'was', 'little', 'girl', 'named', 'Lily', 'Tim',
    'Timmy', 'happy', 'friend', 'the', 'The', 'play', 'said', ',', '.', '"', '!', ' ', '\n'];
  for (let i = 0; i < 80; i++) {
    const n = 1 + Math.floor(rand() * 12);
    let s = '';
    for (let j = 0; j < n; j++) s += (rand() < 0.8 ? ' ' : '') + words[Math.floor(rand() * words.length)];
    out.push(rand() < 0.5 ? s.trimStart() : s);
  }
  // Mixed scripts: byte fallback next to merged pieces.
  const alphabet = [...'abcdeflnorstTLy .,!?\n0123456789éñ“”—…🙂😀你好世界ß▁\u00a0'];
  for (let i = 0; i < 80; i++) {
    const len = Math.floor(rand() * 24);
    let s = '';
    for (let j = 0; j < len; j++) s += alphabet[Math.floor(rand() * alphabet.length)];
    out.push(s);
  }
  return out;
}

const STRINGS = [...FIXED, ...randomStrings()];
/** The library splits added tokens' text out of any input; run.c does not (see TextTokenizer). */
const hasSpecialText = (s: string): boolean => /<unk>|<\/?s>/.test(s);

// ---------------------------------------------------------------------------------------------

describe('convertLlama2cTokenizer on tok512.bin', () => {
  const { tokenizerJson, vocabSize } = convertLlama2cTokenizer(new Uint8Array(BIN), STORIES_TOKENIZER, 512);
  const tk = new Tokenizer(tokenizerJson, {});
  const hfEncode = (s: string): number[] => tk.encode(s, { add_special_tokens: false }).ids;
  const hfDecode = (ids: number[]): string =>
    ids.length === 0 ? '' : tk.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });

  it('reads 512 pieces with the layout run.c relies on', () => {
    assert.equal(vocabSize, 512);
    assert.equal(pieces.length, 512);
    assert.deepEqual(pieces.slice(0, 4), ['<unk>', '\n<s>\n', '\n</s>\n', '<0x00>']);
    assert.equal(pieces[258], '<0xFF>');
    // The file spells SentencePiece's "▁" as a plain space.
    assert.equal(pieces[259], ' t');
    assert.ok(!pieces.some((p) => p.includes('\u2581')));
    assert.equal(tk.token_to_id(' t'), 259);
    assert.equal(tk.token_to_id('<s>'), 1);
    assert.equal(tk.token_to_id('</s>'), 2);
  });

  it('encodes the stories sentence as run.c does', () => {
    const s = 'Once upon a time, there was a little girl named Lily.';
    const expected = runcEncode(s, false);
    assert.deepEqual(hfEncode(s), expected);
    assert.deepEqual(
      expected.map((id) => pieces[id]),
      [' Once', ' upon', ' a', ' time', ',', ' there', ' was', ' a', ' little', ' g', 'ir', 'l', ' named', ' Lily', '.'],
    );
  });

  it(`gives run.c's ids for ${STRINGS.length} strings`, () => {
    let bytesSeen = 0;
    for (const s of STRINGS.filter((x) => !hasSpecialText(x))) {
      const expected = runcEncode(s, false);
      assert.deepEqual(hfEncode(s), expected, `encode(${JSON.stringify(s)})`);
      // With BOS in the token list during merging, as run.c has it.
      assert.deepEqual([1, ...hfEncode(s)], runcEncode(s, true), `encode(${JSON.stringify(s)}, bos)`);
      bytesSeen += expected.filter((id) => id >= 3 && id <= 258).length;
    }
    assert.ok(bytesSeen > 100, 'the strings exercise byte fallback');
  });

  it(`gives run.c's ids through TextTokenizer (BOS added once, <s> is text) for ${STRINGS.length} strings`, () => {
    const text = TextTokenizer.fromJson(tokenizerJson, {}, {
      bos: 1, eos: [2], addBos: true, modelVocabSize: 512, file: 'tok512.bin', exactVocab: true,
    });
    assert.equal(text.vocabSize, 512);
    for (const s of STRINGS) {
      const ids = text.encode(s, { parseSpecial: false });
      assert.deepEqual(ids, runcEncode(s, true), `encode(${JSON.stringify(s)})`);
      assert.equal(text.decode(ids), s);
    }
    assert.deepEqual(text.encode('<s>', { parseSpecial: false }), [1, 410, 504, 419, 505]);
  });

  it('decodes back to the text, as run.c does', () => {
    for (const s of STRINGS.filter((x) => !hasSpecialText(x))) {
      const ids = hfEncode(s);
      assert.equal(hfDecode(ids), s, `decode(encode(${JSON.stringify(s)}))`);
      assert.equal(runcDecode([1, ...ids]), s, `run.c decode(encode(${JSON.stringify(s)}))`);
      // With BOS: the decoder drops it and strips the space after it.
      assert.equal(hfDecode([1, ...ids]), s);
    }
  });

  it('spells emoji and CJK as byte tokens', () => {
    assert.deepEqual(hfEncode('🙂'), [410, 0xf0 + 3, 0x9f + 3, 0x99 + 3, 0x82 + 3]);
    assert.deepEqual(hfEncode('你'), [410, 0xe4 + 3, 0xbd + 3, 0xa0 + 3]);
  });
});

describe('convertLlama2cTokenizer errors', () => {
  const convert = (bytes: Uint8Array, expected?: number) => () =>
    convertLlama2cTokenizer(bytes, 'tok.bin', expected);

  it('names the byte offset where a piece is cut off', () => {
    // Header (4) + <unk>'s score and length (8) + 3 of its 5 bytes.
    assert.throws(convert(new Uint8Array(BIN.subarray(0, 15))), (e: unknown) => {
      assert.ok(e instanceof TokenizerError);
      assert.match(e.message, /truncated at byte offset 15/);
      assert.match(e.message, /piece 0 at byte offset 12 needs 5 bytes/);
      assert.match(e.message, /tok\.bin/);
      return true;
    });
  });

  it('names the byte offset where a score/length is cut off', () => {
    const cut = BIN.length - 3;
    assert.throws(convert(new Uint8Array(BIN.subarray(0, cut))), (e: unknown) => {
      assert.ok(e instanceof TokenizerError);
      assert.match(e.message, /truncated at byte offset \d+/);
      return true;
    });
    assert.throws(convert(new Uint8Array(BIN.subarray(0, 10))), /truncated at byte offset 4: piece 0 needs an 8-byte score/);
    assert.throws(convert(new Uint8Array(BIN.subarray(0, 2))), /truncated at byte offset 2/);
  });

  it('rejects a piece count the model does not expect', () => {
    assert.throws(convert(new Uint8Array(BIN), 513), (e: unknown) => {
      assert.ok(e instanceof TokenizerError);
      assert.match(e.message, /tokenizer has 512 tokens but the model has 513/);
      return true;
    });
  });

  it('rejects a length above max_token_length and a missing byte piece', () => {
    const bad = new Uint8Array(BIN);
    new DataView(bad.buffer).setInt32(4 + 4, 99, true); // <unk>'s length
    assert.throws(convert(bad), /piece 0 at byte offset 8 has length 99, outside \[0, 7\]/);
    const noBytes = new Uint8Array(BIN);
    // Piece 3 starts after <unk> (8+5), "\n<s>\n" (8+5), "\n</s>\n" (8+6); its text at +8.
    noBytes[4 + 13 + 13 + 14 + 8 + 4] = 'X'.charCodeAt(0);
    assert.throws(convert(noBytes), /piece 3 is "<0x0X>"; expected the byte piece <0x00>/);
  });
});
