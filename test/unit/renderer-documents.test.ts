/**
 * The chat store's documents slice with the in-memory fake services: attaching files (bytes sent
 * as base64, the chip info back), the budget counting them, Send carrying them and clearing the
 * composer, an error naming the file with nothing attached, "use the relevant parts" recounting,
 * a chat switch starting without them, and opening a document's text.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createStores } from '../../renderer/stores/index.ts';
import { FakeApi, ManualFrames, ManualTimers, settle } from './renderer-fakes.ts';

const file = (name: string, text: string) => ({ name, arrayBuffer: async () => new TextEncoder().encode(text).buffer as ArrayBuffer });

it('attach, count, send with the message, refuse a bad file, use the relevant parts, open, switch chats', async () => {
  const fake = new FakeApi();
  const timers = new ManualTimers();
  const stores = createStores(fake.asApi(), { frames: new ManualFrames(), timers, debounceMs: 5 });
  await stores.start();
  await settle();
  const chat = () => stores.chat.getState();

  await chat().attachFiles([file('a.md', 'alpha text'), file('empty.txt', '')]);
  timers.runDue(); // the budget's debounced recount, if the attach scheduled one
  await settle();
  assert.deepEqual(chat().attachments.map((a) => [a.name, a.tokens]), [['a.md', 10]]);
  assert.deepEqual(chat().attaching, []);
  assert.match(stores.notices.getState().notices.at(-1)?.message ?? '', /^empty\.txt: no text found/);
  assert.equal(stores.budget.getState().budget?.documents, 10, 'the meter counts the attached document');

  await chat().openDocument(chat().attachments[0].id);
  assert.equal(chat().reading?.text, 'alpha text');
  chat().closeDocument();

  chat().setFit('relevant');
  await settle();
  const lastBudget = fake.calls.filter(([m]) => m === 'getBudget').at(-1)![1] as { documents?: { fit: string }[] };
  assert.deepEqual(lastBudget.documents?.map((d) => d.fit), ['relevant']);

  chat().setDraft('what is alpha?');
  assert.equal(await chat().send(), true);
  const sent = fake.calls.find(([m]) => m === 'sendMessage')![1] as { documents: { id: string; fit: string }[] };
  assert.deepEqual(sent.documents.map((d) => d.fit), ['relevant']);
  assert.deepEqual(chat().attachments, [], 'the composer is empty again');
  assert.deepEqual(chat().messages[0].documents?.map((d) => d.name), ['a.md'], 'the chip is on the message');

  await chat().attachFiles([file('b.txt', 'beta')]);
  await chat().open(null);
  assert.deepEqual(chat().attachments, [], 'another chat starts without them');
  stores.dispose();
});
