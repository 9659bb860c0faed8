/**
 * The OpenAI-compatible API as client tools use it: the official `openai` SDK against a real
 * `serve` server (real services, real engine with stories260K), at `http://localhost:PORT/v1`.
 * Chat and raw completions, streamed or not (include_usage), honest usage, sampling fields,
 * refused fields with `param`, messages as clients send them, the Host check, the queue shared
 * with the window, the fast context check, /health and CORS.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { startBackend, type Backend } from '../../main/composition/start-backend.ts';
import { LocalApiServer } from '../../main/serve/local-server.ts';
import { startServer, type RunningServer } from '../../main/serve/server.ts';
import { STORIES_BIN } from '../helpers/paths.ts';
import { nextEvent } from '../helpers/router-events.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-api-test-'));
const cacheDir = path.join(root, 'cache');
let backend: Backend;
let srv: RunningServer;
let client: OpenAI;

before(async () => {
  mkdirSync(path.join(root, 'static'));
  writeFileSync(path.join(root, 'static', 'index.html'), '<!doctype html><title>Ropewalk</title>');
  backend = await startBackend({ dataDir: path.join(root, 'data'), cacheDir, defaultModel: STORIES_BIN });
  srv = await startServer({ router: backend.router, port: 0, staticDir: path.join(root, 'static'), completions: backend.completions });
  await backend.modelLoaded;
  client = new OpenAI({ baseURL: `http://localhost:${srv.port}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 60_000 });
});
after(async () => {
  await srv?.close();
  await backend?.dispose();
  rmSync(root, { recursive: true, force: true });
});

const MODEL = 'stories260K';
const GREEDY = { model: MODEL, temperature: 0 } as const;
const story = (content = 'Once upon a time') => [{ role: 'user' as const, content }];

/** A raw request (Host and headers exactly as given). */
function raw(method: string, urlPath: string, headers: Record<string, string> = {}, port = srv.port): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: urlPath, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * `request` written as it is on a new TCP connection (no client library fixes a bad header on
 * the way); resolves with the response once the server closes the connection, so a response
 * that keeps the connection open fails on the timeout.
 */
function rawSocket(request: string, port = srv.port, timeoutMs = 5_000): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request, 'latin1'));
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open ${timeoutMs} ms; got ${JSON.stringify(text)}`));
    }, timeoutMs);
    socket.on('end', () => {
      clearTimeout(timer);
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      let body = text.slice(split + 4);
      if (headers['transfer-encoding'] === 'chunked') body = body.replace(/([0-9a-f]+)\r\n([\s\S]*?)\r\n/gi, '$2');
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: Buffer.from(body, 'latin1').toString('utf8') });
    });
  });
}

/** Asserts that `p` rejects with the SDK's APIError of `status`, naming `param`. */
async function refused(p: Promise<unknown>, status: number, param: string | null, message?: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof OpenAI.APIError, `expected an APIError, got ${String(e)}`);
    assert.equal(e.status, status, e.message);
    assert.equal(e.param ?? null, param, e.message);
    if (message) assert.match(e.message, message);
    return true;
  });
}

test('SDK at localhost: models, chat streamed or not with the same text, include_usage, honest usage', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
  assert.equal((await client.models.retrieve(MODEL)).id, MODEL);
  await refused(client.models.retrieve('gpt-4'), 404, 'model');

  const whole = await client.chat.completions.create({ ...GREEDY, messages: story(), max_tokens: 24 });
  const text = whole.choices[0].message.content ?? '';
  assert.ok(text.length > 20, text);
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.deepEqual(whole.usage && [whole.usage.prompt_tokens, whole.usage.completion_tokens, whole.usage.total_tokens], [5, 24, 29]);

  const stream = await client.chat.completions.create({ ...GREEDY, messages: story(), max_tokens: 24, stream: true, stream_options: { include_usage: true } });
  let streamed = '';
  const chunks = [];
  for await (const c of stream) {
    chunks.push(c);
    streamed += c.choices[0]?.delta?.content ?? '';
  }
  assert.equal(streamed, text, 'streamed text = whole text');
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices, [], 'the usage chunk has no choices');
  assert.deepEqual(last.usage && [last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens], [5, 24, 29]);
  assert.equal(chunks.at(-2)!.choices[0].finish_reason, 'length');
});

test('/v1/completions: issue 9\'s --stop girl input, streamed or not, never shows text it takes back', async () => {
  const body = { ...GREEDY, prompt: 'Once upon a time', max_tokens: 30, stop: 'girl' };
  const whole = await client.completions.create(body);
  assert.equal(whole.choices[0].text, ', there was a little ');
  assert.equal(whole.choices[0].finish_reason, 'stop');
  const deltas: string[] = [];
  for await (const c of await client.completions.create({ ...body, stream: true })) deltas.push(c.choices[0]?.text ?? '');
  assert.equal(deltas.join(''), ', there was a little ', JSON.stringify(deltas));
  // At max context, prompt + completion never pass it (the token without a position is not generated).
  const full = await client.completions.create({ ...GREEDY, prompt: 'Once upon a time', max_tokens: 2000, stop: [], ...({ ignore_eos: true } as object) });
  assert.equal(full.choices[0].finish_reason, 'length');
  assert.equal(full.usage!.total_tokens, 512, 'prompt + completion = the max context, not one more');
});

test('sampling fields reach the sampler; -1 seed and top_p 0 accepted', async () => {
  const ask = (extra: Record<string, unknown>) =>
    client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 40, ...extra } as OpenAI.CompletionCreateParamsNonStreaming).then((r) => r.choices[0].text);
  const greedy = await ask({ temperature: 0 });
  assert.equal(await ask({ temperature: 1.5, top_k: 1, seed: 5 }), greedy, 'top_k 1 is greedy at any temperature');
  assert.equal(await ask({ temperature: 1.5, top_p: 0, seed: -1 }), greedy, 'top_p 0 keeps only the most likely token');
  assert.notEqual(await ask({ temperature: 0, presence_penalty: 2 }), greedy, 'presence_penalty changes the greedy text');
  assert.notEqual(await ask({ temperature: 0, frequency_penalty: 2 }), greedy, 'frequency_penalty changes the greedy text');
  assert.notEqual(await ask({ temperature: 0, repeat_penalty: 3 }), greedy, 'repeat_penalty changes the greedy text');
  const seeded = { temperature: 1, min_p: 0.1, seed: 42 };
  assert.equal(await ask(seeded), await ask(seeded), 'same seed, same text');
  await refused(ask({ top_p: 1.5 }), 400, 'top_p');
});

test('unsupported fields are refused with 400 and param; messages as clients send them', async () => {
  const chat = (extra: Record<string, unknown>, messages: unknown = story()) =>
    client.chat.completions.create({ ...GREEDY, max_tokens: 4, messages, ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  await refused(chat({ n: 2 }), 400, 'n');
  await refused(chat({ tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }), 400, 'tools');
  await refused(chat({ tool_choice: 'required' }), 400, 'tool_choice', /no tools/);
  await refused(chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } }), 400, 'response_format', /keyword "format"/);
  await refused(chat({ response_format: { type: 'xml' } }), 400, 'response_format.type');
  await refused(chat({ logprobs: 'yes' }), 400, 'logprobs');
  await refused(chat({}, [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }]), 400, 'messages[0].content[0].type', /only text content parts/);
  await refused(chat({}, [{ role: 'function', content: 'x', name: 'f' }]), 400, 'messages[0].role');
  await refused(chat({}, [{ role: 'tool', content: 'x' }]), 400, 'messages[0].tool_call_id');
  // Schema refusals name the field as clients write it, with the reason (not zod's "Invalid input").
  await refused(chat({ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }), 400, 'stop', /stop: .*<=16 items/);
  await refused(chat({}, [{ role: 'user', content: 5 }]), 400, 'messages[0].content', /messages\[0\]\.content: expected string or array or null/);
  const ok = await chat({ n: 1, response_format: { type: 'text' }, logprobs: false, user: 'u' });
  assert.equal(ok.choices.length, 1);

  const asSystem = await chat({}, [{ role: 'system', content: 'Be kind.' }, ...story()]);
  const asDeveloper = await chat({}, [{ role: 'developer', content: 'Be kind.' }, ...story()]);
  assert.equal(asDeveloper.usage?.prompt_tokens, asSystem.usage?.prompt_tokens, 'developer = system');
  assert.equal(asDeveloper.choices[0].message.content, asSystem.choices[0].message.content);
  const nullContent = await chat({}, [...story(), { role: 'assistant', content: null }, { role: 'user', content: 'Then?' }]);
  assert.equal(nullContent.choices.length, 1, 'an assistant message with content null is accepted');
  const parts = await chat({}, [{ role: 'user', content: [{ type: 'text', text: 'Once upon ' }, { type: 'text', text: 'a time' }] }]);
  assert.equal(parts.usage?.prompt_tokens, 5, 'text parts are joined');
});

test('a 6 MB prompt is refused at once with param "messages" and both numbers', async () => {
  const huge = 'Once upon a time there was a cat. '.repeat(180_000);
  await refused(client.chat.completions.create({ ...GREEDY, max_tokens: 4, messages: story(huge) }), 400, 'messages', /at least \d+ positions but the max context is 512/);
  // The count stopped early ("at least"), and the engine is free for the next request.
  const next = await client.chat.completions.create({ ...GREEDY, max_tokens: 2, messages: story() });
  assert.equal(next.choices[0].finish_reason, 'length');
});

test('Host: 127.0.0.1, localhost and [::1] with the port accepted; any other refused with an OpenAI JSON error', async () => {
  for (const host of [`127.0.0.1:${srv.port}`, `localhost:${srv.port}`, `[::1]:${srv.port}`, `LOCALHOST:${srv.port}`]) {
    assert.equal((await raw('GET', '/v1/models', { host })).status, 200, host);
  }
  for (const host of [`evil.example:${srv.port}`, `localhost:${srv.port + 1}`, 'localhost', `127.0.0.1.evil.example:${srv.port}`]) {
    const r = await raw('GET', '/v1/models', { host });
    assert.equal(r.status, 403, host);
    assert.equal(JSON.parse(r.body).error.code, 'forbidden_host');
  }
  const page = await raw('GET', '/', { host: `evil.example:${srv.port}` });
  assert.equal(page.status, 403);
});

test('a Host header that is empty, missing, doubled or malformed: 400 with the JSON error quoting it, and Connection: close (raw socket)', async () => {
  const port = srv.port;
  const cases: [string, string, string][] = [
    // [what, the request's header lines, what the message must say]
    ['empty', 'Host:\r\n', 'the Host header is empty'],
    ['blank', 'Host:   \r\n', 'the Host header is empty'],
    ['missing', '', 'no Host header'],
    ['doubled', `Host: 127.0.0.1:${port}\r\nHost: evil.example\r\n`, `2 Host headers ("127.0.0.1:${port}", "evil.example")`],
    ['a space inside', 'Host: a b\r\n', 'malformed Host header "a b"'],
    ['a control character', 'Host: \x01\r\n', 'malformed Host header "\\u0001"'],
  ];
  for (const path of ['/v1/models', '/']) {
    for (const [what, hostLines, says] of cases) {
      const r = await rawSocket(`GET ${path} HTTP/1.1\r\n${hostLines}Accept: application/json\r\n\r\n`);
      const label = `${what} Host on ${path}: ${r.status} ${JSON.stringify(r.headers)} ${r.body}`;
      assert.equal(r.status, 400, label);
      assert.match(r.headers['content-type'] ?? '', /^application\/json/, label);
      assert.equal(r.headers.connection, 'close', label);
      const error = JSON.parse(r.body).error;
      assert.deepEqual([error.type, error.code, error.param], ['invalid_request_error', 'invalid_host', null], label);
      assert.ok(error.message.includes(says), `${label}\nexpected the message to include ${says}`);
      assert.ok(error.message.includes(`127.0.0.1:${port}`), `${label}\nexpected the message to say what to send`);
    }
  }
  // The same connection handling answers a good request as before.
  const ok = await rawSocket(`GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
  assert.equal(ok.status, 200, ok.body);
  assert.equal(JSON.parse(ok.body).data[0].id, MODEL);
});

test('an empty prompt is refused with param naming the field, messages[0].content or prompt (was param null)', async () => {
  const chat = (messages: unknown) => client.chat.completions.create({ ...GREEDY, max_tokens: 4, messages } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  await refused(chat([{ role: 'user', content: '' }]), 400, 'messages[0].content', /^400 messages\[0\]\.content: the prompt is empty/);
  await refused(chat([{ role: 'user', content: [{ type: 'text', text: '' }] }]), 400, 'messages[0].content', /the prompt is empty/);
  await refused(chat([{ role: 'system', content: '' }, { role: 'user', content: '' }]), 400, 'messages[1].content', /the prompt is empty/);
  const complete = (prompt: unknown) => client.completions.create({ ...GREEDY, max_tokens: 4, prompt } as OpenAI.CompletionCreateParamsNonStreaming);
  await refused(complete(''), 400, 'prompt', /^400 prompt: the prompt is empty/);
  await refused(complete(['']), 400, 'prompt', /the prompt is empty/);
  // One empty message among others is a prompt.
  const ok = await chat([{ role: 'system', content: '' }, ...story()]);
  assert.equal(ok.choices.length, 1);
});

test('/detokenize: an id past the vocabulary (512) or negative is refused with param tokens[i] (512 said "tokens")', async () => {
  const detokenize = async (tokens: number[]) => {
    const res = await fetch(`http://127.0.0.1:${srv.port}/detokenize`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ tokens }) });
    return { status: res.status, error: ((await res.json()) as { error: { message: string; param: string | null; code: string } }).error };
  };
  const past = await detokenize([512]);
  assert.deepEqual([past.status, past.error.param, past.error.code], [400, 'tokens[0]', 'invalid_request'], past.error.message);
  assert.equal(past.error.message, 'tokens[0]: 512 is not a token id of this model (0 to 511)');
  const negative = await detokenize([-1]);
  assert.deepEqual([negative.status, negative.error.param, negative.error.code], [400, 'tokens[0]', 'invalid_request'], negative.error.message);
  assert.match(negative.error.message, /^tokens\[0\]: /);
  const third = await detokenize([1, 2, 600]);
  assert.equal(third.error.param, 'tokens[2]');
});

test('an absolute-form request target (RFC 9112 §3.2.2) for this server is routed by its path; for another server, 403 forbidden_host (raw socket)', async () => {
  const port = srv.port;
  const send = (target: string, host = `127.0.0.1:${port}`) => rawSocket(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  for (const authority of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
    const models = await send(`http://${authority}/v1/models`);
    assert.equal(models.status, 200, `${authority}: ${models.body}`);
    assert.equal(JSON.parse(models.body).data[0].id, MODEL);
  }
  const health = await send(`http://localhost:${port}/health?x=1`);
  assert.deepEqual([health.status, JSON.parse(health.body)], [200, { status: 'ok' }]);
  // The target's authority takes the Host's place (the RFC: the server ignores the Host then).
  const hostIgnored = await send(`http://127.0.0.1:${port}/v1/models`, 'evil.example');
  assert.equal(hostIgnored.status, 200, hostIgnored.body);
  const page = await send(`http://127.0.0.1:${port}/`);
  assert.equal(page.status, 200, 'the page too');
  for (const [target, named] of [[`http://evil.example:${port}/v1/models`, `evil.example:${port}`], [`http://127.0.0.1:${port + 1}/v1/models`, `127.0.0.1:${port + 1}`], [`http://evil.example/`, 'evil.example']]) {
    const r = await send(target);
    assert.equal(r.status, 403, `${target}: ${r.body}`);
    assert.match(r.headers['content-type'] ?? '', /^application\/json/);
    assert.deepEqual(JSON.parse(r.body).error, { message: `wrong Host "${named}"; use http://127.0.0.1:${port}/v1 or http://localhost:${port}/v1`, type: 'invalid_request_error', param: null, code: 'forbidden_host' });
  }
  for (const target of ['*', `https://127.0.0.1:${port}/v1/models`, `ftp://127.0.0.1:${port}/`]) {
    const r = await send(target);
    assert.equal(r.status, 400, `${target}: ${r.body}`);
    assert.equal(JSON.parse(r.body).error.code, 'invalid_request');
    assert.ok(JSON.parse(r.body).error.message.includes(JSON.stringify(target)), r.body);
  }
});

test('a queue, not 429: concurrent requests, one right after an aborted stream, and a client that leaves while queued', async () => {
  const long = { model: MODEL, messages: story(), max_tokens: 300, temperature: 1, seed: 1, ...({ ignore_eos: true } as object) };
  const answers = await Promise.all([0, 1, 2].map(() => client.chat.completions.create({ ...GREEDY, messages: story(), max_tokens: 8 })));
  assert.ok(answers.every((a) => a.choices[0].message.content === answers[0].choices[0].message.content), 'all three answered, the same greedy text');

  const ac = new AbortController();
  const stream = await client.chat.completions.create({ ...long, stream: true }, { signal: ac.signal });
  for await (const _ of stream) break; // the first chunk, then abort
  ac.abort();
  const after = await client.chat.completions.create({ ...GREEDY, messages: story(), max_tokens: 2 });
  assert.equal(after.choices[0].finish_reason, 'length', 'answered right after the abort');

  // A streamed answer holds the engine; a queued client that disconnects leaves the queue.
  const holder = new AbortController();
  const held = await client.chat.completions.create({ ...long, stream: true }, { signal: holder.signal });
  const iterator = held[Symbol.asyncIterator]();
  await iterator.next();
  const leaver = new AbortController();
  const queued = client.chat.completions.create({ ...GREEDY, messages: story(), max_tokens: 2 }, { signal: leaver.signal }).catch((e: unknown) => e);
  const waiting = (): number => backend.chat.waiting;
  for (let i = 0; i < 100 && waiting() < 1; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(waiting(), 1, 'the second request waits');
  leaver.abort();
  assert.ok((await queued) instanceof Error);
  for (let i = 0; i < 100 && waiting() !== 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(waiting(), 0, 'the client that left was dropped from the queue');

  // The window's answer waits in the same queue, says so, and Stop takes it out.
  const c = await backend.router.call('createConversation', {}) as { id: string };
  const waitingEvent = nextEvent(backend.router, 'answerWaiting', (d) => d.conversationId === c.id);
  const done = nextEvent(backend.router, 'answerDone', (d) => d.conversationId === c.id);
  await backend.router.call('sendMessage', { conversationId: c.id, content: 'Once upon a time' });
  assert.equal((await waitingEvent).ahead, 1);
  await backend.router.call('stopGeneration', { conversationId: c.id });
  const stopped = (await done).message;
  assert.deepEqual([stopped.status, stopped.content, stopped.stats], ['cancelled', '', null]);
  holder.abort();
});

test('/health, and CORS only for the --cors origin', async () => {
  const health = await raw('GET', '/health', { host: `localhost:${srv.port}` });
  assert.deepEqual([health.status, JSON.parse(health.body)], [200, { status: 'ok' }]);
  const noCors = await raw('OPTIONS', '/v1/chat/completions', { host: `localhost:${srv.port}`, origin: 'http://localhost:3000', 'access-control-request-method': 'POST' });
  assert.equal(noCors.headers['access-control-allow-origin'], undefined, 'CORS is off by default');
  assert.equal(noCors.status, 403);
  assert.match(JSON.parse(noCors.body).error.message, /may not call this API from a browser: CORS is off; start serve with --cors ORIGIN/);

  // A second server whose model is not loaded yet, allowing one origin.
  const loading = await startBackend({ dataDir: path.join(root, 'data2'), cacheDir, defaultModel: STORIES_BIN, loadModel: false });
  const other = await startServer({ router: loading.router, port: 0, staticDir: path.join(root, 'static'), completions: loading.completions, cors: 'http://localhost:3000' });
  try {
    const host = `127.0.0.1:${other.port}`;
    const notYet = await raw('GET', '/health', { host }, other.port);
    assert.deepEqual([notYet.status, JSON.parse(notYet.body).status], [503, 'loading']);
    const pre = await raw('OPTIONS', '/v1/chat/completions', { host, origin: 'http://localhost:3000', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,authorization' }, other.port);
    assert.equal(pre.status, 204);
    assert.equal(pre.headers['access-control-allow-origin'], 'http://localhost:3000');
    assert.match(String(pre.headers['access-control-allow-headers']), /authorization/);
    const models = await raw('GET', '/v1/models', { host, origin: 'http://localhost:3000' }, other.port);
    assert.equal(models.headers['access-control-allow-origin'], 'http://localhost:3000');
    const stranger = await raw('GET', '/v1/models', { host, origin: 'http://evil.example' }, other.port);
    assert.equal(stranger.headers['access-control-allow-origin'], undefined);
    const strangerPre = await raw('OPTIONS', '/v1/models', { host, origin: 'http://evil.example', 'access-control-request-method': 'GET' }, other.port);
    assert.equal(strangerPre.status, 403);
    assert.match(JSON.parse(strangerPre.body).error.message, /only http:\/\/localhost:3000 is allowed/);
  } finally {
    await other.close();
    await loading.dispose();
  }
});

test('the Local server: a taken port is reported in its state, not thrown; it restarts on a new port', async () => {
  const local = new LocalApiServer(backend.completions);
  const settings = backend.completions.settings();
  try {
    const taken = await local.apply({ ...settings, localServer: true, localServerPort: srv.port });
    assert.deepEqual([taken.status, taken.baseUrl], ['error', null]);
    assert.match(taken.error ?? '', new RegExp(`port ${srv.port} is in use`));
    const running = await local.apply({ ...settings, localServer: true, localServerPort: 0 });
    assert.equal(running.status, 'running');
    const port = Number(new URL(running.baseUrl!).port);
    const health = await raw('GET', '/health', { host: `localhost:${port}` }, port);
    assert.equal(health.status, 200);
    // The desktop app's server shares the Host rule and its JSON error.
    const empty = await rawSocket('GET /health HTTP/1.1\r\nHost:\r\n\r\n', port);
    assert.deepEqual([empty.status, empty.headers.connection, JSON.parse(empty.body).error.code], [400, 'close', 'invalid_host'], empty.body);
  } finally {
    await local.close();
  }
  assert.equal(local.state().status, 'off');
});
