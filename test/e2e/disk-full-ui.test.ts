/**
 * A full disk mid-answer, seen in the window: `serve` with its data folder on a small tmpfs
 * (test/helpers/tmpfs.ts, root only), the real stories260K model, headless Chromium. The disk is
 * filled while an answer streams: the answer goes on streaming and shows "not saved yet: disk
 * full"; space comes back: the note goes by itself (the retry saved it); after Stop (or the
 * answer's own end, if it came first) and a reload the whole answer is there from the database.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { ARTIFACTS, startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';
import { mountTmpfs, TMPFS_SKIP, type Tmpfs } from '../helpers/tmpfs.ts';

// Greedy stories260K repeats this for ~2,000 tokens (see chat-ui.test.ts): seconds on the JS backend.
const LONG_PROMPT = 'Mom said no. Mom said no. Mom said no.';

let fs: Tmpfs | null = null;
let app: E2eApp | null = null;
let page: Page;

before(async () => {
  if (TMPFS_SKIP) return;
  fs = mountTmpfs(8 * 2 ** 20);
  app = await startE2eApp(
    (store) => store.setSettings({ 'settings.backend': 'js', 'settings.maxContext': 4096, 'settings.maxTokens': 3000, 'settings.temperature': 0 }),
    {},
    { dataDir: path.join(fs.dir, 'data') },
  );
  page = await app.browser.newPage({ viewport: { width: 1280, height: 860 } });
});
after(async () => {
  await app?.close();
  fs?.unmount();
});

const answer = () => page.locator('.msg-assistant').last();
const answerText = async () => (await answer().locator('.collapse-body').innerText()).trim();

test('disk full while an answer streams: "not saved yet: disk full" on it, gone once space is back; after a reload the whole answer is there', { skip: TMPFS_SKIP, timeout: 240_000 }, async () => {
  await page.goto(app!.url);
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 90_000 });
  await page.getByRole('button', { name: 'New chat' }).click();
  const composer = page.getByRole('textbox', { name: 'Message' });
  await composer.fill(LONG_PROMPT);
  await composer.press('Enter');
  await page.getByRole('button', { name: 'Stop' }).waitFor({ timeout: 60_000 });
  await until('the answer streams', async () => (await answer().locator('.collapse-body').count()) > 0 && (await answerText()).length > 20, 60_000);

  fs!.fill();
  const note = answer().getByText('not saved yet: disk full');
  await note.waitFor({ timeout: 30_000 });
  const whenFull = await answerText();
  await until('it goes on streaming', async () => (await answerText()).length > whenFull.length, 30_000);
  await page.screenshot({ path: path.join(ARTIFACTS, 'disk-full-window.png') });

  fs!.free();
  await note.waitFor({ state: 'detached', timeout: 30_000 });
  // Stop, unless the answer ended meanwhile: on a quiet machine the JS backend writes its ~2,000
  // tokens in a few seconds, sooner than the disk fills and frees (a run failed waiting for Stop).
  await page.getByRole('button', { name: 'Stop' }).click({ timeout: 2_000 }).catch(() => undefined);
  await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: 30_000 });
  const stopped = await answerText();
  await page.reload();
  await until('the reloaded chat shows the answer', async () => (await page.locator('.msg-assistant').count()) > 0 && (await answer().locator('.collapse-body').count()) > 0, 30_000);
  assert.equal(await answerText(), stopped, 'the whole answer, as stopped, from the database');
  assert.equal(await answer().getByText('not saved yet').count(), 0);
});
