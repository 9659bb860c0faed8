/**
 * Text ⇄ token ids for one model.
 *
 * Contract: `TextTokenizer.fromJson` wraps a Hugging Face `tokenizer.json` (through
 * `@huggingface/tokenizers`) after checking that it matches the model; a bad shape or a vocab
 * that does not fit the model's embedding throws `TokenizerError`. Then:
 *   - `encode(text)` tokenizes text. The library's post-processor never adds tokens: BOS is
 *     added by this class, once, when the model wants it (`addBos`). Special tokens' text (e.g.
 *     `<|im_start|>`) becomes their ids unless `parseSpecial: false`, which keeps it plain text
 *     (what llama2.c `run.c` does with `<s>` in a prompt).
 *   - `encodeChat(messages)` renders the chat template (special tokens parsed) or, for models
 *     without one, encodes `promptFromMessages(messages)` as plain text.
 *   - `decode(ids)` is the inverse, skipping special tokens by default and never applying
 *     transformers' lossy `clean_up_tokenization_spaces`, so decode(encode(s)) == s.
 * For streaming text out of a generation, use `StreamDecoder` (stream-decoder.ts).
 */

import { Tokenizer } from '@huggingface/tokenizers';
import { ContextOverflowError, InvalidOptionError, TokenizerError } from '../errors.ts';
import {
  promptFromMessages,
  renderChatTemplate,
  type ChatMessage,
} from './chat-template.ts';
import { pieceBytes, pieceSpellingOf, type PieceSpelling } from './token-bytes.ts';

export interface TextTokenizerOptions {
  /** BOS id (manifest `specialTokens.bos`), or null when the model has none. */
  bos: number | null;
  /** Ids that end generation (manifest `specialTokens.eos`). */
  eos: number[];
  /** Prepend BOS when encoding a prompt (manifest `addBos`). */
  addBos: boolean;
  /** Rows of the model's embedding (`config.vocabSize`); may exceed the tokenizer's (padding). */
  modelVocabSize: number;
  /** Where the tokenizer came from, for error messages. */
  file: string;
  /** Require tokenizer vocab == model vocab exactly (llama2.c, which never pads). */
  exactVocab?: boolean;
  /** Chat template (manifest `chatTemplate`); absent: tokenizer_config's `chat_template`. */
  chatTemplate?: string | null;
}

export interface EncodeOptions {
  /** Prepend BOS; defaults to the model's `addBos`. Never added twice. */
  addBos?: boolean;
  /**
   * Turn special tokens' text (e.g. `<|im_end|>`, `<s>`) into their ids. Default true, as
   * Hugging Face's `encode` does, so a rendered chat template encodes right; pass false for
   * untrusted or raw text (llama2.c `run.c` never parses `<s>` out of a prompt).
   */
  parseSpecial?: boolean;
  /**
   * Refuse text that needs more than this many tokens without tokenizing all of it: it is counted
   * in pieces first, stopping as soon as the count passes the bound (see `assertWithin`).
   */
  maxTokens?: number;
}

export interface EncodeChatOptions {
  /** Open the assistant's turn at the end; default true. */
  addGenerationPrompt?: boolean;
  /** Extra template variables, e.g. `{ enable_thinking: false }`. */
  extra?: Record<string, unknown>;
  /** `enable_thinking`, passed only to a template that reads it (chat-template.ts). */
  enableThinking?: boolean;
  /** `reasoning_effort`, passed only to a template that reads it (chat-template.ts). */
  reasoningEffort?: string;
  /** Prepend BOS if the rendered prompt does not start with it; defaults to the model's `addBos`. */
  addBos?: boolean;
  /** As `EncodeOptions.maxTokens`. */
  maxTokens?: number;
}

/** Characters per piece when a long text is counted incrementally (cut at whitespace). */
const COUNT_PIECE_CHARS = 4096;
/**
 * Tokens a cut between two pieces may add over tokenizing them together, at most: pieces are cut
 * before whitespace, where pre-tokenizers split anyway; 2 also covers the BOS each piece lacks.
 */
const CUT_SLACK = 2;

type Json = Record<string, unknown>;

/** A Hugging Face tokenizer checked against the model: encode/decode, chat template, BOS/EOS ids. */
export class TextTokenizer {
  /** Tokenizer vocab size: largest token id + 1 (≤ the model's vocab size). */
  readonly vocabSize: number;
  readonly bos: number | null;
  readonly eos: number[];
  readonly addBos: boolean;
  /** The Jinja chat template, or null for a plain-completion model. */
  readonly chatTemplate: string | null;
  /** BOS / first EOS as text, for chat templates' `bos_token` / `eos_token` (null: none). */
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** Rows of the model's embedding (the logits' length). */
  readonly modelVocabSize: number;
  private readonly file: string;
  /** How vocab pieces spell bytes (from tokenizer.json's decoder) and which ids are special added tokens. */
  private readonly pieceSpelling: PieceSpelling;
  private readonly specialIds: ReadonlySet<number>;
  private bytesOfTokens: readonly (Uint8Array | null)[] | null = null;

  private constructor(
    /** Parses special tokens' text; decodes. */
    private readonly full: Tokenizer,
    /** Same model, but special added tokens are plain text (transformers' split_special_tokens). */
    private readonly plain: Tokenizer,
    opts: TextTokenizerOptions,
    vocabSize: number,
    config: Json,
    json: Json,
  ) {
    this.vocabSize = vocabSize;
    this.modelVocabSize = opts.modelVocabSize;
    this.file = opts.file;
    this.bos = opts.bos;
    this.eos = [...opts.eos];
    this.addBos = opts.addBos;
    this.chatTemplate = opts.chatTemplate !== undefined ? opts.chatTemplate : templateOf(config);
    this.bosToken = tokenText(config.bos_token) ?? (opts.bos !== null ? full.id_to_token(opts.bos) ?? null : null);
    this.eosToken = tokenText(config.eos_token) ?? (opts.eos.length ? full.id_to_token(opts.eos[0]) ?? null : null);
    this.pieceSpelling = pieceSpellingOf(json.decoder);
    this.specialIds = new Set((json.added_tokens as Json[]).filter((t) => t.special === true).map((t) => t.id as number));
  }

  /**
   * Builds a tokenizer from `tokenizer.json` content and `tokenizer_config.json` content (or null).
   * Throws `TokenizerError` when the JSON is not a tokenizer, when its largest id does not fit
   * the model (`tokenizer has N tokens but the model has M`), when `exactVocab` is set and
   * the sizes differ, or when a BOS/EOS id is not a token; `InvalidOptionError` for a
   * non-positive `modelVocabSize`.
   */
  static fromJson(
    tokenizerJson: unknown,
    tokenizerConfig: Record<string, unknown> | null | undefined,
    opts: TextTokenizerOptions,
  ): TextTokenizer {
    const { file, modelVocabSize } = opts;
    if (!Number.isInteger(modelVocabSize) || modelVocabSize <= 0) {
      throw new InvalidOptionError('modelVocabSize', `${modelVocabSize} is not a positive integer`);
    }
    const json = checkShape(tokenizerJson, file);
    const config: Json = isObject(tokenizerConfig) ? tokenizerConfig : {};

    const vocabSize = largestId(json, file) + 1;
    if (vocabSize > modelVocabSize || (opts.exactVocab && vocabSize !== modelVocabSize)) {
      throw new TokenizerError(
        `tokenizer has ${vocabSize} tokens but the model has ${modelVocabSize} (${file})`,
      );
    }

    let full: Tokenizer;
    let plain: Tokenizer;
    try {
      full = new Tokenizer(json, config);
      // The library splits every added token out of the text before the model sees it. The
      // plain twin keeps only non-special added tokens (as transformers does with
      // split_special_tokens=True) and shares the full tokenizer's BPE/Unigram model, so it costs
      // no second vocab or merge table: its own model is an empty stub replaced right away.
      const addedTokens = json.added_tokens as Json[];
      plain = new Tokenizer(
        {
          ...json,
          added_tokens: addedTokens.filter((t) => t.special !== true),
          model: { type: 'BPE', vocab: {}, merges: [] },
        },
        config,
      );
      plain.model = full.model;
    } catch (cause) {
      throw new TokenizerError(
        `tokenizer is not a valid Hugging Face tokenizer.json: ${messageOf(cause)} (${file})`,
        { cause },
      );
    }

    for (const [what, id] of [
      ...(opts.bos !== null ? [['BOS', opts.bos] as const] : []),
      ...opts.eos.map((id) => ['EOS', id] as const),
    ]) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize || full.id_to_token(id) === undefined) {
        throw new TokenizerError(`${what} token id ${id} is not a token of the tokenizer (${file})`);
      }
    }
    return new TextTokenizer(full, plain, opts, vocabSize, config, json);
  }

  /**
   * Token ids of `text`. BOS (when `addBos`, default the model's) comes first, exactly once
   * (not again when the text starts with BOS's own text and `parseSpecial` turned it into BOS).
   * Empty text gives `[]` or `[bos]`.
   */
  encode(text: string, opts: EncodeOptions = {}): number[] {
    const tk = (opts.parseSpecial ?? true) ? this.full : this.plain;
    if (opts.maxTokens !== undefined) this.assertWithin(tk, text, opts.maxTokens);
    const ids = this.libEncode(tk, text);
    return this.withBos(ids, opts.addBos ?? this.addBos);
  }

  /**
   * The prompt text for `messages`: the chat template rendered (with the generation prompt by
   * default), or `promptFromMessages(messages)` for a model without a template.
   * Throws `TokenizerError` when the template fails.
   */
  renderChat(messages: ChatMessage[], opts: EncodeChatOptions = {}): string {
    if (this.chatTemplate === null) return promptFromMessages(messages);
    return renderChatTemplate(this.chatTemplate, messages, {
      addGenerationPrompt: opts.addGenerationPrompt ?? true,
      bosToken: this.bosToken ?? undefined,
      eosToken: this.eosToken ?? undefined,
      enableThinking: opts.enableThinking,
      reasoningEffort: opts.reasoningEffort,
      extra: opts.extra,
    });
  }

  /**
   * Token ids of the prompt for `messages` (see `renderChat`). With a template, the special
   * tokens it writes are parsed, and BOS is prepended only if the template did not write it;
   * without one, the text is encoded as plain text (`parseSpecial: false`).
   * Throws `TokenizerError` when the template fails.
   */
  encodeChat(messages: ChatMessage[], opts: EncodeChatOptions = {}): number[] {
    const text = this.renderChat(messages, opts);
    const tk = this.chatTemplate !== null ? this.full : this.plain;
    if (opts.maxTokens !== undefined) this.assertWithin(tk, text, opts.maxTokens);
    const ids = this.libEncode(tk, text);
    return this.withBos(ids, opts.addBos ?? this.addBos);
  }

  /**
   * Text of `ids`. Special tokens are dropped unless `skipSpecial` is false; ids between the
   * tokenizer's and the model's vocab size (embedding padding, no text) are dropped.
   * Throws `TokenizerError` for an id that is not an integer in [0, model vocab size).
   */
  decode(ids: readonly number[], opts: { skipSpecial?: boolean } = {}): string {
    const known: number[] = [];
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.modelVocabSize) {
        throw new TokenizerError(
          `cannot decode token id ${id}: ids run from 0 to ${this.modelVocabSize - 1} (${this.file})`,
        );
      }
      if (id < this.vocabSize && this.full.id_to_token(id) !== undefined) known.push(id);
    }
    if (known.length === 0) return ''; // the library throws on an empty list
    return this.full.decode(known, {
      skip_special_tokens: opts.skipSpecial ?? true,
      clean_up_tokenization_spaces: false,
    });
  }

  /**
   * The vocab piece of `id` as stored (e.g. " Once" for llama2.c, "ĠHello" for byte-level BPE,
   * "<0x0A>" for a byte token). Throws `TokenizerError` when `id` is not a token.
   */
  idToPiece(id: number): string {
    const piece = Number.isInteger(id) && id >= 0 ? this.full.id_to_token(id) : undefined;
    if (piece === undefined) {
      throw new TokenizerError(`token id ${id} is not a token of the tokenizer (${this.file})`);
    }
    return piece;
  }

  /** The id of the token whose vocab piece is exactly `piece` (e.g. "<think>"), or undefined. */
  tokenId(piece: string): number | undefined {
    return this.full.token_to_id(piece) ?? undefined;
  }

  /**
   * The bytes each token id contributes to the text, [vocabSize] (computed once, then shared):
   * byte-level BPE pieces through GPT-2's byte ⇄ character table, SentencePiece pieces with `▁`
   * as a space and `<0xNN>` as the byte; null for special added tokens (BOS, EOS, `<|im_end|>`,
   * which have no text) and ids without a piece. What constrained decoding walks.
   */
  tokenBytes(): readonly (Uint8Array | null)[] {
    if (this.bytesOfTokens) return this.bytesOfTokens;
    const out: (Uint8Array | null)[] = new Array(this.vocabSize).fill(null);
    for (let id = 0; id < this.vocabSize; id++) {
      const piece = this.specialIds.has(id) ? undefined : this.full.id_to_token(id);
      if (piece !== undefined) out[id] = pieceBytes(piece, this.pieceSpelling);
    }
    return (this.bytesOfTokens = out);
  }

  /** True when `id` ends generation. */
  isEos(id: number): boolean {
    return this.eos.includes(id);
  }

  /**
   * Fails fast on text far longer than `maxTokens`: counts it in pieces of about 4K characters
   * (cut before whitespace), and as soon as the count, less CUT_SLACK per cut, passes the bound,
   * throws. A 6 MB prompt is refused after its first pieces instead of being tokenized whole
   * (measured: 56 s for the whole). Text that may fit is left to the exact count.
   * @throws ContextOverflowError(a lower bound of the count, maxTokens, 'the prompt', atLeast).
   */
  private assertWithin(tk: Tokenizer, text: string, maxTokens: number): void {
    if (text.length <= COUNT_PIECE_CHARS) return;
    let counted = 0;
    let cuts = 0;
    for (let start = 0; start < text.length; cuts++) {
      let end = Math.min(text.length, start + COUNT_PIECE_CHARS);
      if (end < text.length) {
        const space = text.lastIndexOf(' ', end);
        if (space > start) end = space;
      }
      counted += tk.encode(text.slice(start, end), { add_special_tokens: false }).ids.length;
      start = end;
      const atLeast = counted - CUT_SLACK * cuts;
      if (atLeast > maxTokens) throw new ContextOverflowError(atLeast, maxTokens, 'the prompt', true);
    }
  }

  private libEncode(tk: Tokenizer, text: string): number[] {
    // add_special_tokens: false — the post-processor (e.g. Llama's TemplateProcessing) must not
    // add BOS/EOS behind our back; BOS is `withBos`'s job.
    const { ids } = tk.encode(text, { add_special_tokens: false });
    for (const id of ids) {
      if (id === undefined) {
        throw new TokenizerError(
          `the tokenizer cannot represent this text: it has no byte fallback and no unknown token (${this.file})`,
        );
      }
    }
    return ids;
  }

  private withBos(ids: number[], addBos: boolean): number[] {
    if (!addBos || this.bos === null || ids[0] === this.bos) return ids;
    return [this.bos, ...ids];
  }
}

function isObject(x: unknown): x is Json {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/**
 * Checks the parts of tokenizer.json this module and the library rely on and returns a shallow
 * copy with the optional sections the library insists on (null) and `added_tokens` ([]) filled in.
 */
function checkShape(x: unknown, file: string): Json {
  const bad = (what: string): never => {
    throw new TokenizerError(`tokenizer is not a valid Hugging Face tokenizer.json: ${what} (${file})`);
  };
  if (!isObject(x)) bad('expected a JSON object');
  const json = x as Json;
  const model = json.model;
  if (!isObject(model)) bad('"model" is missing or not an object');
  const m = model as Json;
  if (!isObject(m.vocab) && !Array.isArray(m.vocab)) bad('"model.vocab" is missing or not an object or array');
  // The library guesses a model from its keys when `type` is unknown; refuse instead.
  if (m.type !== undefined && !['BPE', 'WordPiece', 'Unigram'].includes(m.type as string)) {
    bad(`model type ${JSON.stringify(m.type)} is not supported (BPE, WordPiece, Unigram)`);
  }
  if (m.type === 'BPE' && !Array.isArray(m.merges)) bad('"model.merges" is missing or not an array');
  const added = json.added_tokens ?? [];
  if (!Array.isArray(added)) bad('"added_tokens" is not an array');
  for (const t of added as unknown[]) {
    if (!isObject(t) || !Number.isInteger(t.id) || (t.id as number) < 0 || typeof t.content !== 'string') {
      bad(`"added_tokens" has an entry without an integer id and a string content: ${JSON.stringify(t)}`);
    }
  }
  const out: Json = { ...json, added_tokens: added };
  for (const key of ['normalizer', 'pre_tokenizer', 'post_processor', 'decoder']) out[key] ??= null;
  return out;
}

/** Largest token id in the model vocab and the added tokens (-1 when there are none). */
function largestId(json: Json, file: string): number {
  const vocab = (json.model as Json).vocab;
  let max = -1;
  if (Array.isArray(vocab)) {
    max = vocab.length - 1; // Unigram: [piece, score] pairs, id = index
  } else {
    for (const [piece, id] of Object.entries(vocab as Json)) {
      if (!Number.isInteger(id) || (id as number) < 0) {
        throw new TokenizerError(
          `tokenizer is not a valid Hugging Face tokenizer.json: vocab entry ${JSON.stringify(piece)} has id ${JSON.stringify(id)} (${file})`,
        );
      }
      if ((id as number) > max) max = id as number;
    }
  }
  for (const t of json.added_tokens as Json[]) max = Math.max(max, t.id as number);
  return max;
}

/** tokenizer_config's `chat_template`: a string, or a list of named templates ("default" wins). */
function templateOf(config: Json): string | null {
  const t = config.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t.filter(isObject);
    const pick = named.find((x) => x.name === 'default') ?? named[0];
    return typeof pick?.template === 'string' ? pick.template : null;
  }
  return null;
}

/** A special token as tokenizer_config writes it: a string or `{ content }`. */
function tokenText(x: unknown): string | null {
  if (typeof x === 'string') return x;
  if (isObject(x) && typeof x.content === 'string') return x.content;
  return null;
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
