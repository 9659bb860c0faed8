/**
 * The model panel's "Remote engine" source in headless Chromium (serve mode): a second REAL
 * Ropewalk serve (stories260K) on 127.0.0.1 is the remote. Type its base URL, list its models,
 * pick stories260K, use it; the card says it is remote and counts exactly (the server's
 * /tokenize), the meter counts the draft with no "≈", and a greedy answer streams in equal to
 * the remote server's own. A server that cannot count (no /tokenize, no tokenizer.json) gets an
 * estimate, which the meter marks "≈".
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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
  // The header chip names the engine: it said "CPU" (the remote model info's placeholder) before (issue 19).
  assert.equal(await page.locator('.model-pill-ep').innerText(), 'Remote');
  assert.equal(await page.locator('.remote-counting').textContent(), "exact (the server's tokenizer)");
  assert.equal(await page.locator('.remote-key').textContent(), 'none');

  const field = page.getByLabel('Temperature', { exact: true });
  await field.fill('0');
  await field.press('Enter');
  const tokens = page.locator('#setting-maxTokens'); // the Settings panel's (a chat's own settings have one too)
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

test('a server that cannot count: the meter marks the estimate with ≈; an API key is said to be kept in memory only, and never shown again', async () => {
  // Lists one model and has no /tokenize (as Ollama); nothing is generated here.
  const server = http.createServer((req, res) => {
    res.writeHead(req.url === '/v1/models' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(req.url === '/v1/models' ? JSON.stringify({ object: 'list', data: [{ id: 'far-away' }] }) : '{"error":{"message":"not found"}}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const page = await app.browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(app.url);
    await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
    const form = page.getByRole('form', { name: 'Remote engine' });
    await form.getByLabel('Base URL').fill(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
    await form.getByRole('button', { name: 'List models' }).click();
    await until('the model is listed', async () => (await form.getByLabel('Model').locator('option').allTextContents()).includes('far-away'));
    await form.getByLabel('API key').fill('sk-e2e-secret');
    await form.getByRole('button', { name: 'Use remote engine' }).click();
    await until('the card says it estimates', async () => (await page.locator('.remote-counting').textContent()) === 'an estimate (≈)');
    // serve mode has no keychain: the key is kept in memory only, and the panel says so; the field never shows it again.
    assert.equal(await page.locator('.remote-key').textContent(), 'kept in memory only, until Ropewalk stops (no keychain here)');
    assert.equal(await form.getByLabel('API key').inputValue(), '');
    assert.equal(await form.getByLabel('API key').getAttribute('placeholder'), 'Saved (type to replace)');
    assert.ok(!(await page.content()).includes('sk-e2e-secret'), 'the key is nowhere in the page');
    await page.getByRole('textbox', { name: 'Message' }).fill('Once upon a time there was a remote engine');
    await until('the meter marks the estimate', async () => ((await page.locator('.meter-text').textContent()) ?? '').startsWith('≈'));
    assert.match((await page.getByRole('meter').getAttribute('aria-valuetext')) ?? '', /^about \d+ of/);
  } finally {
    server.close();
  }
});
