/**
 * The window's stores (renderer/stores/*) driven by an in-memory fake RopewalkApi and a manual
 * frame scheduler, under Node: startup, send → deltas committed once per frame → done, stop,
 * regenerate, edit, the budget (debounced draft, events while streaming, refusal without a
 * call), conversations (new, search, rename, delete), the model, and errors as banner notices.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { Message } from '../../main/contract/types.ts';
import { isGenerating } from '../../renderer/stores/chat.ts';
import { summaryById } from '../../renderer/stores/conversations.ts';
import { createStores, type Stores } from '../../renderer/stores/index.ts';
import { loadErrorOf } from '../../renderer/stores/model.ts';
import { FakeApi, ManualFrames, ManualTimers, settle } from './renderer-fakes.ts';

async function boot(setup?: (fake: FakeApi) => void): Promise<{ fake: FakeApi; frames: ManualFrames; timers: ManualTimers; stores: Stores }> {
  const fake = new FakeApi();
  setup?.(fake);
  const frames = new ManualFrames();
  const timers = new ManualTimers();
  const stores = createStores(fake.asApi(), { frames, timers, debounceMs: 5 });
  await stores.start();
  await settle();
  return { fake, frames, timers, stores };
}

/** Stores over one conversation ('old', open) whose createConversation waits for `release()`. */
async function bootSlowToCreate(): Promise<{ fake: FakeApi; old: { id: string }; stores: Stores; release: () => void }> {
  const fake = new FakeApi();
  const old = fake.addConversation('old', [['user', 'hi']]);
  const api = fake.asApi();
  let release: (() => void) | null = null;
  const gated = {
    ...api,
    createConversation: async (r: Parameters<RopewalkApi['createConversation']>[0]) => {
      await new Promise<void>((res) => (release = res));
      return api.createConversation(r);
    },
  } as RopewalkApi;
  const stores = createStores(gated, { frames: new ManualFrames(), debounceMs: 5 });
  await stores.start();
  await settle();
  return { fake, old, stores, release: () => (release as (() => void) | null)?.() };
}

const done = (message: Message, content: string, status: Message['status'] = 'complete'): Message => ({
  ...message,
  content,
  status,
  stats: { finishReason: status === 'cancelled' ? 'cancelled' : 'stop', promptTokens: 12, generatedTokens: 4, reusedTokens: 0, ttftMs: 42, prefillTokensPerSec: 900, decodeTokensPerSec: 55.5 },
});

describe('renderer stores: startup', () => {
  it('loads model, settings and conversations, and opens the most recent one', async () => {
    const { fake, stores } = await boot((f) => {
      f.addConversation('older', [['user', 'hi']]);
      f.addConversation('newer', [['user', 'hello'], ['assistant', 'hey']]);
    });
    assert.equal(stores.model.getState().model?.info?.name, 'stories260K');
    assert.equal(stores.settings.getState().settings?.maxContext, 2048);
    assert.deepEqual(stores.conversations.getState().items.map((c) => c.title), ['newer', 'older']);
    const chat = stores.chat.getState();
    assert.equal(chat.conversationId, [...fake.conversations.values()][1].id);
    assert.deepEqual(chat.messages.map((m) => m.content), ['hello', 'hey']);
    assert.equal(stores.budget.getState().budget?.used, 'hellohey'.length);
  });

  it('with no conversation opens none, and the meter shows 0 used', async () => {
    const { stores } = await boot();
    assert.equal(stores.chat.getState().conversationId, null);
    assert.equal(stores.budget.getState().budget?.used, 0);
    assert.equal(stores.budget.getState().budget?.maxContext, 2048);
  });

  it('New chat pressed while the first load is in flight stays open and listed (was: the most recent chat replaced it)', async () => {
    const fake = new FakeApi();
    fake.addConversation('Hostile output', [['user', 'x'.repeat(66)]]);
    const api = fake.asApi();
    let release: (() => void) | null = null;
    const gated = {
      ...api,
      listConversations: async (r: Parameters<RopewalkApi['listConversations']>[0]) => {
        const items = await api.listConversations(r); // answered before the new chat exists
        await new Promise<void>((res) => (release = res));
        return items;
      },
    } as RopewalkApi;
    const stores = createStores(gated, { frames: new ManualFrames(), debounceMs: 5 });
    const starting = stores.start();
    await settle();
    await stores.conversations.getState().create();
    const created = stores.chat.getState().conversationId!;
    assert.ok(created);
    (release as (() => void) | null)?.();
    await starting;
    await settle();
    assert.equal(stores.chat.getState().conversationId, created, 'the new chat is still open');
    assert.equal(stores.budget.getState().budget?.used, 0);
    assert.deepEqual(stores.conversations.getState().items.map((c) => c.title), ['New chat', 'Hostile output']);
    stores.dispose();
  });
});

describe('renderer stores: answers', () => {
  it('send → deltas committed once per frame → done replaces the message', async () => {
    const { fake, frames, stores } = await boot((f) => void f.addConversation('chat'));
    const { chat } = stores;
    chat.getState().setDraft('Tell me a story');
    const sent = chat.getState().send();
    await settle();
    assert.equal(chat.getState().draft, '', 'the draft clears at once');
    assert.ok(await sent);
    const conversationId = chat.getState().conversationId!;
    assert.deepEqual(fake.calls.find(([m]) => m === 'sendMessage')?.[1], { conversationId, content: 'Tell me a story' });
    const answer = chat.getState().messages.at(-1)!;
    assert.equal(answer.status, 'streaming');
    assert.ok(isGenerating(chat.getState()));

    let changes = 0;
    const unsubscribe = chat.subscribe(() => changes++);
    for (const [i, text] of ['Once', ' upon', ' a', ' time'].entries()) {
      fake.emit('answerDelta', { conversationId, messageId: answer.id, text, generatedTokens: i + 1 });
    }
    assert.equal(changes, 0, 'no store change before the frame');
    assert.equal(chat.getState().messages.at(-1)!.content, '');
    frames.tick();
    assert.equal(changes, 1, 'four deltas, one store change');
    assert.equal(chat.getState().messages.at(-1)!.content, 'Once upon a time');
    assert.equal(chat.getState().live[answer.id].generatedTokens, 4);

    fake.emit('answerDelta', { conversationId, messageId: answer.id, text: ' there', generatedTokens: 5 });
    fake.emit('answerDone', { conversationId, message: done(answer, 'Once upon a time there was') });
    frames.tick();
    unsubscribe();
    const final = chat.getState().messages.at(-1)!;
    assert.equal(final.content, 'Once upon a time there was', 'done wins; the buffered delta is dropped');
    assert.equal(final.stats?.ttftMs, 42);
    assert.equal(chat.getState().live[answer.id], undefined);
    assert.equal(isGenerating(chat.getState()), false);
  });

  it('answerSaveState: "not saved yet" set on the answer while the disk refuses it, kept by deltas and done, cleared once saved', async () => {
    const { fake, frames, stores } = await boot((f) => void f.addConversation('chat'));
    const { chat } = stores;
    chat.getState().setDraft('Tell me a story');
    assert.ok(await chat.getState().send());
    const conversationId = chat.getState().conversationId!;
    const answer = chat.getState().messages.at(-1)!;
    fake.emit('answerSaveState', { conversationId, messageId: answer.id, notSaved: 'disk full' });
    assert.equal(chat.getState().messages.at(-1)!.notSaved, 'disk full');
    fake.emit('answerDelta', { conversationId, messageId: answer.id, text: 'Once', generatedTokens: 1 });
    frames.tick();
    assert.deepEqual([chat.getState().messages.at(-1)!.content, chat.getState().messages.at(-1)!.notSaved], ['Once', 'disk full']);
    fake.emit('answerDone', { conversationId, message: { ...done(answer, 'Once upon'), notSaved: 'disk full' } });
    assert.equal(chat.getState().messages.at(-1)!.notSaved, 'disk full');
    fake.emit('answerSaveState', { conversationId: 'another', messageId: answer.id, notSaved: null });
    assert.equal(chat.getState().messages.at(-1)!.notSaved, 'disk full', 'another conversation\'s event changes nothing');
    fake.emit('answerSaveState', { conversationId, messageId: answer.id, notSaved: null });
    assert.equal('notSaved' in chat.getState().messages.at(-1)!, false);
    assert.equal(chat.getState().messages.at(-1)!.content, 'Once upon');
  });

  it('prefill progress shows while the prompt is read', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat'));
    stores.chat.getState().setDraft('hi');
    await stores.chat.getState().send();
    const { conversationId } = stores.chat.getState();
    const answer = stores.chat.getState().messages.at(-1)!;
    fake.emit('answerPrefill', { conversationId: conversationId!, messageId: answer.id, processed: 256, total: 1000 });
    assert.deepEqual(stores.chat.getState().live[answer.id].prefill, { processed: 256, total: 1000 });
  });

  it('an answer waiting behind an API request shows it, until its prefill starts', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat'));
    stores.chat.getState().setDraft('hi');
    await stores.chat.getState().send();
    const { conversationId } = stores.chat.getState();
    const answer = stores.chat.getState().messages.at(-1)!;
    fake.emit('answerWaiting', { conversationId: conversationId!, messageId: answer.id, ahead: 2 });
    assert.equal(stores.chat.getState().live[answer.id].waiting, 2);
    fake.emit('answerPrefill', { conversationId: conversationId!, messageId: answer.id, processed: 5, total: 5 });
    assert.equal(stores.chat.getState().live[answer.id].waiting, undefined);
  });

  it('keeps deltas that arrive before sendMessage answers', async () => {
    const { fake, frames, stores } = await boot((f) => void f.addConversation('chat'));
    const conversationId = stores.chat.getState().conversationId!;
    fake.beforeSendAnswers = (assistant) => {
      fake.emit('answerDelta', { conversationId, messageId: assistant.id, text: 'early ', generatedTokens: 1 });
      frames.tick();
      fake.emit('answerDelta', { conversationId, messageId: assistant.id, text: 'bird', generatedTokens: 2 });
      frames.tick();
    };
    stores.chat.getState().setDraft('go');
    await stores.chat.getState().send();
    assert.equal(stores.chat.getState().messages.at(-1)!.content, 'early bird');
    assert.equal(stores.chat.getState().messages.at(-1)!.status, 'streaming');
  });

  it('keeps a done that arrives before sendMessage answers', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat'));
    const conversationId = stores.chat.getState().conversationId!;
    fake.beforeSendAnswers = (assistant) => fake.emit('answerDone', { conversationId, message: done(assistant, 'quick') });
    stores.chat.getState().setDraft('go');
    await stores.chat.getState().send();
    assert.equal(stores.chat.getState().messages.at(-1)!.content, 'quick');
    assert.equal(stores.chat.getState().messages.at(-1)!.status, 'complete');
    assert.equal(isGenerating(stores.chat.getState()), false);
  });

  it('opening a conversation whose answer streams: deltas already in the snapshot are not doubled, a done is kept', async () => {
    const { fake, frames, stores } = await boot((f) => {
      const c = f.addConversation('streaming elsewhere', [['user', 'q']]);
      c.messages.push(f.message(c.id, 'assistant', 'Once', 'streaming'));
      f.addConversation('open now');
    });
    const target = stores.conversations.getState().items[1].id;
    const answer = fake.conversations.get(target)!.messages[1];
    const opening = stores.conversations.getState().select(target);
    // Before the snapshot answers: a delta already counted in it ('Once'), then the done.
    fake.emit('answerDelta', { conversationId: target, messageId: answer.id, text: 'Once', generatedTokens: 1 });
    frames.tick();
    fake.afterConversationSnapshot = () => fake.emit('answerDone', { conversationId: target, message: done(answer, 'Once upon') });
    await opening;
    const last = stores.chat.getState().messages.at(-1)!;
    assert.equal(last.content, 'Once upon');
    assert.equal(last.status, 'complete');
    assert.equal(isGenerating(stores.chat.getState()), false);
  });

  it('ignores events of another conversation', async () => {
    const { fake, frames, stores } = await boot((f) => {
      f.addConversation('other', [['assistant', 'x']]);
      f.addConversation('open');
    });
    const other = stores.conversations.getState().items[1].id;
    fake.emit('answerDelta', { conversationId: other, messageId: 'm1', text: 'zzz', generatedTokens: 1 });
    frames.tick();
    assert.deepEqual(stores.chat.getState().messages, []);
  });

  it('stop calls stopGeneration for the open conversation; the cancelled answer keeps its text', async () => {
    const { fake, frames, stores } = await boot((f) => void f.addConversation('chat'));
    stores.chat.getState().setDraft('hi');
    await stores.chat.getState().send();
    const conversationId = stores.chat.getState().conversationId!;
    const answer = stores.chat.getState().messages.at(-1)!;
    fake.emit('answerDelta', { conversationId, messageId: answer.id, text: 'partial', generatedTokens: 1 });
    frames.tick();
    await stores.chat.getState().stop();
    assert.deepEqual(fake.calls.find(([m]) => m === 'stopGeneration')?.[1], { conversationId });
    fake.emit('answerDone', { conversationId, message: done(answer, 'partial', 'cancelled') });
    assert.equal(stores.chat.getState().messages.at(-1)!.status, 'cancelled');
    assert.equal(isGenerating(stores.chat.getState()), false);
  });

  it('regenerate replaces the last answer', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat', [['user', 'q'], ['assistant', 'first']]));
    await stores.chat.getState().regenerate();
    assert.equal(fake.count('regenerate'), 1);
    const messages = stores.chat.getState().messages;
    assert.deepEqual(messages.map((m) => [m.role, m.content, m.status]), [
      ['user', 'q', 'complete'],
      ['assistant', '', 'streaming'],
    ]);
  });

  it('edit and resend drops the messages after the edited one', async () => {
    const { fake, stores } = await boot((f) =>
      void f.addConversation('chat', [['user', 'one'], ['assistant', 'a1'], ['user', 'two'], ['assistant', 'a2']]),
    );
    const first = stores.chat.getState().messages[0];
    stores.chat.getState().startEdit(first.id);
    assert.equal(stores.chat.getState().editingId, first.id);
    assert.ok(await stores.chat.getState().submitEdit(first.id, 'one, edited'));
    assert.equal(fake.count('editMessage'), 1);
    assert.deepEqual(stores.chat.getState().messages.map((m) => m.content), ['one, edited', '']);
    assert.equal(stores.chat.getState().editingId, null);
  });

  it('a stop while the send checks the budget stops the answer right after the call, not before it', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat'));
    stores.chat.getState().setDraft('hi');
    const sent = stores.chat.getState().send(); // suspended at the budget check
    await stores.chat.getState().stop();
    assert.equal(fake.count('stopGeneration'), 0, 'nothing to stop yet');
    assert.ok(await sent);
    await settle();
    const order = fake.calls.map(([m]) => m).filter((m) => m === 'sendMessage' || m === 'stopGeneration');
    assert.deepEqual(order, ['sendMessage', 'stopGeneration']);
    // A stop after the call went out goes straight to the services.
    await stores.chat.getState().stop();
    assert.equal(fake.count('stopGeneration'), 2);
  });

  it('Continue: the answer streams on in place at once (early deltas append to its text), with the live rate; the done replaces it', async () => {
    const { fake, frames, stores } = await boot((f) => {
      const c = f.addConversation('chat', [['user', 'Once']]);
      const a = f.message(c.id, 'assistant', 'upon a time', 'complete');
      a.stats = { finishReason: 'length', promptTokens: 2, generatedTokens: 3, reusedTokens: 0, ttftMs: 5, prefillTokensPerSec: 100, decodeTokensPerSec: 50 };
      c.messages.push(a);
    });
    const conversationId = stores.chat.getState().conversationId!;
    const answer = stores.chat.getState().messages.at(-1)!;
    const going = stores.chat.getState().continueAnswer();
    assert.equal(stores.chat.getState().messages.at(-1)!.status, 'streaming', 'streaming from the click on');
    assert.equal(stores.chat.getState().live[answer.id].generatedTokens, 3, 'the count goes on from the first run');
    fake.emit('answerDelta', { conversationId, messageId: answer.id, text: ' there', generatedTokens: 4, tokensPerSec: 61.5 });
    frames.tick();
    await going;
    assert.deepEqual(fake.calls.find(([m]) => m === 'continueAnswer')?.[1], { conversationId, messageId: answer.id });
    assert.equal(stores.chat.getState().messages.at(-1)!.content, 'upon a time there', 'appended to the text it had');
    assert.equal(stores.chat.getState().live[answer.id].tokensPerSec, 61.5);
    fake.emit('answerDone', { conversationId, message: done(answer, 'upon a time there was') });
    assert.equal(stores.chat.getState().messages.length, 2, 'one answer');
    assert.equal(stores.chat.getState().messages.at(-1)!.content, 'upon a time there was');
    assert.equal(isGenerating(stores.chat.getState()), false);
  });

  it('Continue refused by the services: the answer is as it was, the reason in the banner', async () => {
    const { fake, stores } = await boot((f) => {
      const c = f.addConversation('chat', [['user', 'Once']]);
      const a = f.message(c.id, 'assistant', 'upon a time', 'complete');
      a.stats = { finishReason: 'length', promptTokens: 2, generatedTokens: 3, reusedTokens: 0, ttftMs: 5, prefillTokensPerSec: 100, decodeTokensPerSec: 50 };
      c.messages.push(a);
    });
    const before = stores.chat.getState().messages.at(-1)!;
    fake.fail('continueAnswer', 'INVALID_REQUEST', 'a remote engine cannot continue an answer');
    await stores.chat.getState().continueAnswer();
    assert.deepEqual(stores.chat.getState().messages.at(-1), before);
    assert.equal(stores.chat.getState().live[before.id], undefined);
    assert.equal(isGenerating(stores.chat.getState()), false);
    assert.match(stores.notices.getState().notices.at(-1)!.message, /cannot continue/);
  });

  it("editing an answer saves its text as a new version (editAnswer), generating nothing", async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat', [['user', 'q'], ['assistant', 'first']]));
    const answer = stores.chat.getState().messages[1];
    stores.chat.getState().startEdit(answer.id);
    assert.ok(await stores.chat.getState().submitEdit(answer.id, 'better'));
    assert.equal(fake.count('editAnswer'), 1);
    assert.equal(fake.count('editMessage'), 0);
    const last = stores.chat.getState().messages.at(-1)!;
    assert.deepEqual([last.content, last.status, last.branches?.length], ['better', 'complete', 2]);
    assert.equal(stores.chat.getState().editingId, null);
    assert.equal(isGenerating(stores.chat.getState()), false);
  });

  it('send with no conversation open creates one first', async () => {
    const { fake, stores } = await boot();
    stores.chat.getState().setDraft('hello');
    assert.ok(await stores.chat.getState().send());
    assert.equal(fake.count('createConversation'), 1);
    assert.notEqual(stores.chat.getState().conversationId, null);
    assert.equal(stores.conversations.getState().items.length, 1);
    assert.equal(stores.chat.getState().messages[0].content, 'hello');
  });
});

describe('renderer stores: budget', () => {
  it('asks getBudget once after typing stops, with the draft', async () => {
    const { fake, timers, stores } = await boot((f) => void f.addConversation('chat'));
    const before = fake.count('getBudget');
    for (const text of ['h', 'he', 'hel', 'hell', 'hello']) stores.chat.getState().setDraft(text);
    assert.equal(stores.budget.getState().stale, true);
    assert.equal(timers.runDue(), 1, 'one debounced call waits');
    await settle();
    assert.equal(fake.count('getBudget') - before, 1);
    assert.equal((fake.calls.at(-1)?.[1] as { draft: string }).draft, 'hello');
    const b = stores.budget.getState().budget!;
    assert.equal(b.used, 5);
    assert.equal(b.draft, 5);
    assert.equal(stores.budget.getState().stale, false);
  });

  it('applies budgetChanged events of the open conversation, keeping this window’s draft', async () => {
    const { fake, timers, stores } = await boot((f) => void f.addConversation('chat'));
    const id = stores.chat.getState().conversationId!;
    stores.chat.getState().setDraft('abc');
    assert.equal(timers.runDue(), 1, 'one debounced call waits');
    await settle();
    const event = { ...fake.budgetOf(id, ''), history: 100, used: 100, total: 356 };
    stores.budget.getState().apply(event);
    const b = stores.budget.getState().budget!;
    assert.equal(b.history, 100);
    assert.equal(b.draft, 3);
    assert.equal(b.used, 103);
    assert.equal(b.total, 359);
    stores.budget.getState().apply({ ...event, conversationId: 'elsewhere', history: 5000 });
    assert.equal(stores.budget.getState().budget!.history, 100, 'another conversation’s event is ignored');
  });

  it('grows while an answer streams (events through the api)', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat'));
    const id = stores.chat.getState().conversationId!;
    for (const history of [10, 20, 30]) fake.emit('budgetChanged', { ...fake.budgetOf(id, ''), history, used: history, total: history + 256 });
    assert.equal(stores.budget.getState().budget?.used, 30);
  });

  it('refuses to send when the next message will not fit, without calling sendMessage', async () => {
    const { fake, stores } = await boot((f) => {
      f.settings.maxContext = 512;
      f.settings.maxTokens = 512;
      f.addConversation('chat');
    });
    stores.chat.getState().setDraft('x'.repeat(88));
    assert.equal(await stores.chat.getState().send(), false);
    assert.equal(fake.count('sendMessage'), 0);
    assert.equal(stores.chat.getState().refusal, 'This message needs 600 tokens with the reply reserve, but the max context is 512.');
    assert.equal(stores.chat.getState().draft.length, 88, 'the draft is kept');
    stores.chat.getState().setDraft('shorter');
    assert.equal(stores.chat.getState().refusal, null, 'typing clears the refusal');
  });

  it('a new chat with an empty draft shows 0 used', async () => {
    const { stores } = await boot((f) => void f.addConversation('long one', [['user', 'x'.repeat(300)]]));
    assert.equal(stores.budget.getState().budget?.used, 300);
    await stores.conversations.getState().create();
    await settle();
    const b = stores.budget.getState().budget!;
    assert.equal(b.conversationId, stores.chat.getState().conversationId);
    assert.equal(b.used, 0);
  });

  it('switching chats: a new chat shows only the system prompt at once, before getBudget answers; a chat still loading keeps the previous figures', async () => {
    const fake = new FakeApi();
    fake.settings.systemPrompt = 'abcde'; // 5 tokens in the fake's counting
    const other = fake.addConversation('other one', [['user', 'y'.repeat(100)]]);
    const long = fake.addConversation('long one', [['user', 'x'.repeat(300)]]); // most recent: opened at start
    const api = fake.asApi();
    let release: (() => void) | null = null;
    let hold = false;
    const gated = {
      ...api,
      getBudget: async (r: Parameters<RopewalkApi['getBudget']>[0]) => {
        if (hold) await new Promise<void>((res) => (release = res));
        return api.getBudget(r);
      },
    } as RopewalkApi;
    const stores = createStores(gated, { frames: new ManualFrames(), debounceMs: 5 });
    await stores.start();
    await settle();
    assert.equal(stores.budget.getState().budget?.used, 305);

    hold = true;
    await stores.conversations.getState().create();
    await settle();
    // getBudget has not answered yet: the new, empty chat already shows system only, not 305.
    let b = stores.budget.getState().budget!;
    assert.equal(b.conversationId, stores.chat.getState().conversationId);
    assert.equal(b.used, 5);
    assert.equal(b.history, 0);
    hold = false;
    (release as (() => void) | null)?.();
    await settle();

    // Opening a non-empty chat from another non-empty one: while it loads it is not known to be
    // empty, so the previous figures stay (no flash to the system prompt alone).
    await stores.chat.getState().open(long.id);
    await settle();
    assert.equal(stores.budget.getState().budget?.used, 305, 'the long chat, once open');
    hold = true;
    const opening = stores.chat.getState().open(other.id);
    await settle();
    assert.equal(stores.budget.getState().budget?.used, 305, 'while the other chat loads');
    (release as (() => void) | null)?.();
    await opening;
    hold = false;
    await stores.budget.getState().refresh();
    assert.equal(stores.budget.getState().budget?.used, 105);
    stores.dispose();
  });

  it('settings changes re-ask the budget', async () => {
    const { stores } = await boot((f) => void f.addConversation('chat'));
    assert.ok(await stores.settings.getState().update({ maxContext: 4096 }));
    await settle();
    assert.equal(stores.settings.getState().settings?.maxContext, 4096);
    assert.equal(stores.budget.getState().budget?.maxContext, 4096);
  });
});

describe('renderer stores: conversations', () => {
  it('new chat creates and opens it; rename and search by title', async () => {
    const { fake, timers, stores } = await boot((f) => void f.addConversation('Cooking', [['user', 'pasta?']]));
    await stores.conversations.getState().create();
    const created = stores.chat.getState().conversationId!;
    assert.equal(stores.conversations.getState().items[0].id, created);
    assert.ok(await stores.conversations.getState().rename(created, '  Gardening  '));
    assert.equal(stores.conversations.getState().items.find((c) => c.id === created)?.title, 'Gardening');
    stores.conversations.getState().setSearch('cook');
    assert.equal(stores.conversations.getState().search, 'cook');
    assert.equal(timers.runDue(), 1, 'one debounced call waits');
    await settle();
    assert.deepEqual(fake.calls.filter(([m]) => m === 'listConversations').at(-1)?.[1], { search: 'cook' });
    assert.deepEqual(stores.conversations.getState().items.map((c) => c.title), ['Cooking']);
  });

  it('deleting the open conversation opens the most recent remaining one', async () => {
    const { stores } = await boot((f) => {
      f.addConversation('a');
      f.addConversation('b');
    });
    const [b, a] = stores.conversations.getState().items;
    assert.equal(stores.chat.getState().conversationId, b.id);
    assert.ok(await stores.conversations.getState().remove(b.id));
    assert.equal(stores.chat.getState().conversationId, a.id);
    assert.ok(await stores.conversations.getState().remove(a.id));
    assert.equal(stores.chat.getState().conversationId, null);
  });

  it('a search that hides the open chat keeps its title, policy and Think toggle (the header said "New chat")', async () => {
    const { fake, timers, stores } = await boot((f) => {
      f.addConversation('Cooking', [['user', 'pasta?']]);
      const open = f.addConversation('Harbor notes', [['user', 'tides?']]);
      open.contextFullPolicy = 'rolling-window';
      open.thinking = false;
    });
    const open = stores.chat.getState().conversationId!;
    assert.equal(summaryById(stores.conversations.getState(), open)?.title, 'Harbor notes');
    stores.conversations.getState().setSearch('cook');
    timers.runDue();
    await settle();
    assert.deepEqual(stores.conversations.getState().items.map((c) => c.title), ['Cooking'], 'the open chat is not listed');
    const summary = summaryById(stores.conversations.getState(), open);
    assert.deepEqual([summary?.title, summary?.contextFullPolicy, summary?.thinking], ['Harbor notes', 'rolling-window', false]);
    // Renamed elsewhere while hidden: the event updates it too.
    const all = [...fake.conversations.values()].map(({ messages: _m, ...c }) => ({ ...c, title: c.id === open ? 'Harbor, renamed' : c.title }));
    fake.emit('conversationsChanged', { conversations: all });
    assert.equal(summaryById(stores.conversations.getState(), open)?.title, 'Harbor, renamed');
    assert.ok(await stores.conversations.getState().remove(open));
    assert.equal(summaryById(stores.conversations.getState(), open), null, 'forgotten when deleted');
  });

  it('conversationsChanged replaces the list', async () => {
    const { fake, stores } = await boot();
    fake.emit('conversationsChanged', { conversations: [{ id: 'x', title: 'From elsewhere', createdAt: 1, updatedAt: 2 }] });
    assert.deepEqual(stores.conversations.getState().items.map((c) => c.title), ['From elsewhere']);
  });
});

describe('renderer stores: conversations as users expect them', () => {
  it('New chat while the open chat is still empty keeps it (no second empty chat)', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('old', [['user', 'hi']]));
    await stores.conversations.getState().create();
    const created = stores.chat.getState().conversationId;
    await stores.conversations.getState().create();
    assert.equal(fake.count('createConversation'), 1);
    assert.equal(stores.chat.getState().conversationId, created);
  });

  it('New chat while the services are slow to create it: what is typed, and a message sent, go into the new chat (was: the draft went back to the old chat and Enter did nothing)', async () => {
    const { fake, old, stores, release } = await bootSlowToCreate();
    const { chat } = stores;
    assert.equal(chat.getState().conversationId, old.id);
    const creating = stores.conversations.getState().create();
    await settle();
    assert.deepEqual(chat.getState().messages, [], 'the empty chat shows at once');
    chat.getState().setDraft('Tell me a story');
    const sent = chat.getState().send();
    await settle();
    assert.equal(fake.count('sendMessage'), 0, 'nothing sent before the conversation exists');
    release();
    await creating;
    assert.ok(await sent, 'the send went through');
    await settle();
    const created = chat.getState().conversationId!;
    assert.notEqual(created, old.id);
    assert.equal(fake.count('createConversation'), 1, 'one conversation, not one for New chat and one for the send');
    assert.deepEqual(fake.calls.find(([m]) => m === 'sendMessage')?.[1], { conversationId: created, content: 'Tell me a story' });
    assert.equal(stores.conversations.getState().items[0].id, created, 'listed first');
    await chat.getState().open(old.id);
    assert.equal(chat.getState().draft, '', "the old chat's draft did not get the text");
    stores.dispose();
  });

  it('New chat: text typed before the conversation exists stays in it', async () => {
    const { stores, release } = await bootSlowToCreate();
    const creating = stores.conversations.getState().create();
    await settle();
    stores.chat.getState().setDraft('half a thought');
    release();
    await creating;
    await settle();
    const created = stores.chat.getState().conversationId;
    assert.ok(created);
    assert.equal(stores.chat.getState().draft, 'half a thought');
    await stores.chat.getState().open(null);
    assert.equal(stores.chat.getState().draft, '', 'kept under the new chat, not as the no-conversation draft');
    await stores.chat.getState().open(created);
    assert.equal(stores.chat.getState().draft, 'half a thought');
    stores.dispose();
  });

  it('drafts are kept per conversation and across a reload (storage)', async () => {
    const storage = new Map<string, string>();
    const kv = { getItem: (k: string) => storage.get(k) ?? null, setItem: (k: string, v: string) => void storage.set(k, v) };
    const fake = new FakeApi();
    const a = fake.addConversation('a');
    const b = fake.addConversation('b');
    const first = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5, storage: kv });
    await first.start(a.id);
    first.chat.getState().setDraft('for a');
    await first.chat.getState().open(b.id);
    assert.equal(first.chat.getState().draft, '');
    first.chat.getState().setDraft('for b');
    first.dispose();
    const reloaded = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5, storage: kv });
    await reloaded.start(b.id);
    assert.equal(reloaded.chat.getState().conversationId, b.id, 'the #id opens that chat, not the most recent');
    assert.equal(reloaded.chat.getState().draft, 'for b');
    await reloaded.chat.getState().open(a.id);
    assert.equal(reloaded.chat.getState().draft, 'for a');
    reloaded.dispose();
  });

  it('deleting a chat forgets its draft, also in storage; a chat deleted elsewhere too', async () => {
    const storage = new Map<string, string>();
    const kv = { getItem: (k: string) => storage.get(k) ?? null, setItem: (k: string, v: string) => void storage.set(k, v) };
    const fake = new FakeApi();
    const a = fake.addConversation('a');
    const b = fake.addConversation('b');
    const c = fake.addConversation('c');
    const stores = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5, storage: kv });
    await stores.start(a.id);
    stores.chat.getState().setDraft('draft of a');
    await stores.chat.getState().open(b.id);
    stores.chat.getState().setDraft('draft of b');
    await stores.chat.getState().open(c.id);
    stores.chat.getState().setDraft('draft of c');
    const saved = () => JSON.parse(storage.get('ropewalk.drafts') ?? '{}') as Record<string, string>;
    assert.deepEqual(Object.keys(saved()).sort(), [a.id, b.id, c.id].sort());
    assert.equal(await stores.conversations.getState().remove(a.id), true);
    assert.equal(saved()[a.id], undefined, 'the deleted chat’s draft left storage');
    // Deleted in another window: the event's list no longer has b.
    fake.emit('conversationsChanged', { conversations: [{ id: c.id, title: 'c', createdAt: 1, updatedAt: 2 }] });
    assert.deepEqual(saved(), { [c.id]: 'draft of c' });
    stores.dispose();
    // A reload whose list lacks c (deleted while this window was closed) forgets it as well.
    fake.conversations.delete(c.id);
    const reloaded = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5, storage: kv });
    await reloaded.start();
    assert.deepEqual(saved(), {});
    reloaded.dispose();
  });

  it("a chat's own context-full policy is set, listed and cleared; the list follows", async () => {
    const fake = new FakeApi();
    const c = fake.addConversation('long one');
    const stores = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5 });
    await stores.start(c.id);
    assert.equal(await stores.conversations.getState().setPolicy(c.id, 'rolling-window'), true);
    assert.equal(stores.conversations.getState().items.find((x) => x.id === c.id)?.contextFullPolicy, 'rolling-window');
    assert.deepEqual(fake.calls.filter(([m]) => m === 'setConversationPolicy').map(([, r]) => r), [{ id: c.id, policy: 'rolling-window' }]);
    assert.equal(await stores.conversations.getState().setPolicy(c.id, null), true);
    assert.equal(stores.conversations.getState().items.find((x) => x.id === c.id)?.contextFullPolicy, undefined);
    fake.fail('setConversationPolicy', 'NOT_FOUND', 'no conversation x');
    assert.equal(await stores.conversations.getState().setPolicy(c.id, 'stop'), false);
    assert.match(stores.notices.getState().notices.at(-1)?.message ?? '', /no conversation x/);
    stores.dispose();
  });

  it('start with an #id that no longer exists opens the most recent chat', async () => {
    const fake = new FakeApi();
    fake.addConversation('older');
    const newer = fake.addConversation('newer');
    const stores = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5 });
    await stores.start('deleted-id');
    assert.equal(stores.chat.getState().conversationId, newer.id);
    stores.dispose();
  });

  it('selectBranch shows the chosen version and re-asks the budget; refused while generating', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat', [['user', 'q'], ['assistant', 'second']]));
    const c = [...fake.conversations.values()][0];
    const other = fake.message(c.id, 'assistant', 'first, a longer answer', 'complete');
    const current = c.messages[1];
    fake.onSelectBranch = (conv, id) => {
      conv.messages[1] = id === other.id ? { ...other, branches: [other.id, current.id] } : { ...current, branches: [other.id, current.id] };
    };
    const before = fake.count('getBudget');
    await stores.chat.getState().selectBranch(other.id);
    await settle();
    assert.deepEqual(stores.chat.getState().messages.map((m) => m.content), ['q', 'first, a longer answer']);
    assert.deepEqual(stores.chat.getState().messages[1].branches, [other.id, current.id]);
    assert.ok(fake.count('getBudget') > before, 'the meter follows the chosen version');
    stores.chat.getState().setDraft('x');
    assert.ok(await stores.chat.getState().send());
    await stores.chat.getState().selectBranch(current.id);
    assert.equal(fake.count('selectBranch'), 1, 'no switch while an answer streams');
  });

  it('importFile opens the imported chat; a file that is not an export is a notice', async () => {
    const { fake, stores } = await boot();
    const file = JSON.stringify({ format: 'ropewalk.conversation', version: 1, title: 'Saved', messages: [{ role: 'user', content: 'q', status: 'complete' }, { role: 'assistant', content: 'a', status: 'complete', stats: null }] });
    assert.ok(await stores.conversations.getState().importFile(file));
    assert.deepEqual(stores.chat.getState().messages.map((m) => m.content), ['q', 'a']);
    assert.equal(stores.conversations.getState().items[0].title, 'Saved');
    assert.equal(await stores.conversations.getState().importFile('{"format":"x"}'), false);
    assert.match(stores.notices.getState().notices.at(-1)!.message, /not a Ropewalk conversation export/);
    assert.equal(fake.count('importConversation'), 1);
  });

  it('search results keep the matching text for the list', async () => {
    const { stores } = await boot((f) => void f.addConversation('t'));
    stores.conversations.getState().apply([{ id: 'x', title: 'T', createdAt: 1, updatedAt: 2, match: '…some basil…' }]);
    stores.conversations.getState().upsert({ id: 'y', title: 'U', createdAt: 1, updatedAt: 3, match: 'm' });
    assert.equal(stores.conversations.getState().items.find((c) => c.id === 'y')?.match, 'm');
  });
});

describe('renderer stores: model and errors', () => {
  it('modelState events update the model; a failed open shows its error', async () => {
    const { fake, stores } = await boot();
    fake.emit('modelState', { ...fake.model, status: 'loading', progress: { phase: 'import', fraction: 0.5 } });
    assert.equal(stores.model.getState().model?.status, 'loading');
    await stores.model.getState().open('/nowhere/model.bin');
    assert.equal(stores.model.getState().openError, 'cannot read /nowhere/model.bin');
    assert.equal(stores.model.getState().opening, false);
  });

  it('open sends the weights choice: quantize q4/q8 with the path, null when the weights stay as stored, none for the remembered choice', async () => {
    const { fake, stores } = await boot();
    await stores.model.getState().open('  /models/qwen3-hf ', 'q4');
    await stores.model.getState().open('/models/qwen3-hf', 'q8');
    await stores.model.getState().open('/models/qwen3-hf', null);
    await stores.model.getState().open('/models/qwen3-hf');
    assert.deepEqual(
      fake.calls.filter(([m]) => m === 'openModel').map(([, r]) => r),
      [{ path: '/models/qwen3-hf', quantize: 'q4' }, { path: '/models/qwen3-hf', quantize: 'q8' }, { path: '/models/qwen3-hf', quantize: null }, { path: '/models/qwen3-hf' }],
    );
    assert.equal(stores.model.getState().openError, null);
  });

  it('a model-load error is shown once (at the path field, not in the banner) and clears when a model loads', async () => {
    const { fake, stores } = await boot();
    await stores.model.getState().open('/nowhere/model.bin');
    assert.equal(loadErrorOf(stores.model.getState()), 'cannot read /nowhere/model.bin');
    assert.deepEqual(stores.notices.getState().notices, [], 'no banner copy (was: card, field and banner)');
    // The services' own record of the failed load is the same sentence: still one.
    fake.emit('modelState', { ...fake.model, error: 'cannot read /nowhere/model.bin' });
    assert.equal(loadErrorOf(stores.model.getState()), 'cannot read /nowhere/model.bin');
    fake.emit('modelState', { ...fake.model, status: 'ready', error: null });
    assert.equal(loadErrorOf(stores.model.getState()), null, 'a model loaded: the error is gone');
  });

  it('the memory refusal after a max-context change is said once (the path field), and a later load clears any banner of it', async () => {
    const { fake, stores } = await boot();
    const refusal = 'the model needs about 28.45 GiB (…) but only 8.00 GiB of memory is available; set the max context to 35072 or less';
    fake.fail('updateSettings', 'MODEL_LOAD', refusal);
    assert.equal(await stores.settings.getState().update({ maxContext: 131_072 }), false);
    fake.emit('modelState', { ...fake.model, status: 'ready', error: refusal }); // the services keep the old model and say why
    assert.equal(loadErrorOf(stores.model.getState()), refusal);
    assert.deepEqual(stores.notices.getState().notices, [], 'not in the banner as well (it was, twice over)');
    // A banner of a failed load from elsewhere (an older window's call) goes once a model loads.
    stores.notices.getState().report(Object.assign(new Error(refusal), { code: 'MODEL_LOAD' }));
    stores.notices.getState().report(Object.assign(new Error('The database is locked.'), { code: 'DB' }));
    fake.emit('modelState', { ...fake.model, status: 'ready', error: null });
    assert.equal(loadErrorOf(stores.model.getState()), null);
    assert.deepEqual(stores.notices.getState().notices.map((n) => n.code), ['DB'], 'the load notice went; others stay');
    // Other settings errors still reach the banner.
    fake.fail('updateSettings', 'INVALID_REQUEST', 'invalid settings: max tokens (600) must be less than the max context (512)');
    await stores.settings.getState().update({ maxTokens: 600 });
    assert.equal(stores.notices.getState().notices.at(-1)?.code, 'INVALID_REQUEST');
  });

  it('banners: the same notice is shown once however often it recurs, and each can be dismissed', async () => {
    const { stores } = await boot();
    stores.notices.getState().report(Object.assign(new Error('The database is locked.'), { code: 'DB' }));
    stores.notices.getState().report(Object.assign(new Error('No model is loaded.'), { code: 'MODEL_NOT_READY' }));
    stores.notices.getState().report(Object.assign(new Error('The database is locked.'), { code: 'DB' }));
    const notices = stores.notices.getState().notices;
    assert.deepEqual(notices.map((n) => n.code), ['MODEL_NOT_READY', 'DB'], 'no second copy; the repeat moves last');
    for (const n of notices) stores.notices.getState().dismiss(n.id);
    assert.deepEqual(stores.notices.getState().notices, []);
  });

  it('Stop in the first moment after Enter (budget still being checked) is kept: the message goes, its answer is stopped at once', async () => {
    for (const open of [true, false]) {
      const fake = new FakeApi();
      const c = fake.addConversation('a');
      const stores = createStores(fake.asApi(), { frames: new ManualFrames(), debounceMs: 5 });
      await stores.start(c.id);
      if (!open) await stores.chat.getState().open(null); // no conversation yet: send creates one
      stores.chat.getState().setDraft('tell me a story');
      const sent = stores.chat.getState().send();
      assert.equal(isGenerating(stores.chat.getState()), true, 'Escape applies from the keypress on');
      await stores.chat.getState().stop();
      assert.equal(fake.count('stopGeneration'), 0, 'nothing to stop yet: the send has not reached the services');
      assert.equal(await sent, true);
      const order = fake.calls.map(([m]) => m).filter((m) => m === 'sendMessage' || m === 'stopGeneration');
      assert.deepEqual(order, ['sendMessage', 'stopGeneration'], 'the stop follows the send it stops');
      const conversationId = stores.chat.getState().conversationId;
      assert.deepEqual(fake.calls.find(([m]) => m === 'stopGeneration')?.[1], { conversationId });
      assert.equal(stores.chat.getState().draft, '');
      stores.dispose();
    }
  });

  it('a failed send shows a dismissible notice, restores the draft and removes the optimistic message', async () => {
    const { fake, stores } = await boot((f) => void f.addConversation('chat'));
    fake.fail('sendMessage', 'MODEL_NOT_READY', 'No model is loaded.');
    stores.chat.getState().setDraft('hello?');
    assert.equal(await stores.chat.getState().send(), false);
    assert.deepEqual(stores.chat.getState().messages, []);
    assert.equal(stores.chat.getState().draft, 'hello?');
    assert.equal(stores.chat.getState().pending, null);
    const [notice] = stores.notices.getState().notices;
    assert.deepEqual({ code: notice.code, message: notice.message }, { code: 'MODEL_NOT_READY', message: 'No model is loaded.' });
    stores.notices.getState().dismiss(notice.id);
    assert.deepEqual(stores.notices.getState().notices, []);
  });

  it('failed loads at startup become notices, not exceptions', async () => {
    const { stores } = await boot((f) => {
      f.fail('getModel', 'ENGINE', 'The engine worker stopped.');
      f.fail('listConversations', 'DB', 'The database is locked.');
    });
    assert.deepEqual(stores.notices.getState().notices.map((n) => n.code).sort(), ['DB', 'ENGINE']);
    assert.equal(stores.model.getState().model, null);
  });

  it('dispose unsubscribes from events', async () => {
    const { fake, stores } = await boot();
    stores.dispose();
    fake.emit('conversationsChanged', { conversations: [{ id: 'x', title: 'late', createdAt: 1, updatedAt: 2 }] });
    assert.deepEqual(stores.conversations.getState().items, []);
  });
});
