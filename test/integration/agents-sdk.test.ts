/**
 * An agent framework from npm drives a two-step tool loop against a real `serve` (services,
 * engine worker, ONNX Runtime, HTTP): the OpenAI Agents SDK (`@openai/agents`, over
 * `/v1/chat/completions`, tracing off so nothing leaves the machine) on a synthetic Qwen3
 * checkpoint (random weights, the real Qwen3 tokenizer and template). Step one: `toolChoice:
 * "required"` makes the call come out whatever the weights prefer (constrained decoding), and the
 * SDK runs the tool with arguments that match its zod schema; step two: the SDK sends the call and
 * the tool's result back (an assistant message with tool_calls, a tool message) and, its tool
 * choice reset to auto, takes the model's reply as the final output. Run plain and streamed (the
 * streamed run reads the call from token-by-token tool_calls deltas).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { startApiServer, type ApiServer } from '../helpers/api-server.ts';
import { writeSyntheticCheckpoint } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-agents-'));
let api: ApiServer | undefined;

before(async () => {
  await writeSyntheticCheckpoint(path.join(root, 'qwen3'), { family: 'qwen3', seed: 4 });
  api = await startApiServer(root, { cacheDir: path.join(root, 'cache'), defaultModel: path.join(root, 'qwen3') });
  setTracingDisabled(true);
  setOpenAIAPI('chat_completions');
  // The SDK nests openai 7; the client it is given is the project's openai 6 (the same chat API).
  setDefaultOpenAIClient(new OpenAI({ baseURL: api.baseUrl, apiKey: 'none', maxRetries: 0, timeout: 120_000 }) as unknown as Parameters<typeof setDefaultOpenAIClient>[0]);
});
after(async () => {
  await api?.close();
  rmSync(root, { recursive: true, force: true });
});

const Weather = z.object({ city: z.string().min(1).max(8), days: z.enum(['1', '2', '3']) });

function agentWithTool(calls: z.infer<typeof Weather>[]) {
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city for some days',
    parameters: Weather,
    execute: async (args) => {
      calls.push(Weather.parse(args));
      return 'sunny, 21 °C';
    },
  });
  const model = api!.backend.completions.model()!.name;
  return new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model, tools: [getWeather], modelSettings: { toolChoice: 'required', maxTokens: 200, temperature: 0 } });
}

for (const stream of [false, true]) {
  test(`@openai/agents: a required tool call, the tool's result back, then the answer (${stream ? 'streamed' : 'not streamed'})`, async () => {
    const calls: z.infer<typeof Weather>[] = [];
    const agent = agentWithTool(calls);
    const result = stream ? await run(agent, 'Weather in Oslo?', { stream: true, maxTurns: 3 }) : await run(agent, 'Weather in Oslo?', { maxTurns: 3 });
    if (stream && 'completed' in result) {
      for await (const _ of result.toStream()) void _;
      await result.completed;
    }
    assert.equal(calls.length, 1, `the tool ran once: ${JSON.stringify(calls)}`);
    const kinds = result.newItems.map((i) => i.type);
    assert.deepEqual(kinds.slice(0, 2), ['tool_call_item', 'tool_call_output_item'], kinds.join(', '));
    assert.equal(kinds.at(-1), 'message_output_item', kinds.join(', '));
    assert.equal(typeof result.finalOutput, 'string');
    // Two model calls: the forced call, then the answer after the tool message.
    assert.equal(result.rawResponses.length, 2);
    // The second prompt holds the first one, the call and the tool's result.
    const [first, second] = result.rawResponses.map((r) => r.usage.inputTokens);
    assert.ok(second > first + 10, `prompt tokens ${first} then ${second}`);
  });
}
