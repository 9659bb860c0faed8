/**
 * Tool calls' pure parts: reading `<tool_call>` blocks out of a reply (declared names only,
 * arguments an object, the first only without parallel_tool_calls, the rest as content), a
 * forced reply read as the call's JSON, and the request fields per tool_choice — the forced
 * schema checked by compiling and validating with ajv — with the refusals naming their field; tool
 * history refused with 400 and `param` where no template could render it (an answer to no call,
 * arguments that are not a JSON object).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { ApiError, parseChatRequest } from '../../main/serve/openai-request.ts';
import { DEFAULT_SETTINGS } from '../../main/services/settings.ts';
import { parseToolCalls, TOOL_CALL_OPEN, toolFields } from '../../main/serve/tool-calls.ts';

const weather = { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } } };
const time = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };

describe('parseToolCalls', () => {
  const mode = { format: 'hermes' as const, names: ['get_weather', 'get_time'], forced: false, parallel: true };
  it('reads every declared call, keeps the other text as content', () => {
    const text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>';
    const { content, calls } = parseToolCalls(text, mode);
    assert.equal(content, 'Let me check.');
    assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Oslo' }], ['get_time', {}]]);
    assert.ok(calls.every((c) => /^call_[0-9a-f]{24}$/.test(c.id)) && calls[0].id !== calls[1].id);
  });
  it('an undeclared name, bad JSON or non-object arguments stay content; no parallel: the first call only', () => {
    for (const bad of ['<tool_call>{"name": "rm", "arguments": {}}</tool_call>', '<tool_call>{"name": "get_time"</tool_call>', '<tool_call>{"name": "get_time", "arguments": [1]}</tool_call>']) {
      assert.deepEqual(parseToolCalls(bad, mode), { content: bad, calls: [] });
    }
    const two = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call><tool_call>{"name": "get_time", "arguments": {"x": 1}}</tool_call>';
    const { calls, content } = parseToolCalls(two, { ...mode, parallel: false });
    assert.equal(calls.length, 1);
    assert.equal(content, null);
  });
  it('a forced reply is the call JSON itself', () => {
    const { calls, content } = parseToolCalls('{"name": "get_weather", "arguments": {"city": "Rome"}}', { ...mode, forced: true });
    assert.equal(content, null);
    assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Rome' });
  });
});

describe('toolFields', () => {
  it('auto: tools to the template, nothing forced; none: no tools at all', () => {
    assert.deepEqual(toolFields({ tools: [weather] }).fields, { tools: [weather] });
    assert.deepEqual(toolFields({ tools: [weather], tool_choice: 'none' }), { fields: {}, mode: null });
  });
  it('named / required: the reply opens the call and is constrained to {name, arguments} of the tools', () => {
    const named = toolFields({ tools: [weather, time], tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    assert.equal(named.fields.replyPrefix, TOOL_CALL_OPEN);
    assert.ok(named.mode?.forced);
    const schema = (named.fields.responseFormat as { schema: object }).schema;
    const ajv = new Ajv({ strict: false });
    assert.ok(ajv.validate(schema, { name: 'get_weather', arguments: { city: 'Oslo' } }));
    assert.ok(!ajv.validate(schema, { name: 'get_time', arguments: {} }), 'only the named tool');
    const required = toolFields({ tools: [weather, time], tool_choice: 'required' });
    assert.ok(ajv.validate((required.fields.responseFormat as { schema: object }).schema, { name: 'get_time', arguments: {} }));
  });
  it('refusals name their field', () => {
    const param = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        assert.ok(e instanceof ApiError && e.status === 400);
        return e.param;
      }
      assert.fail('not refused');
    };
    assert.equal(param(() => toolFields({ tool_choice: 'required' })), 'tool_choice');
    assert.equal(param(() => toolFields({ tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } })), 'tool_choice.function.name');
    assert.equal(param(() => toolFields({ tools: [time, { type: 'function', function: { name: 'p', parameters: { type: 'object', properties: { s: { type: 'string', pattern: 'x' } } } } }], tool_choice: 'required' })), 'tools[1].function.parameters');
    assert.equal(param(() => toolFields({ tools: [weather], tool_choice: 'required', response_format: { type: 'json_object' } })), 'response_format');
  });
});

describe('tool history a template can render (parseChatRequest)', () => {
  const settings = { ...DEFAULT_SETTINGS, maxContext: 4096, maxTokens: 64 };
  const call = { id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{}' } };
  const refusedParam = (messages: unknown[]) => {
    try {
      parseChatRequest({ messages, tools: [time] }, settings);
    } catch (e) {
      assert.ok(e instanceof ApiError && e.status === 400, String(e));
      return e.param;
    }
    assert.fail('not refused');
  };
  it('a tool message answering a call made before it, with JSON object arguments, is taken', () => {
    const { request } = parseChatRequest({ messages: [{ role: 'user', content: 'Time?' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'call_1', content: '12:00' }] }, settings);
    assert.deepEqual(request.messages?.map((m) => m.role), ['user', 'assistant', 'tool']);
  });
  it('a tool_call_id that matches no earlier call: 400 naming the message', () => {
    assert.equal(refusedParam([{ role: 'user', content: 'Time?' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'call_2', content: '12:00' }]), 'messages[2].tool_call_id');
    assert.equal(refusedParam([{ role: 'user', content: 'Time?' }, { role: 'tool', tool_call_id: 'call_1', content: '12:00' }, { role: 'assistant', content: null, tool_calls: [call] }]), 'messages[1].tool_call_id', 'an answer before its call');
  });
  it('arguments that are not a JSON object: 400 naming the call', () => {
    for (const args of ['{"zone": ', 'UTC', '[1]', 'null']) {
      assert.equal(refusedParam([{ role: 'user', content: 'Time?' }, { role: 'assistant', content: null, tool_calls: [call, { ...call, id: 'call_2', function: { name: 'get_time', arguments: args } }] }]), 'messages[1].tool_calls[1].function.arguments', args);
    }
  });
});
