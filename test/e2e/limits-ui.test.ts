/**
 * The context limit's edges, in Chromium through `serve` with the real stories260K (max context
 * 512, max new tokens 128 by default), on conversations seeded in the store and counted by the
 * loaded model's own tokenizer through serve's `POST /tokenize` (not the budget code):
 *   1. Truncate the middle: the meter shows what will be sent, never more than the max, with
 *      "(N dropped)" where N = the whole conversation's count − the count shown; not refused.
 *   2. Rolling window with an empty draft and a last exchange longer than the max: no refusal
 *      (it read 538 / 512 in red with a refusal that went away once one typed), Send works
 *      once one types.
 *   3. The last exchange alone over the max (Stop): Send is disabled with the reason; the offers
 *      are buttons and only what can work: "Use a rolling window" (this chat's policy, the
 *      setting stays Stop), no shorter reply; where a shorter reply fits it is offered at the
 *      size that fits and sets this chat's max new tokens (the setting stays 128); "New chat
 *      with a summary" opens a new chat whose message starts with one and fits.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { ConversationStore } from '../../main/services/store.ts';
import { startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';

const SENTENCE = 'Once upon a time there was a little girl named Lily. ';
const story = (n: number) => SENTENCE.repeat(n).trim();
type Turn = ['user' | 'assistant', string];

const CHATS: Record<string, { policy: 'truncate-middle' | 'rolling-window' | null; turns: Turn[] }> = {
  Truncate: {
    policy: 'truncate-middle',
    turns: [['user', 'Hello there.'], ['assistant', story(2)], ...Array.from({ length: 4 }, (): Turn[] => [['user', 'Tell me more.'], ['assistant', story(8)]]).flat(), ['user', 'And then?'], ['assistant', story(4)]],
  },
  Rolling: { policy: 'rolling-window', turns: [['user', 'Tell a story.'], ['assistant', story(8)], ['user', 'Another one.'], ['assistant', story(40)]] },
  'Too long': { policy: null, turns: [['user', 'Tell a story.'], ['assistant', story(40)]] },
  Shorter: { policy: null, turns: [['user', 'Tell a story.'], ['assistant', story(28)]] },
  Summary: { policy: null, turns: [['user', 'Tell a story about a cat.'], ['assistant', story(40)]] },
};

let app: E2eApp;
let page: Page;

before(async () => {
  app = await startE2eApp((store: ConversationStore) => {
    for (const [title, { policy, turns }] of Object.entries(CHATS)) {
      const c = store.createConversation(title);
      for (const [role, content] of turns) store.appendMessage(c.id, { role, content, status: 'complete' });
      if (policy) store.setConversationPolicy(c.id, policy);
    }
  });
  page = await app.browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.goto(app.url);
  await page.getByText('ready', { exact: true }).first().waitFor({ timeout: 90_000 });
});
after(async () => {
  await app?.close();
});

/** The loaded model's own count of a chat (serve's /tokenize, as generation renders it). */
async function modelCount(turns: readonly Turn[]): Promise<number> {
  const r = await fetch(new URL('/tokenize', app.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: turns.map(([role, content]) => ({ role, content })) }) });
  assert.equal(r.status, 200);
  return ((await r.json()) as { count: number }).count;
}

const meter = () => page.getByRole('meter');
const meterNow = async () => Number(await meter().getAttribute('aria-valuenow'));
const meterText = () => page.locator('.meter-text').innerText();

async function openChat(title: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Conversations' }).getByText(title, { exact: true }).click();
  await until(`${title} is open`, async () => (await page.locator('.chat-title').innerText()) === title, 10_000);
}

test('truncate the middle: the meter shows what is sent, at most the max, and how many tokens are dropped', async () => {
  const whole = await modelCount(CHATS.Truncate.turns);
  assert.ok(whole > 512, `the seeded chat is over the max context (${whole})`);
  await openChat('Truncate');
  await until('the meter counts the kept part', async () => /dropped/.test(await meterText()), 30_000);
  const used = await meterNow();
  assert.ok(used <= 512 - 128, `used ${used}: the prompt fits with the reply reserve`);
  assert.equal(await meterText(), `${used} / 512 (${whole - used} dropped)`);
  assert.ok((await page.locator('.msg-out-label').count()) > 0, 'messages are marked not in context');
  assert.equal(await page.locator('#composer-reason').count(), 0, 'not refused');
});

test('rolling window, empty draft, a last exchange over the max: no refusal, and none once one types', async () => {
  const last = await modelCount(CHATS.Rolling.turns.slice(2));
  assert.ok(last > 512, `the last exchange alone is over the max (${last})`);
  await openChat('Rolling');
  await until('the meter is counted', async () => /dropped/.test(await meterText()), 30_000);
  assert.ok((await meterNow()) <= 512);
  assert.equal(await page.locator('.meter-wrap.meter-red').count(), 0, 'not red');
  assert.equal(await page.locator('#composer-reason').count(), 0, 'no refusal with an empty draft');
  await page.getByRole('textbox', { name: 'Message' }).fill('Hi');
  await until('Send is enabled', async () => await page.getByRole('button', { name: 'Send' }).isEnabled(), 10_000);
  assert.equal(await page.locator('#composer-reason').count(), 0, 'no refusal once one types');
});

test('the last exchange alone over the max: Send disabled with the reason; a rolling window for this chat is offered, no shorter reply', async () => {
  await openChat('Too long');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Hi');
  const reason = page.locator('#composer-reason');
  await reason.waitFor({ timeout: 30_000 });
  const send = page.getByRole('button', { name: 'Send' });
  assert.equal(await send.isDisabled(), true, 'Send is disabled while refused');
  assert.equal(await send.getAttribute('aria-describedby'), 'composer-reason');
  assert.equal(await send.getAttribute('title'), await reason.innerText());
  const offers = page.getByRole('group', { name: 'Make it fit' }).getByRole('button');
  assert.deepEqual(await offers.allInnerTexts(), ['New chat', 'New chat with a summary', 'Use a rolling window']);
  // The offers look like buttons: a border and a background of their own, unlike the text around them.
  const look = await offers.first().evaluate((el) => ({ border: getComputedStyle(el).borderTopWidth, bg: getComputedStyle(el).backgroundColor }));
  assert.notEqual(look.border, '0px', JSON.stringify(look));
  await page.getByRole('button', { name: 'Use a rolling window' }).click();
  await until('the refusal is gone', async () => (await reason.count()) === 0, 30_000);
  assert.equal(await send.isEnabled(), true);
  assert.equal(await page.locator('#setting-chat-policy').inputValue(), 'rolling-window', "this chat's policy");
  assert.equal(await page.locator('#setting-context-full').inputValue(), 'stop', 'the setting stays');
  await box.fill('');
});

test("a shorter reply is offered only at a size that fits, and sets this chat's max new tokens, not the setting", async () => {
  await openChat('Shorter');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Hi');
  const withDraft = await modelCount([...CHATS.Shorter.turns, ['user', 'Hi']]);
  assert.ok(withDraft < 512 && withDraft + 128 > 512, `the seeded chat needs a shorter reply (${withDraft})`);
  await page.locator('#composer-reason').waitFor({ timeout: 30_000 });
  const fitting = 512 - withDraft;
  const offer = page.getByRole('button', { name: `Shorter reply (${fitting} tokens)` });
  await offer.waitFor({ timeout: 10_000 });
  await offer.click();
  await until('the refusal is gone', async () => (await page.locator('#composer-reason').count()) === 0, 30_000);
  assert.equal(await meterNow(), withDraft);
  assert.equal(await page.locator('#setting-maxTokens').inputValue(), '128', 'the setting stays');
  await page.getByLabel('Chat settings').click();
  assert.equal(await page.locator('#chat-maxTokens').inputValue(), String(fitting), "this chat's own max new tokens");
});

test('"New chat with a summary": a new chat whose message starts with a summary of the old one, then the draft; it fits', async () => {
  await openChat('Summary');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('What next?');
  await page.locator('#composer-reason').waitFor({ timeout: 30_000 });
  await page.getByRole('button', { name: 'New chat with a summary' }).click();
  await until('a new chat is open', async () => (await page.locator('.chat-title').innerText()) === 'New chat', 10_000);
  const text = await box.inputValue();
  assert.match(text, /^Summary of an earlier chat:\n- I asked: Tell a story about a cat\.\n- The last answer began: Once upon a time/);
  assert.ok(text.endsWith('\n\nWhat next?'), JSON.stringify(text.slice(-40)));
  const expected = await modelCount([['user', text]]);
  await until('the meter counts it', async () => (await meterNow()) === expected, 30_000);
  assert.equal(await page.locator('#composer-reason').count(), 0, 'it fits');
});
