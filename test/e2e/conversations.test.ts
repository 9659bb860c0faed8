/**
 * End to end, conversations and rendering as users expect them (issue 10), in `serve` mode with
 * headless Chromium over a seeded database: code highlighted, TeX typeset by KaTeX (invalid TeX
 * shown as its text, no error), a wide table that scrolls instead of splitting words, a very long
 * message cut with "Show all"; search that finds message text and marks the hits; renaming that
 * keeps the order; New chat that does not make a second empty chat; the open chat and each
 * chat’s unsent draft surviving a reload (the URL carries `#id`); regenerate leaving branches
 * (‹ 1/2 ›) that the meter follows; export to Markdown and JSON and the JSON imported back.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { ARTIFACTS, startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';

const RICH = [
  'Energy: $E = mc^2$ and a broken one: $\\frac{1$ here.',
  '',
  '$$',
  '\\int_0^1 x\\,dx = \\tfrac{1}{2}',
  '$$',
  '',
  '```python',
  'def add(a, b):',
  '    return a + b  # sum',
  '```',
  '',
  `| ${Array.from({ length: 12 }, (_, i) => `Column${i}WithALongName`).join(' | ')} |`,
  `|${' --- |'.repeat(12)}`,
  `| ${Array.from({ length: 12 }, (_, i) => `value${i}unbreakable`).join(' | ')} |`,
].join('\n');
const LONG = Array.from({ length: 600 }, (_, i) => `Line ${i + 1} of a very long answer.`).join('\n\n');

let app: E2eApp;
let page: Page;
const pageErrors: string[] = [];
const ids: Record<string, string> = {};

before(async () => {
  app = await startE2eApp((store) => {
    const add = (title: string, pairs: Array<[string, string]>) => {
      const c = store.createConversation(title);
      ids[title] = c.id;
      for (const [role, content] of pairs) store.appendMessage(c.id, { role: role as 'user' | 'assistant', content, status: 'complete' });
    };
    add('Cooking', [['user', 'What herb goes with tomatoes?'], ['assistant', 'Fresh basil, torn by hand, added at the end.']]);
    add('Long one', [['user', 'Write a lot'], ['assistant', LONG]]);
    add('Rich output', [['user', 'Show me math, code and a table'], ['assistant', RICH]]);
  });
  page = await app.browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(app.url);
});

after(async () => {
  await app?.close();
});

const nav = () => page.getByRole('navigation', { name: 'Conversations' });
const titles = async () => (await nav().locator('.conv-title').allInnerTexts()).map((t) => t.trim());
const js = <T,>(expression: string) => page.evaluate(expression) as Promise<T>;

test('rendering: code highlighted, KaTeX math (invalid TeX as text), a wide table scrolls, a long message is cut with "Show all"', async () => {
  await nav().getByRole('link', { name: /Rich output/ }).click();
  const answer = page.locator('.msg-assistant').last();
  await answer.locator('.katex').first().waitFor();
  assert.ok((await answer.locator('.katex').count()) >= 2, 'inline and display math typeset');
  assert.equal(await answer.locator('.katex-display').count(), 1);
  assert.equal(await answer.locator('.katex-error').innerText(), '\\frac{1', 'invalid TeX is shown as its text');
  assert.equal(await page.locator('.notice').count(), 0, 'and raises no error');
  assert.ok((await answer.locator('pre .hljs-keyword').count()) >= 2, 'def and return highlighted');
  assert.ok(await answer.locator('pre .hljs-comment').count());
  const [scrollWidth, clientWidth] = await js<[number, number]>(`(() => { const t = document.querySelector('.msg-assistant .table-wrap'); return [t.scrollWidth, t.clientWidth]; })()`);
  assert.ok(scrollWidth > clientWidth, `the table scrolls sideways (${scrollWidth} > ${clientWidth})`);
  const cell = await js<[number, number]>(`(() => { const td = document.querySelector('.msg-assistant .table-wrap td'); const r = document.createRange(); r.selectNodeContents(td); return [r.getClientRects().length, td.textContent.length]; })()`);
  assert.equal(cell[0], 1, 'a cell’s word stays on one line');
  const fonts = await js<string[]>(`[...document.fonts].filter((f) => f.family.includes('KaTeX') && f.status === 'loaded').map((f) => f.family)`);
  assert.ok(fonts.length > 0, 'KaTeX fonts load from the app itself (CSP font-src self)');
  await page.screenshot({ path: path.join(ARTIFACTS, 'rendering-1280-light.png') });

  await nav().getByRole('link', { name: /Long one/ }).click();
  const showAll = page.getByRole('button', { name: 'Show all' });
  await showAll.waitFor();
  const cut = await js<[number, number]>(`(() => { const b = document.querySelector('.msg-assistant .collapse-limited > .collapse-body'); return [b.clientHeight, b.scrollHeight]; })()`);
  assert.ok(cut[0] < cut[1] / 2, `the message is cut after a few screens (${cut[0]} of ${cut[1]} px shown)`);
  await showAll.click();
  await page.getByRole('button', { name: 'Show less' }).waitFor();
  await page.getByText('Line 600 of a very long answer.').scrollIntoViewIfNeeded();
  assert.ok(await page.getByText('Line 600 of a very long answer.').isVisible());
  assert.equal(await page.getByRole('button', { name: 'Show all' }).count(), 0);
  assert.deepEqual(pageErrors, []);
});

test('search finds message text and marks it; renaming keeps the order; New chat makes no second empty chat', async () => {
  const search = page.getByRole('searchbox', { name: 'Search conversations' });
  await search.fill('basil');
  await until('only Cooking is listed', async () => JSON.stringify(await titles()) === JSON.stringify(['Cooking']), 10_000);
  assert.equal(await nav().locator('.conv-match mark').first().innerText(), 'basil', 'the hit is marked in the text shown');
  await search.fill('');
  await until('all are listed', async () => (await titles()).length === 3, 10_000);

  const order = await titles();
  const cooking = nav().locator('.conv-item', { hasText: 'Cooking' });
  await cooking.hover();
  await cooking.getByRole('button', { name: 'Rename' }).click();
  const field = page.getByRole('textbox', { name: 'Conversation title' });
  await field.fill('Cooking with herbs');
  await field.press('Enter');
  await until('the new title shows', async () => (await titles()).includes('Cooking with herbs'), 10_000);
  assert.deepEqual(await titles(), order.map((t) => (t === 'Cooking' ? 'Cooking with herbs' : t)), 'same place in the list');

  const newChat = page.locator('.sidebar').getByRole('button', { name: 'New chat' });
  await newChat.click();
  await until('one new chat', async () => (await titles()).length === 4, 10_000);
  await newChat.click();
  await page.waitForTimeout(500);
  assert.equal((await titles()).length, 4, 'the empty chat is reused, not doubled');
  assert.deepEqual(pageErrors, []);
});

test('a reload reopens the open chat (#id in the URL) with each chat’s unsent draft', async () => {
  const composer = page.getByRole('textbox', { name: 'Message' });
  await nav().getByRole('link', { name: /Long one/ }).click();
  await composer.fill('draft for the long one');
  await nav().getByRole('link', { name: /Cooking with herbs/ }).click();
  await until('the Cooking chat is open', async () => (await page.locator('.chat-title').innerText()) === 'Cooking with herbs', 10_000);
  assert.equal(await composer.inputValue(), '', 'each chat has its own draft');
  await composer.fill('draft for cooking');
  assert.ok(page.url().endsWith(`#${ids.Cooking}`), `the URL names the open chat (${page.url()})`);

  await page.reload();
  await until('the Cooking chat is open again', async () => (await page.locator('.chat-title').innerText()) === 'Cooking with herbs', 30_000);
  assert.equal(await composer.inputValue(), 'draft for cooking');
  await nav().getByRole('link', { name: /Long one/ }).click();
  await until('the long one’s draft is back', async () => (await composer.inputValue()) === 'draft for the long one', 10_000);
  assert.deepEqual(pageErrors, []);
});

test('regenerate keeps the earlier answer as a branch (‹ 1/2 ›); the meter follows the chosen one; it survives a reload', async () => {
  await nav().getByRole('link', { name: /Cooking with herbs/ }).click();
  const answer = page.locator('.msg-assistant').last();
  await answer.getByText('Fresh basil', { exact: false }).waitFor();
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  let lastMeter = -1;
  const meter = async () => (lastMeter = Number(await page.getByRole('meter').getAttribute('aria-valuenow')));
  await page.getByRole('textbox', { name: 'Message' }).fill('');
  let previous = -1;
  await until('the meter settles on the seeded answer without the draft', async () => {
    const [was, now] = [previous, await meter()];
    previous = now;
    await page.waitForTimeout(400);
    return now > 0 && now === was;
  }, 15_000);
  const seeded = await meter();

  await answer.getByRole('button', { name: 'Regenerate' }).click();
  await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: 60_000 });
  await until('the new answer is done', async () => (await answer.locator('.branch-pos').count()) === 1, 30_000);
  assert.equal(await answer.locator('.branch-pos').innerText(), '2/2');
  const regenerated = await answer.locator('.markdown').innerText();
  await until('the meter counts the new answer', async () => (await meter()) !== seeded, 10_000);
  const withNew = await meter();

  await answer.getByRole('button', { name: 'Previous version' }).click();
  await answer.getByText('Fresh basil', { exact: false }).waitFor();
  assert.equal(await answer.locator('.branch-pos').innerText(), '1/2');
  await until('the meter follows the chosen version', async () => (await meter()) === seeded, 10_000).catch((e: Error) => {
    throw new Error(`${e.message}: ${seeded} with the seeded answer, ${withNew} with the new one, now ${String(lastMeter)}`);
  });

  await page.reload();
  await page.locator('.msg-assistant').last().getByText('Fresh basil', { exact: false }).waitFor({ timeout: 30_000 });
  assert.equal(await page.locator('.msg-assistant').last().locator('.branch-pos').innerText(), '1/2', 'the choice is stored');
  await page.locator('.msg-assistant').last().getByRole('button', { name: 'Next version' }).click();
  await until('the regenerated answer is back', async () => (await page.locator('.msg-assistant').last().locator('.markdown').innerText()) === regenerated, 10_000);
  await until('and the meter with it', async () => (await meter()) === withNew, 10_000);
  // The edit note says what happens: the answers after it are kept as a branch ("replaced", issue 19).
  await page.locator('.msg-user').last().getByRole('button', { name: 'Edit' }).click();
  assert.match(await page.locator('.msg-editing .hint').innerText(), /answers after it stay as the earlier branch/);
  assert.doesNotMatch(await page.locator('.msg-editing').innerText(), /replaced/);
  await page.getByRole('button', { name: 'Cancel' }).click();
  assert.deepEqual(pageErrors, []);
});

test('export to Markdown and JSON (with settings and stats), and the JSON imports back as a new chat', async () => {
  await nav().getByRole('link', { name: /Rich output/ }).click();
  await page.locator('.katex').first().waitFor();
  const exportAs = async (label: RegExp) => {
    await page.getByRole('button', { name: 'Export' }).or(page.locator('summary[aria-label="Export"]')).first().click();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: label }).click()]);
    const file = await download.path();
    return { name: download.suggestedFilename(), file, text: readFileSync(file, 'utf8') };
  };
  const md = await exportAs(/Markdown/);
  assert.equal(md.name, 'Rich output.md');
  assert.match(md.text, /^# Rich output\n/);
  assert.match(md.text, /## You\n\nShow me math, code and a table\n/);
  assert.match(md.text, /max context \d+/);

  const json = await exportAs(/JSON/);
  assert.equal(json.name, 'Rich output.json');
  const data = JSON.parse(json.text);
  assert.equal(data.format, 'ropewalk.conversation');
  assert.equal(typeof data.settings.maxContext, 'number');
  assert.deepEqual(data.messages.map((m: { role: string }) => m.role), ['user', 'assistant']);
  assert.equal(data.messages[1].content, RICH);

  const before = (await titles()).length;
  await page.getByLabel('Import a conversation').setInputFiles(json.file);
  await until('the import is listed', async () => (await titles()).length === before + 1, 10_000);
  await page.locator('.katex').first().waitFor();
  assert.equal(await page.locator('.chat-title').innerText(), 'Rich output');
  assert.notEqual(page.url().split('#')[1], ids['Rich output'], 'a new conversation, not the old one');
  assert.equal(await page.locator('.msg-assistant').count(), 1);

  await page.getByLabel('Import a conversation').setInputFiles({ name: 'bad.json', mimeType: 'application/json', buffer: Buffer.from('{"format":"something else"}') });
  await page.locator('.notice', { hasText: 'not a Ropewalk conversation export' }).waitFor();
  assert.deepEqual(pageErrors, []);
});
