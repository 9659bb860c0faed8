/**
 * Tool calls through the official `openai` SDK, streamed and not, over real HTTP (`handleOpenAi`
 * on a 127.0.0.1 server) in front of an Engine whose backend is scripted to write two parallel
 * calls (test/helpers/forced-backend.ts), in the Qwen/Hermes format (the real Qwen3 tokenizer and
 * template) and in Mistral's `[TOOL_CALLS]name[ARGS]` format (test/helpers/tool-templates.ts).
 * Checked: `create()` gives both calls with ids and `finish_reason: "tool_calls"`; the stream
 * helper (`chat.completions.stream()`) sees `tool_calls.function.arguments.delta` events in many
 * fragments per call, the first one before the reply is whole, and `finalChatCompletion()`
 * assembles the same calls, ids included; `content` is the text before the calls.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import OpenAI from 'openai';
import type { Engine } from '../../main/engine/generate/engine.ts';
import type { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { handleOpenAi } from '../../main/serve/openai.ts';
import type { CompletionBackend } from '../../main/services/index.ts';
import { DEFAULT_SETTINGS } from '../../main/services/settings.ts';
import { forcedEngine, qwen3Tokenizer } from '../helpers/forced-backend.ts';
import { markerTokenizer, toolTemplate } from '../helpers/tool-templates.ts';

const tools = [
  { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } },
  { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
];
const messages = [{ role: 'user' as const, content: 'Weather in Oslo for 2 days, and the time in Paris?' }];
const expected = [['get_weather', { city: 'Oslo', days: 2 }], ['get_time', { zone: 'Europe/Paris' }]];

/** A CompletionBackend over `engine` (what `serve` gives /v1, less the queue and the database). */
function backendOver(engine: Engine): CompletionBackend {
  const info = engine.info;
  return {
    instanceId: 'test',
    model: () => ({ ...info, toolFormat: info.toolFormat ?? undefined }),
    health: () => ({ status: 'ok' }),
    settings: () => ({ ...DEFAULT_SETTINGS, temperature: 0, maxContext: 4096, maxTokens: 300 }),
    complete: (request, signal) => engine.generate(request, { signal }),
    tokenize: async () => [],
    detokenize: async () => '',
    renderChat: async () => '',
  };
}

const servers: http.Server[] = [];
after(() => servers.forEach((s) => s.close()));

async function clientFor(tokenizer: TextTokenizer, reply: string): Promise<OpenAI> {
  const backend = backendOver(forcedEngine(tokenizer, tokenizer.encode(reply, { addBos: false })));
  const server = http.createServer((req, res) => void handleOpenAi(req, res, backend));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'none', maxRetries: 0 });
}

const REPLIES = {
  hermes: { tokenizer: () => qwen3Tokenizer(), reply: 'Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "Europe/Paris"}}\n</tool_call>', idShape: /^call_[0-9a-f]{24}$/ },
  'mistral-args': { tokenizer: () => markerTokenizer(toolTemplate('mistral-args')), reply: 'Let me check both.[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "days": 2}[TOOL_CALLS]get_time[ARGS]{"zone": "Europe/Paris"}', idShape: /^[0-9a-f]{9}$/ },
};

for (const [format, r] of Object.entries(REPLIES)) {
  describe(`${format}: two parallel calls through the openai SDK`, () => {
    it('create(): the calls with ids, finish_reason tool_calls, the text before them as content', async () => {
      const client = await clientFor(r.tokenizer(), r.reply);
      const whole = await client.chat.completions.create({ model: '', messages, tools });
      const choice = whole.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.equal(choice.message.content, 'Let me check both.');
      const calls = choice.message.tool_calls ?? [];
      assert.deepEqual(calls.map((c) => c.type === 'function' && [c.function.name, JSON.parse(c.function.arguments)]), expected);
      for (const c of calls) assert.match(c.id, r.idShape);
    });
    it('stream(): argument fragments as they are written, assembled by finalChatCompletion()', async () => {
      const client = await clientFor(r.tokenizer(), r.reply);
      const stream = client.chat.completions.stream({ model: '', messages, tools });
      const fragments: { index: number; delta: string; chunk: number }[] = [];
      let chunks = 0;
      stream.on('chunk', () => chunks++);
      stream.on('tool_calls.function.arguments.delta', (e) => fragments.push({ index: e.index, delta: e.arguments_delta, chunk: chunks }));
      const final = await stream.finalChatCompletion();
      const choice = final.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.equal(choice.message.content, 'Let me check both.');
      const calls = choice.message.tool_calls ?? [];
      assert.deepEqual(calls.map((c) => c.type === 'function' && [c.function.name, JSON.parse(c.function.arguments)]), expected);
      for (const c of calls) assert.match(c.id, r.idShape);
      for (const index of [0, 1]) {
        const mine = fragments.filter((f) => f.index === index);
        assert.ok(mine.length >= 5, `call ${index}: ${mine.length} fragments`);
        assert.deepEqual(JSON.parse(mine.map((f) => f.delta).join('')), expected[index][1], 'the fragments join to the arguments');
      }
      assert.ok(fragments[0].chunk < chunks - 10, `the first fragment came in chunk ${fragments[0].chunk} of ${chunks}`);
    });
  });
}
