/**
 * Log-probabilities on stories260K (real ONNX Runtime, both backends): each generated token's
 * logprob and top alternatives equal a log-softmax this test computes itself from the raw logits
 * of a second engine fed the same tokens (prefill, then one decode step per token), at
 * temperature 1 with top-k, top-p and a repetition penalty on, so the numbers are the model's,
 * not the sampler's. Then `serve` through the openai SDK: chat and legacy completions, streamed
 * and not, in OpenAI's shapes; top_logprobs over 20 and top_logprobs without logprobs refused.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, TokenLogprob } from '../../main/engine/generate/types.ts';
import { startApiServer, type ApiServer } from '../helpers/api-server.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-logprobs-'));
const cacheDir = path.join(root, 'cache');
let api: ApiServer | undefined;
after(async () => {
  await api?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Natural-log softmax of `logits` in float64, the textbook way: l_i − ln Σ_j e^{l_j} (stories' logits are small: no overflow). */
function logSoftmax(logits: Float32Array): Float64Array {
  let sum = 0;
  for (const l of logits) sum += Math.exp(l);
  return Float64Array.from(logits, (l) => l - Math.log(sum));
}

const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-4, `${what}: ${a} vs ${b}`);

for (const kind of ['js', 'native'] as const) {
  test(`engine (${kind}): logprobs and top 5 are the raw logits' log-softmax, before temperature and filters`, async () => {
    const engine = await Engine.load(STORIES_BIN, { cacheDir, backend: kind });
    const oracle = await Engine.load(STORIES_BIN, { cacheDir, backend: kind });
    try {
      const sampler = { temperature: 1.7, topK: 10, topP: 0.8, minP: 0, repetitionPenalty: 1.3, seed: 11 };
      let done: Extract<GenerationEvent, { type: 'done' }> | undefined;
      const streamed: number[] = [];
      for await (const ev of engine.generate({ prompt: 'Once upon a time', maxTokens: 12, sampler, logprobs: 5 })) {
        if (ev.type === 'token' && ev.logprob) streamed.push(ev.logprob.logprob);
        if (ev.type === 'done') done = ev;
      }
      assert.ok(done?.logprobs);
      assert.equal(done.logprobs.length, done.tokens.length);
      assert.deepEqual(streamed, done.logprobs.map((l) => l.logprob), 'token events carry the same numbers');
      let logits = await oracle.prefill(done.promptTokens);
      for (let i = 0; i < done.tokens.length; i++) {
        const ls = logSoftmax(logits);
        const lp: TokenLogprob = done.logprobs[i];
        assert.equal(lp.id, done.tokens[i]);
        close(lp.logprob, ls[lp.id], `step ${i} token ${lp.id}`);
        const order = [...ls.keys()].sort((a, b) => ls[b] - ls[a] || a - b).slice(0, 5);
        assert.deepEqual(lp.top.map((t) => t.id), order, `step ${i}: the 5 most likely`);
        lp.top.forEach((t, j) => close(t.logprob, ls[order[j]], `step ${i} top ${j}`));
        logits = await oracle.decodeStep(done.tokens[i]);
      }
    } finally {
      await engine.dispose();
      await oracle.dispose();
    }
  });
}

test('serve: the openai SDK gets logprobs on chat and completions, streamed and not, in OpenAI\'s shapes', async () => {
  api = await startApiServer(root, { cacheDir, defaultModel: STORIES_BIN });
  const client = new OpenAI({ baseURL: api.baseUrl, apiKey: 'x', maxRetries: 0 });
  const base = { model: 'stories260K', temperature: 0, max_tokens: 10 } as const;
  const messages = [{ role: 'user' as const, content: 'Once upon a time' }];

  const whole = await client.chat.completions.create({ ...base, messages, logprobs: true, top_logprobs: 3 });
  const content = whole.choices[0].logprobs?.content;
  assert.ok(content && content.length === whole.usage?.completion_tokens, JSON.stringify(whole.choices[0].logprobs));
  assert.equal(content.map((c) => c.token).join(''), whole.choices[0].message.content);
  for (const c of content) {
    assert.ok(c.logprob <= 0 && c.top_logprobs.length === 3);
    assert.deepEqual(Buffer.from(c.bytes!).toString('utf8'), c.token);
    assert.equal(c.top_logprobs[0].token, c.token, 'greedy: the chosen token is the most likely');
    assert.ok(c.top_logprobs.every((t, i) => i === 0 || t.logprob <= c.top_logprobs[i - 1].logprob));
  }

  const stream = await client.chat.completions.create({ ...base, messages, logprobs: true, top_logprobs: 3, stream: true });
  const streamed: number[] = [];
  for await (const chunk of stream) for (const c of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(c.logprob);
  // The same numbers, up to float32 rounding: this request reuses the prompt's KV cache (prefix
  // reuse), so its logits come from a shorter prefill than the first one's.
  assert.equal(streamed.length, content.length);
  streamed.forEach((l, i) => close(l, content[i].logprob, `streamed token ${i}`));

  const plain = await client.chat.completions.create({ ...base, messages });
  assert.equal(plain.choices[0].logprobs, null, 'none unless asked');

  const legacy = await client.completions.create({ ...base, prompt: 'Once upon a time', logprobs: 2 });
  const lp = legacy.choices[0].logprobs!;
  assert.equal(lp.tokens!.join(''), legacy.choices[0].text);
  assert.equal(lp.token_logprobs!.length, lp.tokens!.length);
  assert.ok(lp.top_logprobs!.every((t) => Object.keys(t).length <= 2));
  assert.deepEqual(lp.text_offset!.slice(0, 2), [0, lp.tokens![0].length]);
  const legacyStream = await client.completions.create({ ...base, prompt: 'Once upon a time', logprobs: 2, stream: true });
  const legacyStreamed: number[] = [];
  for await (const chunk of legacyStream) legacyStreamed.push(...(chunk.choices[0]?.logprobs?.token_logprobs ?? []));
  assert.equal(legacyStreamed.length, lp.token_logprobs!.length);
  legacyStreamed.forEach((l, i) => close(l, lp.token_logprobs![i], `streamed completion token ${i}`));

  for (const [extra, param] of [[{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'], [{ top_logprobs: 2 }, 'top_logprobs']] as const) {
    await assert.rejects(client.chat.completions.create({ ...base, messages, ...extra }), (e: unknown) => e instanceof OpenAI.APIError && e.status === 400 && e.param === param);
  }
});
