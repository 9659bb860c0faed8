/**
 * Structured output end to end on a synthetic Qwen3 checkpoint (random weights, the real Qwen3
 * tokenizer and chat template): whatever the weights prefer, the constraint decides what may
 * come out, so every reply must parse and validate. Checked with ajv (an independent validator)
 * and zod: the engine on both backends, then `serve` through the official `openai` SDK — chat
 * (streamed and not), `chat.completions.parse()` with a zod schema (`zodResponseFormat`),
 * json_object, the legacy completions endpoint — and a schema keyword not covered refused with
 * 400 and `param: "response_format"`.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { startApiServer, type ApiServer } from '../helpers/api-server.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-structured-'));
const modelDir = path.join(root, 'qwen3');
const cacheDir = path.join(root, 'cache');
const ajv = new Ajv({ strict: false });
let api: ApiServer | undefined;
let client: OpenAI;

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 8 },
    age: { type: 'integer' },
    tags: { type: 'array', items: { type: 'string', maxLength: 5 }, maxItems: 2 },
    kind: { enum: ['cat', 'dog'] },
    score: { anyOf: [{ type: 'number' }, { type: 'null' }] },
    ok: { type: 'boolean' },
  },
  required: ['name', 'age', 'tags', 'kind', 'score', 'ok'],
  additionalProperties: false,
};
const messages = [{ role: 'user' as const, content: 'Describe a pet as JSON.' }];

function assertValid(schema: object, text: string | null | undefined): unknown {
  assert.equal(typeof text, 'string');
  let value: unknown;
  assert.doesNotThrow(() => (value = JSON.parse(text!)), `not JSON: ${JSON.stringify(text)}`);
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${text} fails the schema: ${ajv.errorsText(validate.errors)}`);
  return value;
}

before(async () => {
  await writeSyntheticCheckpoint(modelDir, { family: 'qwen3', seed: 3 });
});
after(async () => {
  await api?.close();
  rmSync(root, { recursive: true, force: true });
});

for (const kind of ['js', 'native'] as const) {
  test(`engine (${kind} backend): sampled replies under a schema parse and validate, and end with 'stop'`, async () => {
    const engine = await Engine.load(modelDir, { cacheDir, backend: kind, maxContext: 1024 });
    try {
      for (const seed of [1, 2]) {
        let done: Extract<GenerationEvent, { type: 'done' }> | undefined;
        let streamed = '';
        const sampler = { temperature: 1, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, seed };
        for await (const ev of engine.generate({ messages, maxTokens: 400, sampler, responseFormat: { type: 'json_schema', schema: PERSON } })) {
          if (ev.type === 'token') streamed += ev.text;
          if (ev.type === 'done') done = ev;
        }
        assert.equal(done?.reason, 'stop', JSON.stringify(done?.error ?? done?.text));
        assert.equal(done.stats.backend, kind);
        assert.equal(streamed, done.text);
        assertValid(PERSON, done.text);
      }
    } finally {
      await engine.dispose();
    }
  });
}

test('serve: the openai SDK gets JSON that validates, streamed and not, parse() with zod, json_object, legacy completions', async () => {
  api = await startApiServer(root, { cacheDir, defaultModel: modelDir });
  client = new OpenAI({ baseURL: api.baseUrl, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
  const model = (await client.models.list()).data[0].id;
  const format = { type: 'json_schema' as const, json_schema: { name: 'pet', schema: PERSON, strict: true } };

  const whole = await client.chat.completions.create({ model, messages, max_tokens: 400, seed: 5, response_format: format });
  assert.equal(whole.choices[0].finish_reason, 'stop');
  assertValid(PERSON, whole.choices[0].message.content);

  const stream = await client.chat.completions.create({ model, messages, max_tokens: 400, seed: 6, response_format: format, stream: true });
  let text = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  assertValid(PERSON, text);

  const Pet = z.object({ name: z.string().min(1).max(6), legs: z.number().int(), friendly: z.boolean(), colors: z.array(z.enum(['red', 'blue'])).max(2), nick: z.string().max(4).nullable() });
  const parsed = await client.chat.completions.parse({ model, messages, max_tokens: 400, seed: 7, response_format: zodResponseFormat(Pet, 'pet') });
  const pet = parsed.choices[0].message.parsed;
  assert.ok(pet, `no parsed value: ${parsed.choices[0].message.content}`);
  assert.deepEqual(Pet.parse(pet), pet);

  const obj = await client.chat.completions.create({ model, messages, max_tokens: 600, seed: 8, response_format: { type: 'json_object' } });
  // Random weights may run an open-ended object past max_tokens; only a finished one must parse.
  if (obj.choices[0].finish_reason === 'stop') assertValid({ type: 'object' }, obj.choices[0].message.content);
  else assert.equal(obj.choices[0].finish_reason, 'length');

  const legacy = await client.completions.create({ model, prompt: 'A pet as JSON:', max_tokens: 400, seed: 9, response_format: format } as OpenAI.CompletionCreateParamsNonStreaming);
  assert.equal(legacy.choices[0].finish_reason, 'stop');
  assertValid(PERSON, legacy.choices[0].text);

  await assert.rejects(
    client.chat.completions.create({ model, messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } } } } }),
    (e: unknown) => e instanceof OpenAI.APIError && e.status === 400 && (e.error as { param?: string }).param === 'response_format' && /"pattern"/.test(e.message) && /\/properties\/id/.test(e.message),
  );
});

test('serve: tool calls through the openai SDK — required and named calls come out and validate, streamed as OpenAI streams them, a tool message goes back, none gives content', async () => {
  assert.ok(client, 'the serve test above started the server');
  const model = (await client.models.list()).data[0].id;
  const params = { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 10 }, days: { type: 'integer' } }, required: ['city', 'days'], additionalProperties: false };
  const tools = [
    { type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: params } },
    { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
  ];
  const ask = [{ role: 'user' as const, content: 'Weather in Oslo for 2 days?' }];

  const named = await client.chat.completions.create({ model, messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 200, seed: 1 });
  assert.equal(named.choices[0].finish_reason, 'tool_calls');
  const call = named.choices[0].message.tool_calls?.[0];
  assert.ok(call?.type === 'function' && call.function.name === 'get_weather', JSON.stringify(named.choices[0].message));
  assertValid(params, call.function.arguments);

  const required = await client.chat.completions.create({ model, messages: ask, tools, tool_choice: 'required', max_tokens: 200, seed: 2 });
  const req = required.choices[0].message.tool_calls?.[0];
  assert.ok(req?.type === 'function' && ['get_weather', 'get_time'].includes(req.function.name));
  assertValid(req.function.name === 'get_weather' ? params : tools[1].function.parameters, req.function.arguments);

  // Streamed: the id and name on the first delta of the call, the arguments after.
  const stream = await client.chat.completions.create({ model, messages: ask, tools, tool_choice: 'required', max_tokens: 200, seed: 3, stream: true });
  const deltas: { index: number; id?: string; name?: string; args?: string }[] = [];
  let finish: string | null = null;
  for await (const chunk of stream) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) deltas.push({ index: d.index, id: d.id, name: d.function?.name, args: d.function?.arguments });
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.ok(deltas[0].id && deltas[0].name, JSON.stringify(deltas));
  const args = deltas.filter((d) => d.index === 0).map((d) => d.args ?? '').join('');
  assertValid(deltas[0].name === 'get_weather' ? params : tools[1].function.parameters, args);

  // The call and its result go back through the template; the SDK's round trip answers 200.
  const back = await client.chat.completions.create({
    model,
    max_tokens: 8,
    tools,
    messages: [...ask, named.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp": 3}' }],
  });
  assert.equal(back.choices.length, 1);

  const none = await client.chat.completions.create({ model, messages: ask, tools, tool_choice: 'none', max_tokens: 8 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(typeof none.choices[0].message.content, 'string');
});
