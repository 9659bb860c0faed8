/**
 * A remote engine, end to end: a REAL Ropewalk `serve` (services, engine, stories260K) on
 * 127.0.0.1 port 0 is the remote; a second Ropewalk's services connect to it through the
 * router, as the window does. Its `/tokenize`, `/detokenize` and `/apply-template` in llama.cpp's
 * and vLLM's shapes, and counting through either;
 * answers streamed through the same ChatService path, equal to the server's own; an exact meter
 * (the server's /tokenize, or a tokenizer.json), and "≈" when only an estimate is possible; Stop
 * cancels the HTTP request (the server stops generating). The faults a real server would rarely
 * produce on demand (401, 429, 5xx, a stream cut mid-way) come from a tiny raw HTTP server in
 * this file; connection refused from a closed port; an unknown model from the real server.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { RequestOf, ResponseOf, MethodName } from '../../main/contract/channels.ts';
import type { Settings } from '../../main/contract/types.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import { RouterError } from '../../main/composition/router.ts';
import { STORIES_BIN } from '../helpers/paths.ts';
import { RemoteServer } from '../../main/remote/http.ts';
import { llamaCppCounter } from '../../main/remote/token-counter.ts';
import { startApiServer, type ApiServer } from '../helpers/api-server.ts';
import { nextEvent, record } from '../helpers/router-events.ts';
import { until } from '../helpers/e2e-app.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-remote-test-'));
const cacheDir = path.join(root, 'cache');
let api: ApiServer;
let remote: Backend; // the server's services
let srv: ApiServer['server'];
let local: Backend; // the services that use it as their engine
let baseUrl: string;

const GREEDY: Partial<Settings> = { temperature: 0, maxTokens: 40, seed: 1 };

function call<M extends MethodName>(b: Backend, method: M, payload: RequestOf<M>): Promise<ResponseOf<M>> {
  return b.router.call(method, payload) as Promise<ResponseOf<M>>;
}

const remoteError = (text: RegExp) => (e: unknown) => {
  assert.ok(e instanceof RouterError, `expected a RouterError, got ${String(e)}`);
  assert.equal(e.code, 'REMOTE', e.message);
  assert.match(e.message, text);
  return true;
};

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** Sends and waits for the answer's end. */
async function sendAndWait(b: Backend, content: string) {
  const c = await call(b, 'createConversation', {});
  const done = nextEvent(b.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
  await call(b, 'sendMessage', { conversationId: c.id, content });
  return { conversationId: c.id, message: (await done).message };
}

before(async () => {
  api = await startApiServer(path.join(root, 'server'));
  ({ backend: remote, server: srv, baseUrl } = api);
  local = await startBackend({ dataDir: path.join(root, 'client'), cacheDir, defaultModel: STORIES_BIN, loadModel: false });
  await call(remote, 'updateSettings', GREEDY);
  await call(local, 'updateSettings', GREEDY);
});
after(async () => {
  await local?.dispose();
  await api?.close();
  rmSync(root, { recursive: true, force: true });
});

test("serve's /tokenize and /detokenize answer llama.cpp's and vLLM's shapes with the model's own tokenizer", async () => {
  const text = 'Once upon a time';
  const root = `http://127.0.0.1:${srv.port}`;
  const llama = await post(`${root}/tokenize`, { content: text });
  assert.equal(llama.status, 200);
  const ids = llama.json.tokens as number[];
  assert.deepEqual(ids, await remote.host.tokenize({ text, addSpecial: false, parseSpecial: true }));
  assert.ok(ids.length >= 3, `${ids.length} tokens`);
  const vllm = await post(`${root}/tokenize`, { model: 'stories260K', prompt: text });
  assert.deepEqual(vllm.json, { tokens: [1, ...ids], count: ids.length + 1, max_model_len: 512 }, 'BOS (id 1) added by default, as a completion feeds it');
  assert.deepEqual((await post(`${root}/tokenize`, { prompt: text, add_special_tokens: false })).json.tokens, ids);
  const messages = [{ role: 'user', content: text }, { role: 'assistant', content: ' there was a cat.' }];
  const chat = await post(`${root}/tokenize`, { messages });
  assert.equal(chat.json.count, await remote.host.countTokens({ messages: messages as never }), 'the chat as generation renders it');
  assert.deepEqual((await post(`${root}/detokenize`, { tokens: ids })).json, { content: text, prompt: text });
  const unknownId = await post(`${root}/detokenize`, { tokens: [ids[0], 99_999] });
  assert.equal(unknownId.status, 400);
  assert.deepEqual(unknownId.json.error, { message: 'tokens[1]: 99999 is not a token id of this model (0 to 511)', type: 'invalid_request_error', param: 'tokens[1]', code: 'invalid_request' });
  const wrongModel = await post(`${root}/tokenize`, { model: 'gpt-4', prompt: text });
  assert.deepEqual([wrongModel.status, (wrongModel.json.error as { param: string }).param], [404, 'model']);
  const both = await post(`${root}/tokenize`, { content: text, prompt: text });
  assert.equal(both.status, 400);
  assert.match((both.json.error as { message: string }).message, /exactly one of content/);
});

test("llama.cpp's way of counting (/apply-template, then /tokenize with BOS and special tokens parsed) agrees with the engine, against the real server", async () => {
  const counter = llamaCppCounter(new RemoteServer(baseUrl, null));
  const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Once upon a time' }];
  assert.equal(await counter.count({ messages }), await remote.host.countTokens({ messages }));
  assert.deepEqual(await counter.countEach(['Once upon a time', 'a girl <s> ran']), await remote.host.countEach(['Once upon a time', 'a girl <s> ran']), 'plain texts: no BOS, special text as text');
  const template = await post(`http://127.0.0.1:${srv.port}/apply-template`, { messages });
  assert.equal(template.json.prompt, await remote.host.renderChat(messages));
});

test('a remote engine: listed, connected, and answering through the same path as the local one, equal to the server; the meter exact', async () => {
  const listed = await call(local, 'listRemoteModels', { baseUrl });
  assert.deepEqual(listed.models, [{ id: 'stories260K', maxContext: 512 }]);
  const state = await call(local, 'connectRemote', { baseUrl, model: 'stories260K' });
  assert.equal(state.status, 'ready');
  assert.deepEqual(state.info?.remote, { baseUrl, model: 'stories260K', counting: 'server', apiKey: 'none' });
  assert.equal(state.info?.maxContext, 512, 'the max context the server says');

  const rec = record(local.router);
  const { conversationId, message } = await sendAndWait(local, 'Once upon a time');
  rec.stop();
  assert.equal(message.status, 'complete', message.error ?? '');
  const own = await post(`${baseUrl}/chat/completions`, { model: 'stories260K', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 40, temperature: 0, seed: 1 });
  const expected = (own.json.choices as { message: { content: string } }[])[0].message.content;
  assert.ok(expected.length > 20, expected);
  assert.equal(message.content, expected, "the remote's answer is the server's own");
  const deltas = rec.of('answerDelta').filter((d) => d.messageId === message.id);
  assert.equal(deltas.map((d) => d.text).join(''), message.content, 'streamed as deltas');
  assert.equal(message.stats?.promptTokens, (own.json.usage as { prompt_tokens: number }).prompt_tokens);

  const budget = await call(local, 'getBudget', { conversationId, draft: 'And then' });
  const history = [{ role: 'user' as const, content: 'Once upon a time' }, { role: 'assistant' as const, content: message.content }];
  const all = await remote.host.countTokens({ messages: history });
  assert.equal(budget.estimated, false);
  assert.equal(budget.history, all, "history counted exactly by the server's tokenizer");
  const withDraft = await remote.host.countTokens({ messages: [...history, { role: 'user', content: 'And then' }] });
  assert.equal(budget.draft, withDraft - all);

  // A local reply prefix cannot be relayed: refused, not dropped. Log-probabilities are relayed
  // (tools too: remote-relay.test.ts, on a model with a template).
  const sampler = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
  await assert.rejects(async () => {
    for await (const _ of local.completions.complete({ messages: history, maxTokens: 2, sampler, replyPrefix: '<tool_call>\n' }, new AbortController().signal));
  }, /reply prefix is not relayed to a remote engine/);
  let withLogprobs: Extract<GenerationEvent, { type: 'done' }> | undefined;
  for await (const ev of local.completions.complete({ messages: history, maxTokens: 2, sampler, logprobs: 2 }, new AbortController().signal)) if (ev.type === 'done') withLogprobs = ev;
  assert.equal(withLogprobs?.logprobs?.length, 2, JSON.stringify(withLogprobs?.logprobs));
  assert.ok(withLogprobs.logprobs.every((e) => e.top.length === 2 && e.logprob <= 0));
});

test('Stop cancels the HTTP request: the answer keeps its text as cancelled and the server stops generating', async () => {
  await call(local, 'connectRemote', { baseUrl, model: 'stories260K' });
  await call(remote, 'updateSettings', { maxContext: 16384, maxTokens: 12000 });
  await call(local, 'updateSettings', { maxContext: 16384, maxTokens: 12000, repetitionPenalty: 0.1 });
  try {
    const c = await call(local, 'createConversation', {});
    const firstDelta = nextEvent(local.router, 'answerDelta', (d) => d.conversationId === c.id, 60_000);
    const done = nextEvent(local.router, 'answerDone', (d) => d.conversationId === c.id, 60_000);
    await call(local, 'sendMessage', { conversationId: c.id, content: 'Once upon a time' });
    await firstDelta;
    await until('the server generates', async () => remote.chat.generating);
    await call(local, 'stopGeneration', { conversationId: c.id });
    const stopped = (await done).message;
    assert.equal(stopped.status, 'cancelled');
    assert.ok(stopped.content.length > 0, 'the partial answer is kept');
    await until('the server stopped generating', async () => !remote.chat.generating, 5000);
  } finally {
    await call(local, 'updateSettings', { maxContext: 512, ...GREEDY, repetitionPenalty: 1 });
    await call(remote, 'updateSettings', { maxContext: 512, maxTokens: 40 });
  }
});

test('a model the server does not have, a server that is not there, and a Ropewalk as its own remote are refused saying what to do', async () => {
  await assert.rejects(call(local, 'connectRemote', { baseUrl, model: 'gpt-4' }), remoteError(/has no model "gpt-4" \(it has "stories260K"\); pick one of its models/));
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  await assert.rejects(call(local, 'listRemoteModels', { baseUrl: `http://127.0.0.1:${port}/v1` }), remoteError(/cannot reach the remote engine at http:\/\/127\.0\.0\.1:\d+\/v1 while listing its models \(connection refused: is the server running/));
  await assert.rejects(call(local, 'listRemoteModels', { baseUrl: 'ftp://example/v1' }), remoteError(/the base URL must be an http\(s\) address.*"ftp:\/\/example\/v1"/));
  await assert.rejects(call(local, 'listRemoteModels', { baseUrl: 'http://me:s3cret@127.0.0.1:1/v1' }), (e: unknown) => {
    assert.match((e as Error).message, /no credentials: the key has its own field\), got a URL with a user name or password in it/);
    assert.doesNotMatch((e as Error).message, /s3cret/, 'the password is not quoted back');
    return true;
  });
  assert.equal((await call(local, 'getModel', {})).info?.remote?.baseUrl, baseUrl, 'a failed connect keeps the engine that answered');
  // The server's own API as its engine would queue every answer behind itself.
  await assert.rejects(call(remote, 'connectRemote', { baseUrl, model: 'stories260K' }), remoteError(/is this Ropewalk's own API; a remote engine must be another server/));
  assert.equal((await call(remote, 'getModel', {})).info?.remote, undefined, 'the server keeps its local model');
});

/** A server with no /tokenize that checks a key and misbehaves on demand (`mode`). */
async function faultyServer(): Promise<{ url: string; mode: { next: 'ok' | 'whole' | '429' | '500' | 'cut' }; close(): Promise<void> }> {
  const mode = { next: 'ok' as 'ok' | 'whole' | '429' | '500' | 'cut' };
  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== 'Bearer s3cret-key') return send(401, { error: { message: 'Invalid API key', type: 'invalid_request_error' } });
    if (req.url === '/v1/models') return send(200, { object: 'list', data: [{ id: 'tiny', object: 'model' }] });
    if (req.url !== '/v1/chat/completions') return send(404, { error: { message: `no route ${req.url}` } });
    if (mode.next === '429') return send(429, { error: { message: 'Rate limit reached' } }, { 'retry-after': '7' });
    if (mode.next === '500') return send(500, { error: { message: 'CUDA out of memory' } });
    if (mode.next === 'whole') return send(200, { object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Once upon a whole' }, finish_reason: 'length' }], usage: { prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 } });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const event = (delta: Record<string, string>, finish: string | null) => `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}`;
    if (mode.next === 'cut') {
      res.write(`${event({ content: 'Once' }, null)}\n\n${event({ content: ' upon' }, null)}\n\n`);
      return void setTimeout(() => res.socket?.destroy(), 20);
    }
    // As servers may send it: a comment line, CRLF endings, and events split across writes.
    const body = `: keep-alive\r\n\r\n${event({ content: 'Once' }, null)}\r\n\r\n${event({ content: ' upon' }, null)}\n\n${event({}, 'stop')}\n\ndata: [DONE]\n\n`;
    const pieces = [body.slice(0, 30), body.slice(30, 95), body.slice(95)];
    const next = () => (pieces.length > 1 ? (res.write(pieces.shift()!), setTimeout(next, 10)) : res.end(pieces.shift()));
    next();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    mode,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

test('errors from the server (401, 429, 5xx, a stream cut mid-way) are clear; a cut keeps the partial answer; the key is kept but never shown; a server that does not stream still answers; without /tokenize the meter says ≈', async () => {
  const faulty = await faultyServer();
  try {
    await assert.rejects(call(local, 'connectRemote', { baseUrl: faulty.url, model: 'tiny' }), remoteError(/refused the API key while listing its models \(HTTP 401: Invalid API key\); enter the right key in the model panel/));
    const state = await call(local, 'connectRemote', { baseUrl: faulty.url, model: 'tiny', apiKey: 's3cret-key' });
    assert.deepEqual(state.info?.remote, { baseUrl: faulty.url, model: 'tiny', counting: 'estimate', apiKey: 'memory' }, 'serve mode has no safeStorage: in memory only');
    assert.ok(!JSON.stringify(await call(local, 'getModel', {})).includes('s3cret'), 'the key never goes to the window');
    assert.deepEqual((await call(local, 'listRemoteModels', { baseUrl: faulty.url })).models, [{ id: 'tiny', maxContext: null }], 'the saved key is used for its URL');

    const ok = await sendAndWait(local, 'Hi');
    assert.deepEqual([ok.message.status, ok.message.content], ['complete', 'Once upon']);
    faulty.mode.next = 'whole';
    const whole = await sendAndWait(local, 'Hi');
    assert.deepEqual([whole.message.status, whole.message.content, whole.message.stats?.finishReason, whole.message.stats?.promptTokens], ['complete', 'Once upon a whole', 'length', 7], 'a server that does not stream: its one JSON answer, with its usage');
    faulty.mode.next = 'ok';
    const budget = await call(local, 'getBudget', { conversationId: ok.conversationId, draft: '' });
    assert.equal(budget.estimated, true, 'no /tokenize, no tokenizer.json: an estimate');

    faulty.mode.next = '429';
    const limited = await sendAndWait(local, 'Hi');
    assert.equal(limited.message.status, 'error');
    assert.match(limited.message.error ?? '', /is limiting requests \(HTTP 429: Rate limit reached\); wait 7 s and send again/);
    faulty.mode.next = '500';
    const failed = await sendAndWait(local, 'Hi');
    assert.match(failed.message.error ?? '', /failed while answering \(HTTP 500: CUDA out of memory\); try again, or look at the server's log/);
    faulty.mode.next = 'cut';
    const cut = await sendAndWait(local, 'Hi');
    assert.deepEqual([cut.message.status, cut.message.content], ['error', 'Once upon'], 'the partial answer is kept');
    assert.match(cut.message.error ?? '', /stream (was cut|ended before the answer did) after 2 chunks.*the partial answer is kept/);
    for (const m of [limited, failed, cut]) assert.ok(!(m.message.error ?? '').includes('s3cret'));
  } finally {
    await faulty.close();
  }
});

test('a tokenizer.json makes the meter exact for a server without /tokenize', async () => {
  const faulty = await faultyServer();
  try {
    const bundle = remote.host.model!.bundleDir;
    const state = await call(local, 'connectRemote', { baseUrl: faulty.url, model: 'tiny', apiKey: 's3cret-key', tokenizerPath: path.join(bundle, 'tokenizer.json') });
    assert.equal(state.info?.remote?.counting, 'tokenizer');
    const c = await call(local, 'createConversation', {});
    const budget = await call(local, 'getBudget', { conversationId: c.id, draft: 'Once upon a time, a girl' });
    assert.equal(budget.estimated, false);
    assert.equal(budget.draft, await remote.host.countTokens({ messages: [{ role: 'user', content: 'Once upon a time, a girl' }] }), "counted as the model's tokenizer counts (BOS included)");
    await assert.rejects(call(local, 'connectRemote', { baseUrl: faulty.url, model: 'tiny', tokenizerPath: path.join(root, 'nope.json') }), remoteError(/the tokenizer ".*nope\.json" cannot be used to count tokens \(no such file\)/));
  } finally {
    await faulty.close();
  }
});
