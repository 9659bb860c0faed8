/**
 * Tool-call formats beyond Qwen's (main/engine/tokenizer/tool-format.ts, main/serve/tool-formats.ts,
 * main/engine/sampling/tool-constraint.ts), on synthetic bundles: the Qwen3 tokenizer with Llama's
 * and Mistral's markers as special tokens and small templates keeping the official templates' tool
 * sections (test/helpers/tool-templates.ts), on a backend whose logits are scripted
 * (test/helpers/forced-backend.ts). Checked: the format is read from the template text; calls a
 * model writes in each format (one, parallel, after text, Llama's `<|python_tag|>`) come back with
 * ids and their arguments; with `tool_choice` required or named, a backend scripted to write
 * something else still yields a call that validates (ajv), in every format; a call and its result
 * go back through each template (Mistral's ids of 9 characters, whatever the client's ids).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { detectToolFormat, mistralCallId, type ToolFormat } from '../../main/engine/tokenizer/tool-format.ts';
import type { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { UnsupportedSchemaError } from '../../main/engine/errors.ts';
import { advance, initialState } from '../../main/engine/sampling/json-machine.ts';
import { compileSchema } from '../../main/engine/sampling/json-schema.ts';
import { parseToolCalls, toolFields } from '../../main/serve/tool-calls.ts';
import { forcedEngine, qwen3Tokenizer } from '../helpers/forced-backend.ts';
import { markerTokenizer, toolTemplate, type TemplateName } from '../helpers/tool-templates.ts';
import { QWEN3_TOKENIZER_CONFIG } from '../helpers/synthetic-hf.ts';

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const ajv = new Ajv({ strict: false });

const WEATHER = { type: 'object', properties: { city: { enum: ['Oslo', 'Rome'] }, days: { type: 'integer', minimum: -1e15, maximum: 1e15 } }, required: ['city', 'days'], additionalProperties: false };
const TIME = { type: 'object', properties: { zone: { type: 'string', maxLength: 6 } }, required: ['zone'], additionalProperties: false };
const tools = [
  { type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER } },
  { type: 'function' as const, function: { name: 'get', parameters: TIME } },
];
const ask = [{ role: 'user' as const, content: 'Weather in Oslo for 2 days?' }];

const TEMPLATES: [TemplateName, ToolFormat][] = [['llama3.1', 'llama3-json'], ['mistral-v3', 'mistral-v3'], ['mistral-args', 'mistral-args']];

/** Generates with `tokenizer` scripted to write `reply` (special tokens parsed); returns the done event. */
async function generate(tokenizer: TextTokenizer, reply: string, req: Partial<GenerationRequest>): Promise<Extract<GenerationEvent, { type: 'done' }>> {
  const engine = forcedEngine(tokenizer, tokenizer.encode(reply, { addBos: false }));
  let done: GenerationEvent | undefined;
  let streamed = '';
  for await (const ev of engine.generate({ messages: ask, maxTokens: 200, sampler: GREEDY, ...req })) {
    if (ev.type === 'token') streamed += ev.text;
    done = ev;
  }
  assert.ok(done?.type === 'done' && done.reason !== 'error', JSON.stringify(done));
  assert.equal(streamed, done.text, 'the stream is the reply');
  return done;
}

describe('detectToolFormat: from what the template writes for a call', () => {
  it('the four formats, and none for templates without tools', () => {
    const qwen3 = (JSON.parse(readFileSync(QWEN3_TOKENIZER_CONFIG, 'utf8')) as { chat_template: string }).chat_template;
    assert.equal(detectToolFormat(qwen3), 'hermes');
    for (const [name, format] of TEMPLATES) assert.equal(detectToolFormat(toolTemplate(name)), format, name);
    // vLLM's JSON-only copy of Llama 3.1's template has no <|python_tag|>: its ipython turn and "parameters" say it.
    const llamaJsonOnly = toolTemplate('llama3.1').replace(/<\|python_tag\|>/g, '');
    assert.equal(detectToolFormat(llamaJsonOnly), 'llama3-json');
    assert.equal(detectToolFormat('{% for m in messages %}{{ m.content }}{% endfor %}'), null);
    assert.equal(detectToolFormat(null), null);
    assert.equal(detectToolFormat('{{ tools }}{% for m in messages %}{{ m.content }}{% endfor %}'), null, 'tools but no markup of a call');
  });
  it('mistralCallId keeps 9 letters or digits, maps anything else to 9 hex digits the same way each time', () => {
    assert.equal(mistralCallId('abcDEF123'), 'abcDEF123');
    assert.match(mistralCallId('call_0123456789abcdef01234567'), /^[0-9a-f]{9}$/);
    assert.equal(mistralCallId('call_x'), mistralCallId('call_x'));
    assert.notEqual(mistralCallId('call_x'), mistralCallId('call_y'));
  });
});

describe('calls the model writes, read back per format', () => {
  const cases: { name: TemplateName; reply: string; content: string | null; calls: [string, unknown][] }[] = [
    { name: 'llama3.1', reply: '{"name": "get_weather", "parameters": {"city": "Oslo", "days": 2}}', content: null, calls: [['get_weather', { city: 'Oslo', days: 2 }]] },
    { name: 'llama3.1', reply: '<|python_tag|>{"name": "get", "parameters": {"zone": "CET"}}; {"name": "get_weather", "parameters": {"city": "Rome", "days": 1}}', content: null, calls: [['get', { zone: 'CET' }], ['get_weather', { city: 'Rome', days: 1 }]] },
    { name: 'llama3.1', reply: 'It is sunny; {"name": "get"}', content: 'It is sunny; {"name": "get"}', calls: [] },
    { name: 'mistral-v3', reply: '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, {"name": "get", "arguments": {"zone": "UTC"}}]', content: null, calls: [['get_weather', { city: 'Oslo', days: 2 }], ['get', { zone: 'UTC' }]] },
    { name: 'mistral-v3', reply: 'Let me look.[TOOL_CALLS] [{"name": "get", "arguments": {"zone": "UTC"}}]', content: 'Let me look.', calls: [['get', { zone: 'UTC' }]] },
    { name: 'mistral-v3', reply: 'No call here.', content: 'No call here.', calls: [] },
    { name: 'mistral-args', reply: '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "days": 2}[TOOL_CALLS]get[ARGS]{"zone": "UTC"}', content: null, calls: [['get_weather', { city: 'Oslo', days: 2 }], ['get', { zone: 'UTC' }]] },
    { name: 'mistral-args', reply: 'Checking.[TOOL_CALLS]get[CALL_ID]a1b2c3d4e[ARGS]{"zone": "CET"}', content: 'Checking.', calls: [['get', { zone: 'CET' }]] },
    { name: 'mistral-args', reply: '[TOOL_CALLS]rm[ARGS]{"path": "/"}', content: '[TOOL_CALLS]rm[ARGS]{"path": "/"}', calls: [] },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.reply.slice(0, 60)}`, async () => {
      const format = detectToolFormat(toolTemplate(c.name))!;
      const { fields, mode } = toolFields({ tools }, format);
      const done = await generate(markerTokenizer(toolTemplate(c.name)), c.reply, fields);
      assert.equal(done.text, c.reply, 'special tokens keep their text while tools are in play');
      const { content, calls } = parseToolCalls(done.text, mode!);
      assert.equal(content, c.content);
      assert.deepEqual(calls.map((x) => [x.name, JSON.parse(x.arguments)]), c.calls);
      const idShape = format.startsWith('mistral') ? /^[0-9a-f]{9}$/ : /^call_[0-9a-f]{24}$/;
      for (const x of calls) assert.match(x.id, idShape);
    });
  }
  it('without parallel_tool_calls, the first call only', () => {
    const { mode } = toolFields({ tools, parallel_tool_calls: false }, 'mistral-args');
    const { calls } = parseToolCalls('[TOOL_CALLS]get[ARGS]{"zone": "a"}[TOOL_CALLS]get[ARGS]{"zone": "b"}', mode!);
    assert.deepEqual(calls.map((x) => x.arguments), ['{"zone":"a"}']);
  });
});

describe('forced calls: tool_choice required or named, whatever the logits say', () => {
  // The backend is scripted to write prose; the constraint must turn it into a call anyway.
  const prose = 'Sure! I would rather not call anything today.';
  for (const [name, format] of TEMPLATES) {
    for (const choice of ['required', { type: 'function' as const, function: { name: 'get_weather' } }] as const) {
      it(`${name}, ${typeof choice === 'string' ? choice : 'named get_weather'}`, async () => {
        const { fields, mode } = toolFields({ tools, tool_choice: choice }, format);
        const done = await generate(markerTokenizer(toolTemplate(name)), prose, fields);
        assert.equal(done.reason, 'stop', JSON.stringify(done.text));
        const { calls } = parseToolCalls(done.text, mode!);
        assert.equal(calls.length, 1, `one call from ${JSON.stringify(done.text)}`);
        if (typeof choice !== 'string') assert.equal(calls[0].name, 'get_weather');
        const schema = calls[0].name === 'get_weather' ? WEATHER : TIME;
        assert.ok(ajv.validate(schema, JSON.parse(calls[0].arguments)), `${calls[0].arguments}: ${ajv.errorsText()}`);
        // The name before the arguments (propertyOrdering), as templates write calls: a stream opens the call first.
        if (format !== 'mistral-args') assert.match(done.text, /^[\s[{]*"name"/, done.text);
      });
    }
  }
  it('mistral-args: a name that prefixes another (get / get_weather) can be either, and [ARGS] comes only after a whole name', async () => {
    const tk = markerTokenizer(toolTemplate('mistral-args'));
    const { fields, mode } = toolFields({ tools, tool_choice: 'required' }, 'mistral-args');
    // Scripted to write the longer name: the constraint lets it through.
    const done = await generate(tk, 'get_weather[ARGS]{"city": "Rome", "days": 3}', fields);
    assert.equal(done.text, 'get_weather[ARGS]{"city": "Rome", "days": 3}');
    assert.deepEqual(parseToolCalls(done.text, mode!).calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Rome', days: 3 }]]);
  });
  it('the Qwen tokenizer without an [ARGS] token: the separator is spelled out as text', async () => {
    const tk = qwen3Tokenizer(toolTemplate('mistral-args'));
    assert.equal(tk.tokenId('[ARGS]'), undefined);
    const { fields, mode } = toolFields({ tools: [tools[1]], tool_choice: 'required' }, 'mistral-args');
    const done = await generate(tk, prose, fields);
    const { calls } = parseToolCalls(done.text, mode!);
    assert.equal(calls[0]?.name, 'get', done.text);
    assert.ok(ajv.validate(TIME, JSON.parse(calls[0].arguments)));
  });
});

describe('a call and its result back through each template', () => {
  for (const [name] of TEMPLATES) {
    it(name, () => {
      const tk = markerTokenizer(toolTemplate(name));
      const id = 'call_0123456789abcdef01234567';
      const text = tk.renderChat(
        [...ask, { role: 'assistant', content: '', toolCalls: [{ id, name: 'get_weather', arguments: '{"city":"Oslo","days":2}' }] }, { role: 'tool', content: '{"temp": 3}', toolCallId: id }],
        { extra: { tools } },
      );
      // Arguments go in as an object, printed by the template's tojson.
      const call = { 'llama3.1': '{"name": "get_weather", "parameters": {"city": "Oslo", "days": 2}}', 'mistral-v3': `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}, "id": "${mistralCallId(id)}"}]`, 'mistral-args': '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "days": 2}' }[name];
      assert.ok(text.includes(call), text);
      const result = { 'llama3.1': '<|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 3}<|eot_id|>', 'mistral-v3': `[TOOL_RESULTS] {"content": {"temp": 3}, "call_id": "${mistralCallId(id)}"}[/TOOL_RESULTS]`, 'mistral-args': '[TOOL_RESULTS]{"temp": 3}[/TOOL_RESULTS]' }[name];
      assert.ok(text.includes(result), text);
    });
  }
});

describe('propertyOrdering: keys in the listed order (what forced calls use)', () => {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 3 }, arguments: { type: 'object' } }, required: ['name'], additionalProperties: false, propertyOrdering: ['name', 'arguments'] };
  const accepts = (text: string): boolean => {
    let state = initialState(compileSchema(schema));
    for (const b of Buffer.from(text)) if ((state = advance(state, b)).length === 0) return false;
    return true;
  };
  it('the listed order passes, the other order is a dead end at the first key out of order', () => {
    assert.ok(accepts('{"name": "x", "arguments": {}}'));
    assert.ok(accepts('{"name": "x"}'), 'an optional key may be left out');
    assert.ok(!accepts('{"arguments": {}, "name"'), 'arguments before name');
    assert.ok(!accepts('{"arguments"'), 'a required key (name) cannot be skipped');
    const optionalFirst = { ...schema, required: ['arguments'] };
    let state = initialState(compileSchema(optionalFirst));
    for (const b of Buffer.from('{"arguments": {}')) state = advance(state, b);
    assert.ok(state.length > 0 && advance(state, 0x2c).length === 0, 'no key can follow the last one: the comma is refused');
  });
  it('a list that is not exactly the properties, or beside additionalProperties, is refused naming the keyword', () => {
    for (const bad of [{ ...schema, propertyOrdering: ['name'] }, { ...schema, propertyOrdering: ['name', 'other'] }, { ...schema, additionalProperties: true }]) {
      assert.throws(() => compileSchema(bad), (e: unknown) => e instanceof UnsupportedSchemaError && /propertyOrdering/.test(e.message));
    }
  });
});
