/**
 * Documents through the services, as the window uses them (router calls), with real SQLite and
 * the real engine (stories260K): attach (extracted, stored once per content, counted), typed
 * errors naming the file with nothing stored, the budget's documents segment matching the prompt
 * the engine is then fed, chips on the user message, the text opened again, a follow-up that
 * reuses the document's KV cache, "use the relevant parts" for a document that does not fit
 * (BM25 picks the section the question is about), and documents deleted with their conversation.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { MethodName, RequestOf, ResponseOf } from '../../main/contract/channels.ts';
import type { Message } from '../../main/contract/types.ts';
import { RouterError } from '../../main/composition/router.ts';
import { startBackend as startServices, type Backend as Services } from '../../main/composition/start-backend.ts';
import { CITATION_NOTE } from '../../main/documents/prompt.ts';
import { buildPdf, variedText } from '../helpers/documents.ts';
import { STORIES_BIN } from '../helpers/paths.ts';
import { nextEvent, record } from '../helpers/router-events.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-documents-test-'));
let s: Services;

function call<M extends MethodName>(method: M, payload: RequestOf<M>): Promise<ResponseOf<M>> {
  return s.router.call(method, payload) as Promise<ResponseOf<M>>;
}
const b64 = (data: string | Buffer) => Buffer.from(data).toString('base64');

async function sendAndWait(conversationId: string, content: string, documents: RequestOf<'sendMessage'>['documents'] = []) {
  const done = nextEvent(s.router, 'answerDone', (d) => d.conversationId === conversationId);
  const sent = await call('sendMessage', { conversationId, content, documents });
  return { sent, done: (await done).message as Message };
}

/** A story in paragraphs, long enough to be a document worth asking about. */
const STORY = Array.from({ length: 6 }, (_, i) => `Once upon a time, a little girl named Lily had a red ball number ${i}. She played in the park with her friend Tom.`).join('\n\n');

before(async () => {
  s = await startServices({ dataDir: path.join(root, 'data'), cacheDir: path.join(root, 'cache'), defaultModel: STORIES_BIN });
  await s.modelLoaded;
  await call('updateSettings', { maxContext: 512, maxTokens: 16, temperature: 0 });
});
after(async () => {
  await s?.dispose();
  rmSync(root, { recursive: true, force: true });
});

test('attach, count, ask, follow up with the document reused, open, delete with the conversation', async () => {
  const md = await call('attachDocument', { name: 'story.md', data: b64(STORY) });
  assert.equal(md.kind, 'markdown');
  assert.ok(md.tokens !== null && md.tokens > 100, `tokens ${md.tokens}`);
  const pdfBytes = buildPdf([['The ball was red.'], ['Tom had a blue kite.']]);
  const pdf = await call('attachDocument', { name: 'kite.pdf', data: b64(pdfBytes) });
  const again = await call('attachDocument', { name: 'kite copy.pdf', data: b64(pdfBytes) });
  assert.equal(again.id, pdf.id, 'the same file is stored once');
  assert.equal(s.store.countDocuments(), 2);

  // Errors name the file and store nothing.
  for (const [name, data, code, re] of [
    ['scan.pdf', buildPdf([null]), 'DOCUMENT_NO_TEXT', /^scan\.pdf: no text found: no text layer, and OCR found no text in its images/],
    ['cut.pdf', buildPdf([['x']]).subarray(0, 50), 'DOCUMENT_CORRUPT', /^cut\.pdf: not a valid PDF/],
    ['tool.exe', Buffer.from([0x4d, 0x5a, 0, 0, 3]), 'DOCUMENT_UNSUPPORTED', /^tool\.exe: unsupported type \.exe/],
  ] as const) {
    await assert.rejects(call('attachDocument', { name, data: b64(data) }), (e: unknown) => e instanceof RouterError && e.code === code && re.test(e.message));
  }
  assert.equal(s.store.countDocuments(), 2, 'nothing stored by a failed attach');

  const c = await call('createConversation', {});
  const documents = [
    { id: md.id, fit: 'whole' as const },
    { id: pdf.id, fit: 'whole' as const },
  ];
  const budget = await call('getBudget', { conversationId: c.id, draft: 'What color was the ball?', documents });
  assert.ok(budget.documents >= md.tokens! + pdf.tokens!, `documents ${budget.documents} hold both texts (${md.tokens} + ${pdf.tokens})`);
  // stories260K's 512-token vocabulary spells the two delimiter pairs nearly letter by letter (68
  // tokens), and the citation note and labels too (at most a token a character).
  const citations = [CITATION_NOTE, ...(await call('openDocument', { id: md.id })).parts.map((p) => `[story.md ${p.label}]\n`), '[kite.pdf p. 1]\n', '[kite.pdf p. 2]\n'];
  const citationChars = citations.reduce((n, t) => n + t.length, 0);
  assert.ok(budget.documents <= md.tokens! + pdf.tokens! + 100 + citationChars, `and little more than their delimiters and citation labels: ${budget.documents}`);
  const noDocs = await call('getBudget', { conversationId: c.id, draft: 'What color was the ball?' });
  assert.equal(budget.draft, noDocs.draft, 'the question alone is the draft');
  assert.equal(budget.used, noDocs.used + budget.documents);

  const first = await sendAndWait(c.id, 'What color was the ball?', documents);
  assert.deepEqual(first.sent.userMessage.documents?.map((d) => d.name), ['story.md', 'kite.pdf']);
  assert.equal(first.done.status, 'complete', first.done.error ?? '');
  assert.equal(first.done.stats!.promptTokens, budget.used, 'the budget counted exactly the prompt the engine was fed');
  assert.equal(first.done.stats!.documentParts, undefined, 'whole documents');

  const second = await sendAndWait(c.id, 'And the kite?');
  assert.ok(second.done.stats!.reusedTokens >= budget.system + budget.documents, `follow-up reused ${second.done.stats!.reusedTokens} tokens`);
  assert.ok(second.done.stats!.promptTokens - second.done.stats!.reusedTokens < 60, 'and prefilled only the new turn');

  const conv = await call('getConversation', { id: c.id });
  assert.deepEqual(conv.messages[0].documents?.map((d) => [d.name, d.tokens]), [
    ['story.md', md.tokens],
    ['kite.pdf', pdf.tokens],
  ]);
  const opened = await call('openDocument', { id: pdf.id });
  assert.equal(opened.text, 'The ball was red.\n\nTom had a blue kite.');
  assert.deepEqual(opened.parts.map((p) => p.label), ['page 1', 'page 2']);

  await call('deleteConversation', { id: c.id });
  assert.equal(s.store.countDocuments(), 0, 'its documents went with it');
  await assert.rejects(call('openDocument', { id: pdf.id }), (e: unknown) => e instanceof RouterError && e.code === 'NOT_FOUND');
});

test('a document that does not fit: refused whole, answered from the relevant parts (re-ranked per question)', async () => {
  const sections = Array.from({ length: 24 }, (_, i) => `# Part ${i}\n\n${i === 17 ? 'The zebra ran to the river and drank cold water.' : `Lily and Tom played with ball number ${i} in the sunny park all day.`} They were happy.`);
  const big = await call('attachDocument', { name: 'big.md', data: b64(sections.join('\n\n')) });
  assert.ok(big.tokens! > 512, `the document (${big.tokens} tokens) is longer than the max context`);
  const c = await call('createConversation', {});

  const whole = await call('getBudget', { conversationId: c.id, draft: 'Where did the zebra run?', documents: [{ id: big.id, fit: 'whole' }] });
  assert.equal(whole.fits, false);
  await assert.rejects(
    call('sendMessage', { conversationId: c.id, content: 'Where did the zebra run?', documents: [{ id: big.id, fit: 'whole' }] }),
    (e: unknown) => e instanceof RouterError && e.code === 'CONTEXT_FULL' && /the documents \(\d+\)/.test(e.message),
  );

  const relevant = await call('getBudget', { conversationId: c.id, draft: 'Where did the zebra run?', documents: [{ id: big.id, fit: 'relevant' }] });
  assert.equal(relevant.fits, true, JSON.stringify(relevant));
  const { done } = await sendAndWait(c.id, 'Where did the zebra run?', [{ id: big.id, fit: 'relevant' }]);
  assert.equal(done.status, 'complete', done.error ?? '');
  const parts = done.stats!.documentParts!;
  assert.ok(parts.some((p) => p.startsWith('big.md: § Part 17,')), `the zebra's section was used: ${parts.join('; ')}`);
  assert.ok(done.stats!.promptTokens + 16 <= 512);

  const { done: next } = await sendAndWait(c.id, 'Who played with ball number 3?');
  assert.ok(next.stats!.documentParts!.some((p) => p.startsWith('big.md: § Part 3,')), `re-ranked for the follow-up: ${next.stats!.documentParts!.join('; ')}`);
});

test('a text of megabytes through the window path: attached with a measured count, refused whole from a measure, answered from the relevant parts', async (t) => {
  const text = variedText(2 * 1024 * 1024, 31);
  const started = Date.now();
  const doc = await call('attachDocument', { name: 'book.txt', data: b64(text) });
  const attachMs = Date.now() - started;
  assert.equal(doc.tokensEstimated, true);
  assert.ok(doc.tokens! > 400_000, `${doc.tokens} tokens`);
  const c = await call('createConversation', {});
  const q = 'How many barrels of tar?';
  const wholeAt = Date.now();
  const whole = await call('getBudget', { conversationId: c.id, draft: q, documents: [{ id: doc.id, fit: 'whole' }] });
  const wholeMs = Date.now() - wholeAt;
  assert.equal(whole.fits, false);
  assert.equal(whole.estimated, true, 'the whole count is a measure');
  assert.ok(Math.abs(whole.documents - doc.tokens!) < 100, `documents ${whole.documents} ≈ ${doc.tokens}`);
  const relevantAt = Date.now();
  const relevant = await call('getBudget', { conversationId: c.id, draft: q, documents: [{ id: doc.id, fit: 'relevant' }] });
  const relevantMs = Date.now() - relevantAt;
  assert.equal(relevant.fits, true, JSON.stringify(relevant));
  assert.equal(relevant.estimated, false);
  const { done } = await sendAndWait(c.id, q, [{ id: doc.id, fit: 'relevant' }]);
  assert.equal(done.status, 'complete', done.error ?? '');
  assert.ok(done.stats!.documentParts!.length >= 3, done.stats!.documentParts!.join('; '));
  t.diagnostic(`2 MiB text: attach ${attachMs} ms, whole budget ${wholeMs} ms, relevant budget ${relevantMs} ms (load ${os.loadavg()[0].toFixed(1)})`);
});

test('long conversations: stop refuses, rolling window and truncate middle leave the oldest turns out, a message is deleted with its answer', async () => {
  await call('updateSettings', { maxContext: 256, maxTokens: 32, contextFullPolicy: 'stop' });
  const c = await call('createConversation', {});
  const line = (i: number) => `Tell me story number ${i} about Lily and Tom and the big red ball in the sunny park.`;
  const ids: string[] = [];
  for (let i = 0; ; i++) {
    const b = await call('getBudget', { conversationId: c.id, draft: line(i) });
    if (!b.fits) break;
    ids.push((await sendAndWait(c.id, line(i))).sent.userMessage.id);
  }
  assert.ok(ids.length >= 2, `${ids.length} exchanges fit`);
  const draft = line(99);
  await assert.rejects(call('sendMessage', { conversationId: c.id, content: draft }), (e: unknown) => e instanceof RouterError && e.code === 'CONTEXT_FULL');

  // Changing the policy recounts the budget the window looks at (no stale refusal).
  const recount = nextEvent(s.router, 'budgetChanged', (b) => b.conversationId === c.id && b.fits);
  await call('updateSettings', { contextFullPolicy: 'rolling-window' });
  const rolled = await recount;
  assert.ok(rolled.outOfContext.length >= 2 && rolled.outOfContext[0] === ids[0], `the oldest exchange is out: ${rolled.outOfContext}`);
  const { done } = await sendAndWait(c.id, draft);
  assert.equal(done.status, 'complete');
  assert.ok(done.stats!.promptTokens + 32 <= 256, `${done.stats!.promptTokens} prompt tokens`);

  await call('updateSettings', { contextFullPolicy: 'truncate-middle' });
  const truncated = await call('getBudget', { conversationId: c.id, draft });
  assert.equal(truncated.fits, true);
  assert.ok(!truncated.outOfContext.includes(ids[0]), 'the first exchange stays');
  assert.ok(truncated.outOfContext.includes(ids[1]), 'the one after it goes');

  // This chat's own policy wins over the setting, and is kept with the conversation.
  const own = await call('setConversationPolicy', { id: c.id, policy: 'stop' });
  assert.equal(own.contextFullPolicy, 'stop');
  assert.equal((await call('getBudget', { conversationId: c.id, draft })).fits, false, 'its own "stop" refuses again');
  assert.equal((await call('listConversations', {})).find((x) => x.id === c.id)?.contextFullPolicy, 'stop');
  const other = await call('createConversation', {});
  assert.equal((await call('getConversation', { id: other.id })).contextFullPolicy, undefined, 'another chat follows the setting');
  await call('setConversationPolicy', { id: c.id, policy: 'rolling-window' });
  const ownRolled = await call('getBudget', { conversationId: c.id, draft });
  assert.ok(ownRolled.fits && ownRolled.outOfContext.includes(ids[0]), 'its own rolling window leaves the first exchange out');
  const back = await call('setConversationPolicy', { id: c.id, policy: null });
  assert.equal(back.contextFullPolicy, undefined, 'null: the setting applies again');
  await assert.rejects(call('setConversationPolicy', { id: c.id, policy: 'drop-all' as never }), (e: unknown) => e instanceof RouterError && e.code === 'INVALID_REQUEST');

  const before = await call('getConversation', { id: c.id });
  const after = await call('deleteMessage', { conversationId: c.id, messageId: ids[1] });
  assert.equal(after.messages.length, before.messages.length - 2, 'the message and its answer');
  assert.ok(!after.messages.some((m) => m.id === ids[1]));
  await call('updateSettings', { maxContext: 512, maxTokens: 16, contextFullPolicy: 'stop' });
});

test('a large file is extracted off the main thread with progress events, page by page', async () => {
  const line = 'The ropewalk twisted hemp into long ropes for the ships in the harbour.';
  const pages = Array.from({ length: 80 }, (_, p) => Array.from({ length: 48 }, (_, l) => `${p}.${l} ${line}`));
  const pdf = buildPdf(pages);
  assert.ok(pdf.length > 256 * 1024, `${pdf.length} bytes: over the off-thread threshold`);
  const events = record(s.router);
  const info = await call('attachDocument', { name: 'harbour.pdf', data: b64(pdf) });
  events.stop();
  const fractions = events.of('documentProgress').filter((e) => e.name === 'harbour.pdf').map((e) => e.fraction);
  assert.equal(info.kind, 'pdf');
  assert.ok(fractions.length >= 80, `${fractions.length} progress events`);
  assert.deepEqual([...fractions].sort((a, b) => a - b), fractions, 'in order');
  assert.equal(fractions.at(-1), 1);
});

test('switching to another conversation and back reuses the document\'s KV cache; the KV budget drops the least recently used', async () => {
  // 2 MiB holds one of these conversations' KV caches (stories260K: 1,280 bytes a position), not two.
  await call('updateSettings', { maxContext: 2048, maxTokens: 16, kvCacheBudgetMiB: 2 });
  try {
    const story = (name: string, thing: string) =>
      Array.from({ length: 26 }, (_, i) => `${name} had a ${thing} number ${i}. ${name} played with it in the garden every day and was very happy.`).join('\n\n');
    const ask = async (name: string, thing: string) => {
      const doc = await call('attachDocument', { name: `${name}.md`, data: b64(story(name, thing)) });
      assert.ok(doc.tokens! > 850 && doc.tokens! < 1500, `${name}.md: ${doc.tokens} tokens`);
      const c = await call('createConversation', {});
      const { done } = await sendAndWait(c.id, `What did ${name} have?`, [{ id: doc.id, fit: 'whole' }]);
      assert.equal(done.status, 'complete', done.error ?? '');
      return { id: c.id, tokens: doc.tokens! };
    };
    const x = await ask('Lily', 'red ball');
    const y = await ask('Tom', 'blue kite');
    const backToX = await sendAndWait(x.id, 'Where did she play?');
    assert.ok(backToX.done.stats!.reusedTokens >= x.tokens, `coming back reused ${backToX.done.stats!.reusedTokens} tokens (the document: ${x.tokens})`);
    // Y was left before X: the least recently used, so a third conversation pushes it out.
    await ask('Sue', 'green hat');
    const backToY = await sendAndWait(y.id, 'Where did he play?');
    assert.equal(backToY.done.status, 'complete');
    // What every such prompt shares (the template's start, the citation note, `<document name="`)
    // is still reused from the live cache; Y's own document (> 850 tokens) is not.
    assert.ok(backToY.done.stats!.reusedTokens < 100, `Y's KV cache was dropped: reused ${backToY.done.stats!.reusedTokens}`);
  } finally {
    await call('updateSettings', { maxContext: 512, maxTokens: 16, kvCacheBudgetMiB: 1024 });
  }
});

test('the KV cache budget setting is validated', async () => {
  for (const bad of [-1, 1.5, 2 ** 21]) {
    await assert.rejects(call('updateSettings', { kvCacheBudgetMiB: bad }), (e: unknown) => e instanceof RouterError && e.code === 'INVALID_REQUEST' && /kvCacheBudgetMiB/.test(e.message));
  }
  assert.equal((await call('getSettings', {})).kvCacheBudgetMiB, 1024);
});

test('rolling window: a message whose reply reserve passes the max context is answered, the context shifting mid-answer', async () => {
  await call('updateSettings', { maxContext: 256, maxTokens: 64, contextFullPolicy: 'stop' });
  try {
    const c = await call('createConversation', {});
    // A story stories260K goes on with for over 100 tokens (greedy), so it reaches the max context.
    const text =
      'Once upon a time, there was a big dog named Max. Max liked to run and jump in the garden. One day, Max saw a cat on the fence. The cat looked at Max and said, "Hello, Max. Do you want to play with me?" ' +
      'Max was happy. He wagged his tail and said, "Yes, I want to play!" The cat jumped down from the fence and they ran around the garden together. They played all day until the sun went down. ' +
      'Then the mom called Max to come inside. Max said goodbye to the cat and went home. The next day, Max went to the garden again and';
    const refused = await call('getBudget', { conversationId: c.id, draft: text });
    assert.ok(refused.used > 256 - 64 && refused.used < 240, `the message takes ${refused.used} tokens: it fits, its reply reserve does not`);
    assert.equal(refused.fits, false, 'stop refuses it');
    await call('updateSettings', { contextFullPolicy: 'rolling-window' });
    assert.equal((await call('getBudget', { conversationId: c.id, draft: text })).fits, true, 'rolling window takes it');
    const { done } = await sendAndWait(c.id, text);
    assert.equal(done.status, 'complete', done.error ?? '');
    assert.ok(done.stats!.contextShift && done.stats!.contextShift.shifts >= 1, `the answer (${done.stats!.generatedTokens} tokens, ${done.stats!.finishReason}) shifted: ${JSON.stringify(done.stats!.contextShift)}`);
    assert.ok(done.stats!.contextShift!.droppedTokens > 0);
    assert.notEqual(done.stats!.finishReason, 'context-full');
  } finally {
    await call('updateSettings', { maxContext: 512, maxTokens: 16, contextFullPolicy: 'stop' });
  }
});
