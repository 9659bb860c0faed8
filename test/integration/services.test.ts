/**
 * The services with real SQLite and the real engine (stories260K in its worker thread), through
 * the router exactly as the window calls them: streaming deltas (their batching is unit-tested), one answer at a
 * time, cancel mid-answer, the growing answer visible in SQLite from a second connection, a
 * killed worker restarted with the conversation intact, a corrupt model refused while the old
 * one keeps answering, the context budget (a draft that cannot fit is refused with CONTEXT_FULL),
 * the truncate-middle policy mid-answer (the context shifts, the first exchange kept),
 * settings checks, regenerate and edit, and the data surviving a restart.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import Database from 'better-sqlite3';
import type { ContextBudget, Message, ModelState, Settings } from '../../main/contract/types.ts';
import type { RequestOf, ResponseOf, MethodName } from '../../main/contract/channels.ts';
import { RouterError } from '../../main/composition/router.ts';
import { CRASH_MESSAGE } from '../../main/services/chat-service.ts';
import { startBackend, type Backend as Services } from '../../main/composition/start-backend.ts';
import { DB_FILE } from '../../main/services/store.ts';
import { makeBadModels, removeBadModels, type BadModels } from '../helpers/bad-models.ts';
import { GGUF_DIR, STORIES_BIN, STORIES_DIR } from '../helpers/paths.ts';
import { nextEvent, record, sleep } from '../helpers/router-events.ts';
import { until } from '../helpers/until.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-services-test-'));
const dataDir = path.join(root, 'data');
const cacheDir = path.join(root, 'cache');
let s: Services;
let bad: BadModels;

/** A typed router call, as the window makes it. */
function call<M extends MethodName>(method: M, payload: RequestOf<M>): Promise<ResponseOf<M>> {
  return s.router.call(method, payload) as Promise<ResponseOf<M>>;
}

const rejectsWith = (code: string, text?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof RouterError, `expected a RouterError, got ${String(e)}`);
  assert.equal(e.code, code, e.message);
  if (text) assert.match(e.message, text);
  return true;
};

/** Sends and waits for the answer's answerDone. */
async function sendAndWait(conversationId: string, content: string): Promise<{ sent: ResponseOf<'sendMessage'>; done: Message }> {
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === conversationId);
  const sent = await call('sendMessage', { conversationId, content });
  return { sent, done: (await done).message };
}

/** Settings that make stories260K write a long answer: greedy with a strong repetition bonus never picks EOS. */
const LONG_ANSWER: Partial<Settings> = { maxContext: 16384, maxTokens: 12000, temperature: 0, repetitionPenalty: 0.1 };

before(async () => {
  bad = await makeBadModels();
  // The CPU, as `serve --ep cpu` sets it: the default, auto, depends on the machine and says so
  // in the model's note, which the notes checked here would carry (auto itself: ep-choice.test.ts).
  s = await startBackend({ dataDir, cacheDir, defaultModel: STORIES_BIN, executionProvider: 'cpu' });
  await s.modelLoaded;
});
after(async () => {
  await s?.dispose();
  await removeBadModels(bad);
  rmSync(root, { recursive: true, force: true });
});

test('on start the embedded model loads with no setup; defaults follow its trained context; an empty chat uses 0', async () => {
  const m = await call('getModel', {});
  assert.equal(m.status, 'ready', JSON.stringify(m));
  assert.equal(m.info?.name, 'stories260K');
  assert.equal(m.info?.maxContext, 512);
  const st = await call('getSettings', {});
  assert.deepEqual(st, {
    maxContext: 512,
    maxTokens: 128, // min(256, 512 / 4): room for a few exchanges in a 512-position model
    temperature: 0.8,
    topK: 40,
    topP: 0.95,
    minP: 0.05,
    repetitionPenalty: 1,
    seed: null,
    systemPrompt: '',
    systemPromptPresets: [],
    contextFullPolicy: 'stop',
    kvCacheBudgetMiB: 1024,
    executionProvider: 'cpu', // set at start (the default is auto: settings-service.test.ts)
    backend: 'native',
    threads: 0, // ONNX Runtime's default: one per physical core
    kvCacheDtype: 'float16', // graph-target.ts DEFAULT_KV_CACHE_DTYPE: half float32's KV bytes at no decode cost on the native backend
    localServer: false, // the desktop app's Local server is off by default
    localServerPort: 8756,
    localServerCors: '',
    modelsFolder: '',
  });
  assert.equal(m.info?.backend, 'native', String(m.info?.fallbackReason));
  assert.deepEqual(await call('getLocalServer', {}), { status: 'unavailable', baseUrl: null, error: null }, 'no local server outside the desktop app');
  const b = await call('getBudget', { conversationId: null, draft: '' });
  assert.deepEqual({ ...b, rope: null, kv: null }, { conversationId: null, maxContext: 512, system: 0, documents: 0, history: 0, draft: 0, reserve: 128, used: 0, total: 128, fits: true, rope: null, kv: null, outOfContext: [], droppedTokens: 0, estimated: false });
  const c = await call('createConversation', {});
  const empty = await call('getBudget', { conversationId: c.id, draft: '' });
  assert.equal(empty.used, 0);
  const drafted = await call('getBudget', { conversationId: c.id, draft: 'Once upon a time' });
  assert.ok(drafted.draft > 0 && drafted.used === drafted.draft, JSON.stringify(drafted));
});

test('streaming: answerDelta events that add up to the answer, prefill progress, answerDone with stats, the answer in SQLite; one answer at a time', async () => {
  await call('updateSettings', { seed: 1 });
  const c = await call('createConversation', {});
  const rec = record(s.router);
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === c.id);
  const sent = await call('sendMessage', { conversationId: c.id, content: 'Once upon a time' });
  assert.equal(sent.userMessage.content, 'Once upon a time');
  assert.equal(sent.assistantMessage.status, 'streaming');
  await assert.rejects(call('sendMessage', { conversationId: c.id, content: 'again' }), rejectsWith('BUSY', /an answer is already being generated/));
  const other = await call('createConversation', {});
  await assert.rejects(call('sendMessage', { conversationId: other.id, content: 'elsewhere' }), rejectsWith('BUSY'));
  const final = (await done).message;
  await sleep(50);
  rec.stop();

  assert.equal(final.id, sent.assistantMessage.id);
  assert.equal(final.status, 'complete');
  assert.ok(final.stats, 'stats are set');
  assert.ok(final.stats.generatedTokens >= 50, `a long enough answer: ${final.stats.generatedTokens} tokens`);
  assert.ok(['length', 'stop'].includes(final.stats.finishReason));
  assert.equal(final.stats.promptTokens, 5);
  assert.ok(final.stats.decodeTokensPerSec > 0 && final.stats.ttftMs > 0);

  const deltas = rec.events.filter((e) => e.event === 'answerDelta' && (e.data as { messageId: string }).messageId === final.id);
  const texts = deltas.map((d) => (d.data as { text: string }).text);
  assert.equal(texts.join(''), final.content, 'the deltas add up to the answer');
  // Their spacing (≥ DELTA_INTERVAL_MS) is DeltaBatcher's, tested on an injected clock in
  // test/unit/answer-stream.test.ts: here only that the service streams through it.
  assert.ok(deltas.length >= 1 && texts.every((t) => t.length > 0), `${deltas.length} non-empty events`);
  const counts = deltas.map((d) => (d.data as { generatedTokens: number }).generatedTokens);
  assert.ok(counts.every((n, i) => i === 0 || n >= counts[i - 1]), 'generatedTokens only grows');

  const prefill = rec.of('answerPrefill').filter((p) => p.messageId === final.id);
  assert.deepEqual(prefill.at(-1), { conversationId: c.id, messageId: final.id, processed: 5, total: 5 });
  const budgets = rec.of('budgetChanged').filter((b) => b.conversationId === c.id);
  assert.equal(budgets[0].history, 5, 'right after send the user message counts as history');
  assert.equal(budgets[0].draft, 0);
  const recounted = await call('getBudget', { conversationId: c.id, draft: '' });
  assert.equal(recounted.history, 5 + final.stats.generatedTokens);
  assert.ok(rec.of('conversationsChanged').some((e) => e.conversations.some((x) => x.id === c.id && x.title === 'Once upon a time')), 'the title comes from the first message');

  const stored = await call('getConversation', { id: c.id });
  assert.deepEqual(stored.messages.map((m) => [m.role, m.status]), [['user', 'complete'], ['assistant', 'complete']]);
  assert.deepEqual(stored.messages[1], final);
  assert.equal((await call('getConversation', { id: other.id })).messages.length, 0, 'a refused send stores nothing');
});

test('cancel mid-answer: stop after the first delta ends the answer as cancelled, the partial text kept in SQLite', async () => {
  // A long answer (12,000 tokens at most, no early end), so the stop cannot lose a race with the
  // answer's own end however slow the machine: 128 tokens of stories260K take tens of ms, and a
  // loaded machine delivered the first delta after the last token (finish 'length', not 'cancelled').
  const saved = await call('getSettings', {});
  await call('updateSettings', LONG_ANSWER);
  try {
    const c = await call('createConversation', {});
    const first = nextEvent(s.router, 'answerDelta', (d) => d.conversationId === c.id);
    const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === c.id);
    await call('sendMessage', { conversationId: c.id, content: 'Once upon a time' });
    await first;
    assert.equal(await call('stopGeneration', { conversationId: c.id }), null);
    const msg = (await done).message;
    assert.equal(msg.status, 'cancelled');
    assert.equal(msg.stats?.finishReason, 'cancelled');
    assert.ok(msg.content.length > 0 && msg.stats.generatedTokens < LONG_ANSWER.maxTokens!, `${msg.stats?.generatedTokens} tokens`);
    const stored = (await call('getConversation', { id: c.id })).messages[1];
    assert.equal(stored.status, 'cancelled');
    assert.equal(stored.content, msg.content);
    assert.equal(await call('stopGeneration', { conversationId: c.id }), null, 'stopping nothing is fine');
  } finally {
    await call('updateSettings', { maxContext: saved.maxContext, maxTokens: saved.maxTokens, temperature: saved.temperature, repetitionPenalty: saved.repetitionPenalty });
  }
});

test('a stop that arrives right behind the send (its budget still counted) keeps the message and stores the answer stopped', async () => {
  const c = await call('createConversation', {});
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === c.id);
  // Both requests in one turn, as an Escape right after Enter sends them.
  const sent = call('sendMessage', { conversationId: c.id, content: 'Once upon a time' });
  const stopped = call('stopGeneration', { conversationId: c.id });
  const { userMessage } = await sent;
  assert.equal(await stopped, null);
  const msg = (await done).message;
  assert.equal(msg.status, 'cancelled');
  assert.equal(msg.content, '', 'stopped before its first token');
  const stored = (await call('getConversation', { id: c.id })).messages;
  assert.deepEqual(stored.map((m) => [m.role, m.status]), [['user', 'complete'], ['assistant', 'cancelled']]);
  assert.equal(stored[0].id, userMessage.id);
  const next = await sendAndWait(c.id, 'Tom had a ball');
  assert.equal(next.done.status, 'complete', 'the next send works');
});

test('budget: a draft that cannot fit says fits=false and Send refuses it with CONTEXT_FULL, storing nothing', async () => {
  const c = await call('createConversation', {});
  const long = 'the cat sat on the mat and looked at the dog. '.repeat(40);
  const b = await call('getBudget', { conversationId: c.id, draft: long });
  assert.equal(b.fits, false);
  assert.ok(b.draft > 256 && b.total === b.used + b.reserve && b.total > b.maxContext, JSON.stringify(b));
  await assert.rejects(call('sendMessage', { conversationId: c.id, content: long }), rejectsWith('CONTEXT_FULL', new RegExp(`${b.total}.*max context of 512`)));
  const after = await call('getConversation', { id: c.id });
  assert.equal(after.messages.length, 0);
  assert.equal(after.title, 'New chat');
  // No crash: the engine still counts and answers.
  assert.equal((await call('getBudget', { conversationId: c.id, draft: 'hi' })).fits, true);
  await assert.rejects(call('getBudget', { conversationId: 'no-such-id', draft: '' }), rejectsWith('NOT_FOUND'));
  await assert.rejects(call('updateSettings', { maxTokens: 600 }), rejectsWith('INVALID_REQUEST', /max tokens \(600\).*max context \(512\)/));
  assert.equal((await call('getSettings', {})).maxTokens, 128, 'a refused change changes nothing');
});

test('budget: the CONTEXT_FULL refusal suggests raising Max context only below the trained context (512), with the bound', async () => {
  const c = await call('createConversation', {});
  const long = 'the cat sat on the mat and looked at the dog. '.repeat(40);
  // At 512, stories260K's trained context: a larger max context costs quality, so it is not the advice.
  await assert.rejects(call('sendMessage', { conversationId: c.id, content: long }), (e: unknown) => {
    assert.ok(e instanceof RouterError && e.code === 'CONTEXT_FULL', String(e));
    assert.doesNotMatch(e.message, /raise/i);
    assert.match(e.message, /max context of 512; shorten it, lower Max new tokens, or start a new conversation \(the max context is already the model's trained context, 512; past it answers lose quality\)$/);
    return true;
  });
  await call('updateSettings', { maxContext: 256 });
  try {
    await assert.rejects(
      call('sendMessage', { conversationId: c.id, content: long }),
      rejectsWith('CONTEXT_FULL', /max context of 256; shorten it, lower Max new tokens, raise Max context in Settings \(up to the model's trained context, 512\), or start a new conversation$/),
    );
  } finally {
    await call('updateSettings', { maxContext: 512 });
  }
  assert.equal((await call('getConversation', { id: c.id })).messages.length, 0, 'nothing stored');
});

test('budget: concurrent requests for one conversation are coalesced to the latest draft', async () => {
  const c = await call('createConversation', {});
  const drafts = ['a', 'a b', 'a b c', 'a b c d', 'a b c d e f g h'];
  const results = await Promise.all(drafts.map((draft) => call('getBudget', { conversationId: c.id, draft })));
  const latest = await call('getBudget', { conversationId: c.id, draft: drafts.at(-1)! });
  assert.ok(results.slice(1).every((r) => r.draft === latest.draft), `coalesced: ${results.map((r) => r.draft).join(' ')}`);
  const system = await call('updateSettings', { systemPrompt: 'You tell stories.' });
  assert.equal(system.systemPrompt, 'You tell stories.');
  const withSystem = await call('getBudget', { conversationId: c.id, draft: '' });
  assert.ok(withSystem.system > 0 && withSystem.history === 0 && withSystem.used === withSystem.system, JSON.stringify(withSystem));
  await call('updateSettings', { systemPrompt: '' });
});


test('persistence: a streaming answer is in SQLite as it grows (second connection), then kept on stop', async () => {
  const changed = await call('updateSettings', LONG_ANSWER);
  assert.equal(changed.maxContext, 16384);
  assert.equal((await call('getModel', {})).info?.maxContext, 16384, 'a new max context reloads the model');
  const longChat = await call('createConversation', {});
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === longChat.id);
  const { assistantMessage } = await call('sendMessage', { conversationId: longChat.id, content: 'Once upon a time' });
  await assert.rejects(call('updateSettings', { maxContext: 32768 }), rejectsWith('BUSY'), 'no reload under a running answer');
  await assert.rejects(call('openModel', { path: STORIES_BIN }), rejectsWith('BUSY'));
  assert.equal((await call('updateSettings', { topK: 41 })).topK, 41, 'settings that need no reload still change');
  // The periodic save (about every second): wait until a second connection sees the growing text.
  const reader = new Database(path.join(dataDir, DB_FILE), { readonly: true });
  let row: { content: string; status: string } | undefined;
  try {
    const read = reader.prepare('SELECT content, status FROM messages WHERE id = ?');
    await until('the streaming answer has text in SQLite', () => {
      row = read.get(assistantMessage.id) as typeof row;
      return (row?.content.length ?? 0) > 0;
    }, 10_000);
  } finally {
    reader.close();
  }
  assert.equal(row?.status, 'streaming');
  assert.ok(row && row.content.length > 0, 'the partial answer is saved while it streams');
  const live = (await call('getConversation', { id: longChat.id })).messages[1];
  assert.ok(live.content.startsWith(row.content) && live.content.length >= row.content.length, 'getConversation shows the text sent so far');
  await call('stopGeneration', { conversationId: longChat.id });
  const msg = (await done).message;
  assert.equal(msg.status, 'cancelled');
  assert.ok(msg.content.startsWith(row.content));
});

test('a killed worker ends the answer as an error with its text kept; the conversation is intact and the next send works', async () => {
  // A conversation of its own: one short exchange, then a long answer to kill.
  await call('updateSettings', { ...LONG_ANSWER, maxTokens: 16 });
  const longChat = await call('createConversation', {});
  assert.equal((await sendAndWait(longChat.id, 'Once upon a time')).done.status, 'complete');
  await call('updateSettings', { maxTokens: LONG_ANSWER.maxTokens });
  const before = (await call('getConversation', { id: longChat.id })).messages;
  const firstDelta = nextEvent(s.router, 'answerDelta', (d) => d.conversationId === longChat.id);
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === longChat.id);
  await call('sendMessage', { conversationId: longChat.id, content: 'The next day' });
  await firstDelta;
  // A second delta: some text has streamed before the kill.
  await nextEvent(s.router, 'answerDelta', (d) => d.conversationId === longChat.id);
  const crashes = s.host.crashes;
  await s.host.killWorker();
  const msg = (await done).message;
  assert.equal(s.host.crashes, crashes + 1);
  assert.equal(msg.status, 'error');
  assert.equal(msg.error, CRASH_MESSAGE);
  assert.ok(msg.content.length > 0, 'the partial answer is kept');

  const now = (await call('getConversation', { id: longChat.id })).messages;
  assert.deepEqual(now.slice(0, before.length), before, 'earlier messages are intact');
  assert.deepEqual(now.slice(before.length).map((m) => [m.role, m.status]), [['user', 'complete'], ['assistant', 'error']]);
  assert.equal(now.at(-1)!.content, msg.content);

  await call('updateSettings', { maxTokens: 16 });
  const next = await sendAndWait(longChat.id, 'Then');
  assert.equal(next.done.status, 'complete');
  assert.equal(next.done.stats?.generatedTokens, 16);
  const m = await call('getModel', {});
  assert.equal(m.status, 'ready');
  assert.equal(m.info?.maxContext, 16384, 'the restarted worker has the same model and options');
});

test('the backend setting reloads the model on that backend, with the same greedy answer', async () => {
  await call('updateSettings', { maxContext: 512, maxTokens: 12, temperature: 0, seed: null });
  const answers: string[] = [];
  for (const backend of ['js', 'native'] as const) {
    await call('updateSettings', { backend });
    assert.equal((await call('getModel', {})).info?.backend, backend);
    const c = await call('createConversation', {});
    answers.push((await sendAndWait(c.id, 'Once upon a time')).done.content);
  }
  assert.equal(answers[1], answers[0]);
  assert.ok(answers[0].length > 0);
});

test('a corrupt model is refused with a readable reason; the old model stays loaded and still answers', async () => {
  await call('updateSettings', { maxContext: 512, maxTokens: 32, temperature: 0.8, repetitionPenalty: 1 });
  const garbageHf = path.join(root, 'garbage-hf');
  mkdirSync(garbageHf);
  writeFileSync(path.join(garbageHf, 'config.json'), '{ this is not json');
  for (const source of [bad.truncated, garbageHf, bad.notAModel]) {
    const states: ModelState[] = [];
    const off = s.router.onEvent((e, d) => e === 'modelState' && states.push(d as ModelState));
    await assert.rejects(call('openModel', { path: source }), (e: unknown) => {
      assert.ok(e instanceof RouterError);
      assert.equal(e.code, 'MODEL_LOAD', e.message);
      assert.ok(e.message.length > 10 && !e.message.includes('\n'), e.message);
      return true;
    });
    off();
    const m = await call('getModel', {});
    assert.equal(m.info?.name, 'stories260K', 'the old model is still the one loaded');
    assert.equal(m.status, 'ready');
    assert.ok(m.error && m.error.length > 0, 'the state says why');
    assert.equal(states[0].status, 'loading');
    assert.deepEqual(states.at(-1), m);
  }
  const c = await call('createConversation', {});
  const { done } = await sendAndWait(c.id, 'Once upon a time');
  assert.equal(done.status, 'complete');
  assert.ok(done.content.length > 0);
});

test('openModel of a good folder reports progress and clears the error', async () => {
  const states: ModelState[] = [];
  const off = s.router.onEvent((e, d) => e === 'modelState' && states.push(d as ModelState));
  const m = await call('openModel', { path: STORIES_DIR });
  off();
  assert.equal(m.status, 'ready');
  assert.equal(m.error, null);
  // The engine's own phases come through: 'hash', or 'cached' when the model cache finds the
  // bundle by the files' fingerprint without hashing (bundle.ts).
  assert.ok(states.some((x) => x.status === 'loading' && x.progress && ['hash', 'cached'].includes(x.progress.phase)), JSON.stringify(states));
});

test('openModel with quantize: the float checkpoint loads as 8-bit blocks, remembered with its path (kept by a settings reload and the next start); other values are refused', async () => {
  const q8 = await call('openModel', { path: STORIES_BIN, quantize: 'q8' });
  assert.match(q8.info?.weights.formats ?? '', /q8 \(rtn\)/, JSON.stringify(q8.info?.weights));
  assert.deepEqual([s.store.getSettings()['model.path'], s.store.getSettings()['model.quantize']], [STORIES_BIN, 'q8']);
  const { maxContext, maxTokens } = await call('getSettings', {});
  await call('updateSettings', { maxContext: 256, maxTokens: 32 });
  await s.models.ready();
  const reloaded = await call('getModel', {});
  assert.equal(reloaded.info?.maxContext, 256);
  assert.equal(reloaded.info?.weights.formats, q8.info?.weights.formats, 'the reload keeps the quantized bundle');
  await call('updateSettings', { maxContext, maxTokens });
  await s.models.ready();
  // The next start loads the remembered model with its quantization.
  await s.dispose();
  s = await startBackend({ dataDir, cacheDir, defaultModel: STORIES_BIN });
  await s.modelLoaded;
  assert.equal((await call('getModel', {})).info?.weights.formats, q8.info?.weights.formats, 'restarted with the quantized bundle');
  await assert.rejects(call('openModel', { path: STORIES_BIN, quantize: 'q3' as never }), rejectsWith('INVALID_REQUEST'));
  // Opened again without a choice: the weights choice remembered for this model (model-profiles.ts).
  const again = await call('openModel', { path: STORIES_BIN });
  assert.equal(again.info?.weights.formats, q8.info?.weights.formats, 'the remembered q8');
  const plain = await call('openModel', { path: STORIES_BIN, quantize: null });
  assert.doesNotMatch(plain.info?.weights.formats ?? '', /q8/);
  assert.equal(s.store.getSettings()['model.quantize'], undefined);
});

test('openModel with quantize on an already-quantized GGUF: its blocks as stored, and the model panel gets the same note as the CLI', async () => {
  const m = await call('openModel', { path: path.join(GGUF_DIR, 'stories260K-q8_0.gguf'), quantize: 'q4' });
  assert.equal(m.status, 'ready', String(m.error));
  assert.equal(m.info?.fallbackReason, 'q4 quantization ignored: stories260K-q8_0.gguf is already quantized (Q8_0); its blocks are used as stored');
  assert.match(m.info?.weights.formats ?? '', /q8 \(Q8_0\)/);
  assert.doesNotMatch(m.info?.weights.formats ?? '', /rtn/);
  const plain = await call('openModel', { path: STORIES_BIN });
  assert.equal(plain.info?.fallbackReason, null);
});

test('regenerate and edit keep the earlier versions as branches; selectBranch switches, and the budget follows the path', async () => {
  const c = await call('createConversation', {});
  const first = await sendAndWait(c.id, 'Once upon a time');
  const regenDone = nextEvent(s.router, 'answerDone', (d) => d.conversationId === c.id);
  const { assistantMessage } = await call('regenerate', { conversationId: c.id });
  assert.notEqual(assistantMessage.id, first.done.id);
  assert.deepEqual(assistantMessage.branches, [first.done.id, assistantMessage.id], 'the answer knows its versions at once');
  await regenDone;
  let msgs = (await call('getConversation', { id: c.id })).messages;
  assert.deepEqual(msgs.map((m) => m.id), [first.sent.userMessage.id, assistantMessage.id]);

  await sendAndWait(c.id, 'The end');
  const editDone = nextEvent(s.router, 'answerDone', (d) => d.conversationId === c.id);
  const edited = await call('editMessage', { conversationId: c.id, messageId: first.sent.userMessage.id, content: 'A dragon lived in a cave' });
  assert.equal(edited.userMessage.content, 'A dragon lived in a cave');
  assert.deepEqual(edited.userMessage.branches, [first.sent.userMessage.id, edited.userMessage.id]);
  await editDone;
  const conv = await call('getConversation', { id: c.id });
  msgs = conv.messages;
  assert.deepEqual(msgs.map((m) => m.id), [edited.userMessage.id, edited.assistantMessage.id]);
  assert.equal(conv.title, 'A dragon lived in a cave', 'the automatic title follows an edit of the first message');

  // Back to the first version: its newest line (the regenerated answer, "The end" and its answer).
  const editedBudget = await call('getBudget', { conversationId: c.id, draft: '' });
  const back = await call('selectBranch', { conversationId: c.id, messageId: first.sent.userMessage.id });
  assert.deepEqual(
    back.messages.map((m) => (m.role === 'user' ? m.content : m.id)),
    ['Once upon a time', assistantMessage.id, 'The end', back.messages[3].id],
    'the first question, the regenerated answer, then what followed it',
  );
  const backBudget = await call('getBudget', { conversationId: c.id, draft: '' });
  assert.ok(backBudget.history > editedBudget.history, `the budget counts the chosen path (${backBudget.history} vs ${editedBudget.history} tokens)`);
  await assert.rejects(call('selectBranch', { conversationId: c.id, messageId: 'nope' }), rejectsWith('NOT_FOUND'));

  await assert.rejects(call('editMessage', { conversationId: c.id, messageId: assistantMessage.id, content: 'x' }), rejectsWith('INVALID_REQUEST'));
  await assert.rejects(call('editMessage', { conversationId: c.id, messageId: 'nope', content: 'x' }), rejectsWith('NOT_FOUND'));
  const empty = await call('createConversation', {});
  await assert.rejects(call('regenerate', { conversationId: empty.id }), rejectsWith('NOTHING_TO_REGENERATE'));
});

test('importConversation: an exported conversation comes back with its messages and stats', async () => {
  const stats = { finishReason: 'stop' as const, promptTokens: 3, generatedTokens: 5, reusedTokens: 0, ttftMs: 12, prefillTokensPerSec: 100, decodeTokensPerSec: 50 };
  const c = await call('importConversation', {
    title: 'Imported',
    messages: [
      { role: 'user', content: 'Hi', status: 'complete', stats: null, error: null },
      { role: 'assistant', content: 'Hello there', status: 'complete', stats, error: null },
    ],
  });
  const again = await call('getConversation', { id: c.id });
  assert.equal(again.title, 'Imported');
  assert.deepEqual(again.messages.map((m) => [m.role, m.content, m.stats]), [['user', 'Hi', null], ['assistant', 'Hello there', stats]]);
  await assert.rejects(call('importConversation', { title: 'x', messages: [{ role: 'robot', content: 'x', status: 'complete', stats: null, error: null }] } as never), rejectsWith('INVALID_REQUEST'));
});

test('truncate middle mid-answer: a long answer shifts instead of ending, the first exchange stays at the start of the KV cache (the next answer reuses it)', async (t) => {
  await call('updateSettings', { maxContext: 128, maxTokens: 16, temperature: 0, repetitionPenalty: 0.1, seed: null, contextFullPolicy: 'truncate-middle' });
  try {
    const c = await call('createConversation', {});
    const first = (await sendAndWait(c.id, 'Once upon a time, there was a little girl named Lily.')).done;
    assert.equal(first.status, 'complete', first.error ?? '');
    assert.equal(first.stats!.contextShift, undefined, 'the first answer fits');
    // BOS, the first question and its answer, as the next prompts hold them.
    const firstExchange = (await call('getBudget', { conversationId: c.id, draft: '' })).used;
    await call('updateSettings', { maxTokens: 100 });
    const question = 'What did Lily do the next day?';
    const b = await call('getBudget', { conversationId: c.id, draft: question });
    assert.ok(b.total > 128 && b.used < 128, `the reply reserve passes the max context: ${JSON.stringify(b)}`);
    assert.equal(b.fits, true, 'truncate middle takes it: the answer will shift');
    const long = (await sendAndWait(c.id, question)).done;
    assert.equal(long.status, 'complete', long.error ?? '');
    const st = long.stats!;
    assert.equal(st.finishReason, 'length', 'the answer went on to max tokens instead of ending at context-full');
    assert.equal(st.generatedTokens, 100);
    assert.ok(st.promptTokens + st.generatedTokens > 128, `${st.promptTokens} + ${st.generatedTokens} positions`);
    assert.ok(st.contextShift && st.contextShift.shifts >= 1 && st.contextShift.droppedTokens > 0, `the stats report the shift: ${JSON.stringify(st.contextShift)}`);
    // Each shift drops only what came after the first exchange (the second question, then the answer's oldest tokens).
    assert.ok(st.contextShift.droppedTokens <= st.promptTokens + st.generatedTokens - firstExchange, `dropped ${st.contextShift.droppedTokens}`);

    // The next prompt (truncate middle leaves the long exchange out) starts with the first exchange,
    // and the engine serves it from the KV cache: the shift left those tokens at its start.
    await call('updateSettings', { maxTokens: 8 });
    const after = await call('getBudget', { conversationId: c.id, draft: 'Where did she go?' });
    assert.equal(after.outOfContext.length, 2, 'the long exchange is left out of the next prompt');
    const next = (await sendAndWait(c.id, 'Where did she go?')).done;
    assert.equal(next.status, 'complete', next.error ?? '');
    t.diagnostic(`first exchange ${firstExchange} tokens; the long answer: prompt ${st.promptTokens}, ${st.contextShift.shifts} shift(s), ${st.contextShift.droppedTokens} dropped; the next answer reused ${next.stats!.reusedTokens} of ${next.stats!.promptTokens}`);
    assert.ok(next.stats!.reusedTokens >= firstExchange, `reused ${next.stats!.reusedTokens} tokens, the first exchange has ${firstExchange}`);
  } finally {
    await call('updateSettings', { maxContext: 512, maxTokens: 16, temperature: 0.8, repetitionPenalty: 1, contextFullPolicy: 'stop' });
  }
});

test('truncate middle mid-answer, the first answer running long (no turn after the first exchange): it shifts as rolling window does', async () => {
  await call('updateSettings', { maxContext: 128, maxTokens: 100, temperature: 0, repetitionPenalty: 0.1, seed: null, contextFullPolicy: 'truncate-middle' });
  try {
    const question = 'Once upon a time, there was a big dog named Max. Max liked to run and jump in the garden.';
    const answers: Message[] = [];
    for (const policy of ['truncate-middle', 'rolling-window'] as const) {
      const c = await call('createConversation', {});
      await call('setConversationPolicy', { id: c.id, policy });
      const { done } = await sendAndWait(c.id, question);
      assert.equal(done.status, 'complete', done.error ?? '');
      answers.push(done);
    }
    const [truncated, rolled] = answers.map((m) => m.stats!);
    assert.equal(truncated.finishReason, 'length', 'the answer went on instead of ending at context-full');
    assert.ok(truncated.contextShift && truncated.contextShift.shifts >= 1, JSON.stringify(truncated));
    // The same kept prefix (BOS: no system prompt) and so the same cuts and the same greedy text.
    assert.deepEqual(truncated.contextShift, rolled.contextShift);
    assert.equal(answers[0].content, answers[1].content);
  } finally {
    await call('updateSettings', { maxContext: 512, maxTokens: 16, temperature: 0.8, repetitionPenalty: 1, contextFullPolicy: 'stop' });
  }
});

test('rename, search and delete (cascade) through the router; the data survives a restart', async () => {
  const c = await call('createConversation', { title: 'Keep me' });
  await sendAndWait(c.id, 'Hello');
  const renamed = await call('renameConversation', { id: c.id, title: 'Kept 100%' });
  assert.equal(renamed.title, 'Kept 100%');
  assert.deepEqual((await call('listConversations', { search: '100%' })).map((x) => x.id), [c.id]);
  const doomed = await call('createConversation', { title: 'Doomed' });
  await sendAndWait(doomed.id, 'Bye');
  assert.equal(await call('deleteConversation', { id: doomed.id }), null);
  await assert.rejects(call('getConversation', { id: doomed.id }), rejectsWith('NOT_FOUND'));
  await assert.rejects(call('renameConversation', { id: c.id, title: '   ' }), rejectsWith('INVALID_REQUEST'));

  const before = await call('getConversation', { id: c.id });
  const settingsBefore = await call('getSettings', {});
  // The model opened last is loaded again at start; one that has become unloadable falls back to the embedded one.
  s.store.setSettings({ 'model.path': bad.truncated });
  await s.dispose();
  s = await startBackend({ dataDir, cacheDir, defaultModel: STORIES_BIN });
  await s.modelLoaded;
  assert.deepEqual(await call('getConversation', { id: c.id }), before);
  assert.deepEqual(await call('getSettings', {}), settingsBefore);
  const m = await call('getModel', {});
  assert.equal(m.status, 'ready');
  assert.equal(m.info?.name, 'stories260K');
  assert.match(m.error ?? '', /could not be loaded.*embedded model is loaded instead/);
  const budget: ContextBudget = await call('getBudget', { conversationId: c.id, draft: '' });
  assert.ok(budget.history > 0, `history ${budget.history}`);
  // A fresh start has run only the load's warm-up (one BOS position, to measure where ONNX Runtime
  // placed the nodes): the lazily grown KV cache has room for that one position and no more —
  // stories260K's 5 layers × 4 KV heads × head size 8, keys and values, float16 (the default KV cache).
  assert.deepEqual(budget.kv, { capacity: 1, bytes: 2 * 5 * 4 * 8 * 2 });
});
