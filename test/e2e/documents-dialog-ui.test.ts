/**
 * Documents in the window, end to end (issue 19 item 6), in `serve` mode with headless Chromium
 * over a seeded database (one document's bytes attached twice, under two names): the reader
 * dialog takes focus, keeps Tab and Shift+Tab inside, closes on Esc and gives focus back to the
 * chip that opened it; each attachment shows, and opens, under its own file's name; search finds
 * the conversation by the document's text, with its name in the snippet, while the header keeps
 * the title of the open chat the search hides (it said "New chat"); and at 420 px the
 * sidebar and the settings panel, which cover the chat there, close on Esc.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';

const TEXT = 'Harbor rules.\n\nThe lighthouse keeper paints the railing green every spring.\n\nBoats moor on the east quay.';
let app: E2eApp;
const pageErrors: string[] = [];

before(async () => {
  app = await startE2eApp((store) => {
    const c = store.createConversation('Harbor questions');
    const doc = store.putDocument({ name: 'harbor.txt', kind: 'text', size: TEXT.length, hash: 'b'.repeat(64), text: TEXT, parts: [] });
    const q1 = store.appendMessage(c.id, { role: 'user', content: 'What colour is the railing?', status: 'complete' });
    store.attachDocuments(q1.id, [{ id: doc.id, fit: 'whole', name: 'harbor.txt' }]);
    store.appendMessage(c.id, { role: 'assistant', content: 'Green.', status: 'complete' });
    const q2 = store.appendMessage(c.id, { role: 'user', content: 'And where do boats moor?', status: 'complete' });
    store.attachDocuments(q2.id, [{ id: doc.id, fit: 'whole', name: 'harbor copy.txt' }]);
    store.appendMessage(c.id, { role: 'assistant', content: 'The east quay.', status: 'complete' });
    store.createConversation('Another chat');
  });
});

after(async () => {
  await app?.close();
});

async function openPage(width: number): Promise<Page> {
  const page = await app.browser.newPage({ viewport: { width, height: 800 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(app.url);
  await page.getByText('ready', { exact: true }).or(page.getByRole('button', { name: 'Sidebar' })).first().waitFor({ timeout: 60_000 });
  return page;
}

/** Whether the focused element is inside the open dialog (and its accessible name or text). */
const focus = (page: Page) =>
  page.evaluate(`(() => {
    const el = document.activeElement;
    return { inDialog: Boolean(el && el.closest('dialog[open]')), name: el ? (el.getAttribute('aria-label') || el.textContent || el.tagName).trim().slice(0, 40) : null };
  })()`) as Promise<{ inDialog: boolean; name: string | null }>;

test('the reader takes focus, keeps Tab inside, closes on Esc and gives focus back; each attachment under its own name', async () => {
  const page = await openPage(1440);
  await page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: /Harbor questions/ }).click();
  const chips = page.locator('.msg-user .doc-chip-name');
  await until('both chips show', async () => (await chips.count()) === 2, 15_000);
  assert.deepEqual(await chips.allInnerTexts(), ['harbor.txt', 'harbor copy.txt'], 'one stored document, two names');

  const second = page.locator('.msg-user').nth(1).locator('.doc-chip-open');
  await second.click();
  const reader = page.getByRole('dialog', { name: 'harbor copy.txt' });
  await reader.waitFor();
  assert.equal((await reader.locator('.doc-reader-text').innerText()).trim(), TEXT.trim());
  assert.equal((await focus(page)).inDialog, true, 'focus moved into the dialog');
  for (let i = 0; i < 5; i++) {
    await page.keyboard.press('Tab');
    const f = await focus(page);
    assert.equal(f.inDialog, true, `Tab ${i + 1} left the dialog, to ${f.name}`);
  }
  for (let i = 0; i < 5; i++) {
    await page.keyboard.press('Shift+Tab');
    const f = await focus(page);
    assert.equal(f.inDialog, true, `Shift+Tab ${i + 1} left the dialog, to ${f.name}`);
  }
  await page.keyboard.press('Escape');
  await reader.waitFor({ state: 'detached', timeout: 5_000 });
  const back = await page.evaluate(`(() => { const el = document.activeElement; return el && el.classList.contains('doc-chip-open') ? el.textContent : el && el.tagName; })()`);
  assert.equal(back, 'harbor copy.txt', 'focus is back on the chip that opened it');
  // A click on the backdrop closes it too.
  await second.click();
  await reader.waitFor();
  await page.mouse.click(10, 10);
  await reader.waitFor({ state: 'detached', timeout: 5_000 });
  await page.close();
});

test('search finds the conversation by the text of its document, the document named in the snippet', async () => {
  const page = await openPage(1440);
  const nav = page.getByRole('navigation', { name: 'Conversations' });
  await page.getByRole('searchbox', { name: 'Search conversations' }).fill('east quay');
  await until('only the chat carrying it is listed (its answer says it too)', async () => (await nav.locator('.conv-title').allInnerTexts()).join('|') === 'Harbor questions', 10_000);
  await page.getByRole('searchbox', { name: 'Search conversations' }).fill('railing green');
  await until('found by the document alone, named in the snippet', async () => /^harbor\.txt: .*railing green/.test(await nav.locator('.conv-match').first().innerText().catch(() => '')), 10_000);
  assert.deepEqual(await nav.locator('.conv-title').allInnerTexts(), ['Harbor questions']);
  // The open chat (the newest, "Another chat") is hidden by the search: the header keeps its title.
  assert.equal(await page.locator('.chat-title').innerText(), 'Another chat');
  await page.close();
});

test('at 420 px the sidebar and the settings panel close on Esc', async () => {
  const page = await openPage(420);
  await page.getByRole('button', { name: 'Sidebar' }).click();
  await page.locator('.sidebar').waitFor();
  await page.keyboard.press('Escape');
  await page.locator('.sidebar').waitFor({ state: 'detached', timeout: 5_000 });
  await page.getByRole('button', { name: 'Model and settings' }).click();
  await page.locator('#side-panel').waitFor();
  await page.keyboard.press('Escape');
  await page.locator('#side-panel').waitFor({ state: 'detached', timeout: 5_000 });
  assert.deepEqual(pageErrors, []);
  await page.close();
});
