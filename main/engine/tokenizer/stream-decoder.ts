/**
 * Incremental, UTF-8-safe detokenization of a generated token stream.
 *
 * Contract: `push(id)` returns only text that is complete and new; `flush()` returns whatever is
 * still held back. For any token sequence, the concatenation of every `push` result and the final
 * `flush()` equals `tokenizer.decode(context ++ ids)` minus `tokenizer.decode(context)` (with no
 * context: `decode(ids)`). For valid UTF-8, no chunk contains U+FFFD: the bytes of a character
 * that byte-fallback or byte-level tokens split (an emoji as four `<0xNN>` tokens) are held until
 * the character is complete.
 *
 * How: the decoder keeps a short window of ids, `[prefix, read)` already emitted and `[read, end)`
 * pending. Each push decodes `ids[prefix..read)` and `ids[prefix..end)` and emits the difference
 * once it does not end with U+FFFD. Decoding the window from the same first token in both keeps
 * per-sequence decoder rules (SentencePiece's "strip the leading space") from eating the space
 * between tokens. The window is the last emitted chunk plus held tokens, so a push costs O(1)
 * tokens of decoding, not O(sequence).
 */

import type { TextTokenizer } from './tokenizer.ts';

/** Held tokens after which text is emitted even if it ends in U+FFFD (invalid UTF-8 from a model). */
const MAX_HELD = 8;
/** Drop ids before the window once this many have piled up. */
const COMPACT_AT = 1024;

/** Incremental detokenizer: `push(id)` returns only complete new UTF-8 text; `flush()` the rest. */
export class StreamDecoder {
  private ids: number[];
  private readonly skipSpecial: boolean;
  /** Window start: first id of the last emitted chunk (or of the context). */
  private prefix = 0;
  /** First id not yet emitted. */
  private read: number;

  /**
   * `context`: ids already in the sequence before the stream (e.g. the prompt's last few tokens)
   * so that the first generated token is decoded as a continuation; a single token is enough.
   * Without it, the stream decodes like `decode(ids)`, leading-space stripping included.
   */
  constructor(
    private readonly tokenizer: TextTokenizer,
    context: readonly number[] = [],
    /** `keepSpecial`: special tokens' text is part of the stream (default: dropped, as `decode`). */
    opts: { keepSpecial?: boolean } = {},
  ) {
    this.skipSpecial = !opts.keepSpecial;
    this.ids = context.slice(-4);
    this.read = this.ids.length;
  }

  /** Appends `tokenId` and returns the text it completes ('' while a character is unfinished). */
  push(tokenId: number): string {
    this.ids.push(tokenId);
    const before = this.decode(this.ids.slice(this.prefix, this.read));
    const after = this.decode(this.ids.slice(this.prefix));
    // Nothing new yet (a skipped special token) or a partial character: hold, unless too long.
    const pending = after.length <= before.length || after.endsWith('\uFFFD');
    if (pending && this.ids.length - this.read < MAX_HELD) return '';
    this.advance();
    return after.slice(before.length);
  }

  /** Returns the held-back text (U+FFFD for bytes that never completed) and resets to empty. */
  flush(): string {
    const before = this.decode(this.ids.slice(this.prefix, this.read));
    const after = this.decode(this.ids.slice(this.prefix));
    this.ids = [];
    this.prefix = this.read = 0;
    return after.slice(before.length);
  }

  private decode(ids: readonly number[]): string {
    return this.tokenizer.decode(ids, { skipSpecial: this.skipSpecial });
  }

  private advance(): void {
    this.prefix = this.read;
    this.read = this.ids.length;
    if (this.prefix >= COMPACT_AT) {
      this.ids = this.ids.slice(this.prefix);
      this.read -= this.prefix;
      this.prefix = 0;
    }
  }
}
