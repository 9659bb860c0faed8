/**
 * The bytes a vocab piece stands for, per tokenizer family (what constrained decoding walks,
 * TextTokenizer.tokenBytes): GPT-2 byte-level BPE pieces (Qwen, Llama 3, GPT-2; tokenizer.json's
 * decoder is ByteLevel) map each character back to its byte; SentencePiece pieces (llama2.c,
 * Llama 2, Mistral) are UTF-8 text with `▁` for a space and `<0xNN>` byte-fallback tokens.
 */

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** How a tokenizer's vocab pieces spell bytes. */
export type PieceSpelling = 'byte-level' | 'sentencepiece';

/** A decoder of type ByteLevel (alone or in a Sequence) means GPT-2 byte-level pieces. */
export function pieceSpellingOf(decoder: unknown): PieceSpelling {
  const byteLevel = (d: unknown): boolean => isObject(d) && (d.type === 'ByteLevel' || (Array.isArray(d.decoders) && d.decoders.some(byteLevel)));
  return byteLevel(decoder) ? 'byte-level' : 'sentencepiece';
}

/** GPT-2's bytes_to_unicode inverted: the character a byte-level piece uses → the byte + 1, 0 = none (openai/gpt-2 encoder.py). */
const BYTE_OF_CHAR: Uint16Array = (() => {
  const t = new Uint16Array(512);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    t[printable ? b : 256 + extra++] = b + 1;
  }
  return t;
})();

export function pieceBytes(piece: string, spelling: PieceSpelling): Uint8Array {
  if (spelling === 'byte-level') {
    const out = new Uint8Array(piece.length);
    for (let i = 0; i < piece.length; i++) {
      const c = piece.charCodeAt(i);
      const b = c < 512 ? BYTE_OF_CHAR[c] : 0;
      // A character outside the table (an added non-special token's plain text): its own UTF-8.
      if (b === 0) return new Uint8Array(Buffer.from(piece, 'utf8'));
      out[i] = b - 1;
    }
    return out;
  }
  const hex = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
  if (hex) return Uint8Array.of(parseInt(hex[1], 16));
  return new Uint8Array(Buffer.from(piece.replace(/\u2581/g, ' '), 'utf8'));
}
