/**
 * The model panel's "Remote engine" source in headless Chromium (serve mode): a second REAL
 * Ropewalk serve (stories260K) on 127.0.0.1 is the remote. Type its base URL, list its models,
 * pick stories260K, use it; the card says it is remote and counts exactly (the server's
 * /tokenize), the meter counts the draft with no "≈", and a greedy answer streams in equal to
 * the remote server's own.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startApiServer, type ApiServer } from '../helpers/api-server.ts';
import { startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-remote-e2e-'));
let remote: ApiServer;
let app: E2eApp;

before(async () => {
  [remote, app] = await Promise.all([startApiServer(root), startE2eApp()]);
});
after(async () => {
  await app?.close();
  await remote?.close();
  rmSync(root, { recursive: true, force: true });
});

test('Remote engine: list the models of another Ropewalk, use one, count exactly, and stream its answer', async () => {
  const baseUrl = remote.baseUrl;
  const page = await app.browser.newPage({ viewport: { width: 1440, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(app.url);
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });

  const form = page.getByRole('form', { name: 'Remote engine' });
  await form.getByLabel('Base URL').fill(baseUrl);
  await form.getByRole('button', { name: 'List models' }).click();
  await until('the models are listed', async () => (await form.getByLabel('Model').locator('option').allTextContents()).some((t) => t.startsWith('stories260K')));
  await form.getByRole('button', { name: 'Use remote engine' }).click();
  await until('the card says remote', async () => ((await page.locator('.remote-url').textContent()) ?? '') === `Remote: ${baseUrl}`);
  assert.equal(await page.locator('.remote-counting').textContent(), "exact (the server's tokenizer)");
  assert.equal(await page.locator('.remote-key').textContent(), 'none');

  const field = page.getByLabel('Temperature', { exact: true });
  await field.fill('0');
  await field.press('Enter');
  const tokens = page.getByLabel('Max new tokens', { exact: true });
  await tokens.fill('30');
  await tokens.press('Enter');
  await page.waitForTimeout(300);

  const composer = page.getByRole('textbox', { name: 'Message' });
  await composer.fill('Once upon a time');
  const meter = page.getByRole('meter');
  await until('the draft is counted', async () => Number(await meter.getAttribute('aria-valuenow')) > 0);
  const text = (await page.locator('.meter-text').textContent()) ?? '';
  assert.ok(!text.startsWith('≈'), `an exact count: ${text}`);
  const draftTokens = Number(await meter.getAttribute('aria-valuenow'));
  assert.equal(draftTokens, await remote.backend.host.countTokens({ messages: [{ role: 'user', content: 'Once upon a time' }] }), "the server's count");

  await composer.press('Enter');
  await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: 60_000 });
  const own = await fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stories260K', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 30, temperature: 0 }),
  });
  const expected = ((await own.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content;
  await until('the answer is shown', async () => (await page.locator('.msg-assistant').last().innerText()).includes(expected.trim().slice(0, 40)));
  assert.deepEqual(pageErrors, []);
});
