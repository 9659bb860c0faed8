/**
 * Citations in the window (issue 20), in Debian's headless Chromium over a seeded database: an
 * answer citing `[harbor-notes.pdf p. 2]` shows the citation as a link that opens the reader at
 * page 2, highlighted; a "Used:" part of an answer from the relevant parts opens the reader at
 * that chunk's range. The seeded answer stands in for a model that cites (stories260K does not).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { AnswerStats } from '../../main/contract/types.ts';
import { startE2eApp, type E2eApp } from '../helpers/e2e-app.ts';

const PAGES = ['The harbor opens at dawn and closes at dusk.', 'The ferry to the island leaves at noon.'];
const TEXT = PAGES.join('\n\n');

let app: E2eApp;
let page: Page;
const pageErrors: string[] = [];

before(async () => {
  app = await startE2eApp((store) => {
    const doc = store.putDocument({ name: 'harbor-notes.pdf', kind: 'pdf', size: 100, hash: 'a'.repeat(64), text: TEXT, parts: [{ label: 'page 1', start: 0 }, { label: 'page 2', start: PAGES[0].length + 2 }] });
    const c = store.createConversation('Harbor');
    const q = store.appendMessage(c.id, { role: 'user', content: 'When does the ferry leave?', status: 'complete' });
    store.attachDocuments(q.id, [{ id: doc.id, fit: 'relevant' }]);
    const stats: AnswerStats = {
      finishReason: 'stop',
      promptTokens: 90,
      generatedTokens: 9,
      reusedTokens: 0,
      ttftMs: 10,
      prefillTokensPerSec: 100,
      decodeTokensPerSec: 50,
      documentParts: ['harbor-notes.pdf: page 1, chunk 1'],
      documentRanges: [{ documentId: doc.id, start: 0, end: PAGES[0].length }],
    };
    store.appendMessage(c.id, { role: 'assistant', content: 'At noon [harbor-notes.pdf p. 2]. The harbor opens at dawn.', status: 'complete', stats });
  });
  page = await app.browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(app.url);
});

after(async () => {
  await app?.close();
});

test('a citation and a "Used:" part open the reader at their passage, highlighted', async () => {
  await page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: /Harbor/ }).click();
  const answer = page.locator('.msg-assistant').last();
  const cite = answer.getByRole('button', { name: '[harbor-notes.pdf p. 2]' });
  await cite.waitFor();
  await cite.click();
  const reader = page.getByRole('dialog', { name: 'harbor-notes.pdf' });
  await reader.waitFor();
  assert.equal(await reader.locator('.doc-reader-mark').innerText(), PAGES[1]);
  await reader.getByRole('button', { name: 'Close' }).click();

  await answer.locator('.stats-parts').getByRole('button', { name: 'harbor-notes.pdf: page 1, chunk 1' }).click();
  await reader.waitFor();
  assert.equal(await reader.locator('.doc-reader-mark').innerText(), PAGES[0]);
  assert.equal(await reader.locator('.doc-reader-text').innerText(), TEXT, 'the whole text is there, as text');
  assert.deepEqual(pageErrors, []);
});
