/**
 * Reasoning shown apart, end to end, on a REAL Qwen3 model run by ONNX Runtime: a synthetic
 * Qwen3 checkpoint with the real Qwen3 tokenizer and template whose weights force its reply
 * (test/helpers/bigram-qwen3.ts): after the prompt's `assistant\n` it writes
 * `<think>Let me think</think>Hello!`; after Qwen3's `enable_thinking: false` prompt
 * (`…</think>\n\n`) it writes `Hello!`. Through the services, the store and `serve`:
 *   - /v1 with the official `openai` SDK: `message.reasoning_content` / `delta.reasoning_content`,
 *     `content` the answer only, `usage.completion_tokens_details.reasoning_tokens`;
 *     `chat_template_kwargs.enable_thinking` false; a refused template kwarg names its field;
 *   - a window's conversation (router): the answer stored with its reasoning apart, streamed in
 *     `answerDelta.reasoning`, stats with reasoning tokens; the chat's Think toggle;
 *   - the remote engine pointed at this server reads `reasoning_content` as reasoning;
 *   - the chat CLI: `--json` has `reasoning`; plain text puts the thinking on stderr.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import type { MethodName, RequestOf, ResponseOf } from '../../main/contract/channels.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { RemoteEngine } from '../../main/remote/remote-engine.ts';
import { startServer, type RunningServer } from '../../main/serve/server.ts';
import { chainAfter, writeBigramQwen3 } from '../helpers/bigram-qwen3.ts';
import { parseJsonRun, runChat } from '../helpers/cli-run.ts';
import { nextEvent, record } from '../helpers/router-events.ts';

// Qwen3 token ids (the real tokenizer): "\n", <think>, "Let", " me", " think", </think>, "Hello", "!", "\n\n".
const NL = 198;
const REPLY = [151667, 10061, 752, 1744, 151668, 9707, 0];
const NL2 = 271;

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-reasoning-test-'));
const modelDir = path.join(root, 'qwen3-bigram');
const cacheDir = path.join(root, 'cache');
let backend: Backend;
let srv: RunningServer;
let client: OpenAI;
let model: string;

before(async () => {
  const next = chainAfter(NL, REPLY);
  next.set(NL2, 9707); // enable_thinking false: the prompt ends "</think>\n\n", the reply is "Hello!"
  await writeBigramQwen3(modelDir, next);
  mkdirSync(path.join(root, 'static'));
  writeFileSync(path.join(root, 'static', 'index.html'), '<!doctype html><title>Ropewalk</title>');
  backend = await startBackend({ dataDir: path.join(root, 'data'), cacheDir, defaultModel: modelDir });
  srv = await startServer({ router: backend.router, port: 0, staticDir: path.join(root, 'static'), completions: backend.completions });
  await backend.modelLoaded;
  model = backend.completions.model()!.name;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 60_000 });
});
after(async () => {
  await srv?.close();
  await backend?.dispose();
  rmSync(root, { recursive: true, force: true });
});

const hi = [{ role: 'user' as const, content: 'Hi' }];
type Usage = { completion_tokens: number; completion_tokens_details?: { reasoning_tokens?: number } };

test('/v1 whole: reasoning_content apart, content the answer, reasoning tokens in usage', async () => {
  const r = await client.chat.completions.create({ model, messages: hi });
  const msg = r.choices[0]!.message as { content: string | null; reasoning_content?: string };
  assert.deepEqual([msg.reasoning_content, msg.content, r.choices[0]!.finish_reason], ['Let me think', 'Hello!', 'stop']);
  const u = r.usage as Usage;
  assert.deepEqual([u.completion_tokens, u.completion_tokens_details?.reasoning_tokens], [7, 5], '<think> … </think> is 5 of the 7 tokens');
});

test('/v1 streamed: delta.reasoning_content, then delta.content; usage the same', async () => {
  const stream = await client.chat.completions.create({ model, messages: hi, stream: true, stream_options: { include_usage: true } });
  let reasoning = '';
  let content = '';
  let seenContentBeforeReasoningEnded = false;
  let usage: Usage | undefined;
  for await (const c of stream) {
    const d = c.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
    if (d?.reasoning_content) {
      if (content) seenContentBeforeReasoningEnded = true;
      reasoning += d.reasoning_content;
    }
    if (d?.content) content += d.content;
    if (c.usage) usage = c.usage as Usage;
  }
  assert.deepEqual([reasoning, content, seenContentBeforeReasoningEnded], ['Let me think', 'Hello!', false]);
  assert.equal(usage?.completion_tokens_details?.reasoning_tokens, 5);
});

test('/v1 chat_template_kwargs.enable_thinking false: no reasoning; another template kwarg is refused by name', async () => {
  const r = await client.chat.completions.create({ model, messages: hi, chat_template_kwargs: { enable_thinking: false } } as never);
  const msg = (r as OpenAI.ChatCompletion).choices[0]!.message as { content: string | null; reasoning_content?: string };
  assert.deepEqual([msg.content, msg.reasoning_content, ((r as OpenAI.ChatCompletion).usage as Usage).completion_tokens_details?.reasoning_tokens], ['Hello!', undefined, 0]);
  await assert.rejects(
    client.chat.completions.create({ model, messages: hi, chat_template_kwargs: { add_vision_id: true } } as never),
    (e: unknown) => e instanceof OpenAI.BadRequestError && /chat_template_kwargs/.test(String((e.error as { param?: string }).param)),
  );
});

const call = <M extends MethodName>(method: M, payload: RequestOf<M>) => backend.router.call(method, payload) as Promise<ResponseOf<M>>;

test('a conversation stores the reasoning apart, streams it in answerDelta.reasoning; the Think toggle turns it off', async () => {
  const c = await call('createConversation', {});
  const events = record(backend.router);
  let done = nextEvent(backend.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
  await call('sendMessage', { conversationId: c.id, content: 'Hi' });
  const first = (await done).message;
  events.stop();
  assert.deepEqual([first.reasoning, first.content, first.stats?.reasoningTokens, first.stats?.generatedTokens], ['Let me think', 'Hello!', 5, 7]);
  assert.ok((first.stats?.reasoningMs ?? -1) >= 0);
  const deltas = events.of('answerDelta');
  assert.equal(deltas.map((d) => d.reasoning ?? '').join(''), 'Let me think');
  assert.equal(deltas.map((d) => d.text).join(''), 'Hello!');
  const stored = (await call('getConversation', { id: c.id })).messages.at(-1)!;
  assert.deepEqual([stored.reasoning, stored.content], ['Let me think', 'Hello!']);

  assert.equal((await call('setConversationThinking', { id: c.id, thinking: false })).thinking, false);
  done = nextEvent(backend.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
  await call('sendMessage', { conversationId: c.id, content: 'Again' });
  const second = (await done).message;
  assert.deepEqual([second.reasoning ?? '', second.content, second.stats?.reasoningTokens], ['', 'Hello!', undefined]);
});

test('the meter counts the prompt as the answer sends it, Think toggle included (it was 4 tokens low with Think off)', async () => {
  for (const thinking of [false, true, null]) {
    const c = await call('createConversation', {});
    if (thinking !== null) await call('setConversationThinking', { id: c.id, thinking });
    const budget = await call('getBudget', { conversationId: c.id, draft: 'Hi' });
    const done = nextEvent(backend.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
    await call('sendMessage', { conversationId: c.id, content: 'Hi' });
    const stats = (await done).message.stats;
    assert.equal(budget.used, stats?.promptTokens, `Think ${thinking}: the meter said ${budget.used}, the answer was fed ${stats?.promptTokens}`);
  }
});

test('the remote engine reads a server’s reasoning_content as reasoning', async () => {
  const remote = await RemoteEngine.connect({ baseUrl: `http://127.0.0.1:${srv.port}/v1`, apiKey: null, model, tokenizerPath: null });
  const parts: Record<string, string> = { reasoning: '', content: '' };
  let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
  for await (const ev of remote.generate({ messages: hi, maxTokens: 50, sampler: { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 } })) {
    if (ev.type === 'token') parts[ev.part] += ev.text;
    if (ev.type === 'done') done = ev;
  }
  assert.deepEqual(parts, { reasoning: 'Let me think', content: 'Hello!' });
  assert.deepEqual([done?.reasoning, done?.text, done?.stats.reasoningTokens], ['Let me think', 'Hello!', 5]);
});

test('chat CLI: --json has reasoning apart; plain text: the answer on stdout, the thinking framed on stderr', async () => {
  const json = parseJsonRun(await runChat(['--model', modelDir, '--json', 'Hi'], cacheDir, 120_000)) as ReturnType<typeof parseJsonRun> & { reasoning: string; stats: { reasoningTokens: number } };
  assert.deepEqual([json.reasoning, json.text, json.stats.reasoningTokens], ['Let me think', 'Hello!', 5]);
  const plain = await runChat(['--model', modelDir, 'Hi'], cacheDir, 120_000);
  assert.equal(plain.code, 0, plain.stderr);
  assert.equal(plain.stdout, 'Hello!\n');
  assert.match(plain.stderr, /Thinking\.\.\.\nLet me think\n\.\.\.done thinking\.\n/);
  const off = await runChat(['--model', modelDir, '--no-think', 'Hi'], cacheDir, 120_000);
  assert.deepEqual([off.stdout, /Thinking/.test(off.stderr)], ['Hello!\n', false]);
});

test('Continue after "length" on a reasoning model: cut inside the thinking it goes on thinking, cut in the answer it goes on answering', async () => {
  for (const [maxTokens, cut] of [[3, ['Let me', '']], [6, ['Let me think', 'Hello']]] as const) {
    await call('updateSettings', { maxTokens });
    const c = await call('createConversation', {});
    let done = nextEvent(backend.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
    await call('sendMessage', { conversationId: c.id, content: 'Hi' });
    const first = (await done).message;
    assert.deepEqual([first.reasoning ?? '', first.content, first.stats?.finishReason], [...cut, 'length'], `cut at ${maxTokens} tokens`);
    await call('updateSettings', { maxTokens: 50 });
    done = nextEvent(backend.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
    await call('continueAnswer', { conversationId: c.id, messageId: first.id });
    const whole = (await done).message;
    assert.deepEqual([whole.id, whole.reasoning, whole.content, whole.stats?.finishReason, whole.stats?.generatedTokens], [first.id, 'Let me think', 'Hello!', 'stop', 7], `continued from ${maxTokens} tokens`);
  }
});
