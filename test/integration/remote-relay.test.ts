/**
 * A remote engine relays what it used to refuse: tools, tool_choice, parallel_tool_calls, tool
 * history, logprobs / top_logprobs and response_format go to the remote server, and its
 * tool_calls and log-probabilities come back through this Ropewalk's /v1 (main/remote/relay.ts).
 * Two real `serve`s in this process: A serves a synthetic Qwen3 checkpoint (random weights, the
 * real tokenizer and template: its constraint makes forced calls and schemas come out whatever
 * the weights prefer); B starts on stories260K and switches to A as its remote engine
 * (`connectRemote`). The official openai SDK talks to B only.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { startApiServer, type ApiServer } from '../helpers/api-server.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-relay-'));
const ajv = new Ajv({ strict: false });
let a: ApiServer | undefined;
let b: ApiServer | undefined;
let client: OpenAI;
let model: string;

const params = { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 8 } }, required: ['city'], additionalProperties: false };
const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: params } }];
const ask = [{ role: 'user' as const, content: 'Weather in Oslo?' }];

before(async () => {
  await writeSyntheticCheckpoint(path.join(root, 'qwen3'), { family: 'qwen3', seed: 5 });
  a = await startApiServer(path.join(root, 'a'), { cacheDir: path.join(root, 'cache'), defaultModel: path.join(root, 'qwen3') });
  b = await startApiServer(path.join(root, 'b'), { cacheDir: path.join(root, 'cache') });
  model = a.backend.completions.model()!.name;
  await b.backend.router.call('connectRemote', { baseUrl: a.baseUrl, model });
  assert.ok(b.backend.completions.model()?.remote, 'B answers through its remote engine');
  client = new OpenAI({ baseURL: b.baseUrl, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
});
after(async () => {
  await b?.close();
  await a?.close();
  rmSync(root, { recursive: true, force: true });
});

test('a named tool_choice goes to the remote server; its call comes back with id, name and arguments that validate', async () => {
  const r = await client.chat.completions.create({ model, messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 120, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls?.[0];
  assert.ok(call?.type === 'function' && call.function.name === 'get_weather', JSON.stringify(r.choices[0].message));
  assert.match(call.id, /^call_[0-9a-f]{24}$/, 'the remote server’s id');
  assert.ok(ajv.validate(params, JSON.parse(call.function.arguments)), call.function.arguments);

  // The history goes back as it is (A refuses a tool message whose call it does not see).
  const back = await client.chat.completions.create({ model, messages: [...ask, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }], tools, max_tokens: 4 });
  assert.equal(back.choices.length, 1);
});

test('streamed: the relayed call comes in the remote server’s fragments and assembles in the SDK’s stream helper', async () => {
  const stream = client.chat.completions.stream({ model, messages: ask, tools, tool_choice: 'required', max_tokens: 120, temperature: 0 });
  const fragments: string[] = [];
  stream.on('tool_calls.function.arguments.delta', (e) => fragments.push(e.arguments_delta));
  const final = await stream.finalChatCompletion();
  const call = final.choices[0].message.tool_calls?.[0];
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.ok(call?.type === 'function' && call.function.name === 'get_weather');
  assert.ok(ajv.validate(params, JSON.parse(call.function.arguments)), call.function.arguments);
  // Relayed as the remote server streamed them: the same fragments as A's own stream of the same (greedy) request.
  const direct = new OpenAI({ baseURL: a!.baseUrl, apiKey: 'none', maxRetries: 0, timeout: 120_000 }).chat.completions.stream({ model, messages: ask, tools, tool_choice: 'required', max_tokens: 120, temperature: 0 });
  const own: string[] = [];
  direct.on('tool_calls.function.arguments.delta', (e) => own.push(e.arguments_delta));
  await direct.finalChatCompletion();
  assert.deepEqual(fragments, own);
  assert.equal(fragments.join(''), call.function.arguments);
});

test('logprobs and top_logprobs come from the remote server, streamed and not; response_format is its to enforce', async () => {
  const whole = await client.chat.completions.create({ model, messages: ask, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
  const entries = whole.choices[0].logprobs?.content ?? [];
  assert.ok(entries.length >= 1 && entries.length <= 5, `${entries.length} entries`);
  for (const e of entries) {
    assert.ok(e.logprob <= 0 && e.top_logprobs.length === 2, JSON.stringify(e));
    assert.ok(e.top_logprobs[0].logprob >= e.logprob - 1e-6, 'greedy: the chosen token is the most likely');
  }
  const stream = await client.chat.completions.create({ model, messages: ask, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 1, stream: true });
  let streamed = 0;
  for await (const chunk of stream) streamed += chunk.choices[0]?.logprobs?.content?.length ?? 0;
  assert.equal(streamed, entries.length, 'as many entries streamed as whole (greedy, same prompt)');

  const json = await client.chat.completions.create({ model, messages: ask, max_tokens: 120, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'w', schema: params, strict: true } } });
  assert.ok(ajv.validate(params, JSON.parse(json.choices[0].message.content ?? '')), json.choices[0].message.content ?? '');
});
