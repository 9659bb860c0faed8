/**
 * Presets end to end, in Chromium through `serve` with the real stories260K model: a chat's own
 * system prompt (the header's "Chat settings") reaches the prompt, and the meter counts it
 * exactly: its reading equals the loaded model's own count of [system, draft] from serve's
 * `POST /tokenize` (the engine's tokenizer and template, not the budget code), and the answer's
 * prompt tokens as the engine prefilled them (read from SQLite); the chat's own max new tokens
 * bounds the answer, and the Markdown export stamps them; another chat keeps the settings. A system prompt saved as a preset, and
 * the chat's own settings, are there again after a restart (a new serve over the same data).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import type { Page } from 'playwright-core';
import { startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';

const dataDir = path.join(mkdtempSync(path.join(os.tmpdir(), 'ropewalk-presets-e2e-')), 'data');
const CHAT_SYSTEM = 'You are a pirate who tells short tales.';
const PRESET = 'Tell the story of a little dog.';
const DRAFT = 'Once upon a time';
let app: E2eApp | null = null;

after(async () => {
  await app?.close();
  rmSync(path.dirname(dataDir), { recursive: true, force: true });
});

const meterValue = async (page: Page) => Number(await page.getByRole('meter').getAttribute('aria-valuenow'));

/** The loaded model's own token count of a chat, as generation renders it (serve's /tokenize). */
async function modelCount(url: string, messages: { role: string; content: string }[]): Promise<number> {
  const r = await fetch(new URL('/tokenize', url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages }) });
  assert.equal(r.status, 200, await r.clone().text());
  return ((await r.json()) as { count: number }).count;
}

async function openApp(): Promise<Page> {
  app = await startE2eApp(undefined, {}, { dataDir });
  const page = await app.browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.goto(app.url);
  await page.getByText('ready', { exact: true }).first().waitFor({ timeout: 90_000 });
  return page;
}

async function waitMeter(page: Page, expected: number, what: string): Promise<void> {
  await until(`${what}: the meter reads ${expected}`, async () => (await meterValue(page)) === expected, 30_000).catch(async (e) => {
    throw new Error(`${(e as Error).message} (it reads ${await meterValue(page)})`);
  });
}

test("a chat's own system prompt reaches the prompt, counted exactly by the meter; a preset and the chat's settings survive a restart", async () => {
  let page = await openApp();
  const url = app!.url;
  await page.getByRole('button', { name: 'New chat' }).click();

  // The chat's own system prompt and max new tokens, in the header's popover.
  await page.getByLabel('Chat settings').click();
  await page.locator('#chat-system-source').selectOption({ label: 'Its own' });
  await page.locator('#chat-system-prompt').fill(CHAT_SYSTEM);
  await page.locator('#chat-system-prompt').blur();
  await page.locator('#chat-settings-status').getByText('Saved').waitFor({ timeout: 10_000 });
  await page.locator('#chat-maxTokens').fill('12');
  await page.locator('#chat-maxTokens').press('Enter');
  await page.locator('#chat-temperature').fill('0');
  await page.locator('#chat-temperature').press('Enter');
  await until('both numbers saved', async () => (await page.getByLabel('Chat settings').innerText()).includes('(3)'), 10_000);

  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill(DRAFT);
  const expected = await modelCount(url, [{ role: 'system', content: CHAT_SYSTEM }, { role: 'user', content: DRAFT }]);
  const withoutSystem = await modelCount(url, [{ role: 'user', content: DRAFT }]);
  assert.ok(expected > withoutSystem, `the system prompt adds tokens (${expected} vs ${withoutSystem})`);
  await waitMeter(page, expected, 'the chat with its own system prompt');

  await box.press('Enter');
  await until('the answer is stored complete', async () => {
    const db = new Database(path.join(dataDir, 'ropewalk.db'), { readonly: true });
    try {
      return (db.prepare(`SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND status = 'complete'`).pluck().get() as number) === 1;
    } finally {
      db.close();
    }
  }, 60_000);
  const db = new Database(path.join(dataDir, 'ropewalk.db'), { readonly: true });
  const answer = db.prepare(`SELECT content, stats FROM messages WHERE role = 'assistant'`).get() as { content: string; stats: string };
  const stats = JSON.parse(answer.stats) as { promptTokens: number; generatedTokens: number };
  db.close();
  assert.equal(stats.promptTokens, expected, 'the engine prefilled what the meter counted');
  assert.ok(stats.generatedTokens <= 12, `the chat's max new tokens bounds the answer (${stats.generatedTokens})`);

  // The export stamps the settings this chat ran under: its own system prompt and sampler.
  await page.locator('summary[aria-label="Export"]').click();
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /Markdown/ }).click()]);
  const md = readFileSync(await download.path(), 'utf8');
  assert.match(md, new RegExp(`## System\\n\\n${CHAT_SYSTEM.replace('.', '\\.')}\\n`));
  assert.match(md, /max new tokens 12 · temperature 0 ·/);

  // Another chat: the settings (no system prompt).
  await page.getByRole('button', { name: 'New chat' }).click();
  await box.fill(DRAFT);
  await waitMeter(page, withoutSystem, 'a new chat under the settings');
  await box.fill('');

  // A system prompt saved as a preset in the settings.
  await page.locator('#setting-system-prompt').fill(PRESET);
  await page.locator('#setting-system-prompt').blur();
  await page.locator('#settings-status').getByText('Saved').waitFor({ timeout: 10_000 });
  await page.getByRole('button', { name: 'Save as preset' }).click();
  await page.getByLabel('Preset name').fill('Little dog');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await until('the preset is chosen', async () => (await page.locator('#setting-system-preset').inputValue()) === 'Little dog', 10_000);
  await page.locator('#setting-system-prompt').fill('');
  await page.locator('#setting-system-prompt').blur();
  await until('the system prompt is cleared', async () => (await page.locator('#setting-system-preset').inputValue()) === '', 10_000);

  // Restart: a new serve over the same data folder.
  await app!.close();
  app = null;
  page = await openApp();
  // The settings panel renders once serve has answered with the settings: wait for it (CI once
  // read the options before the select existed and got []).
  let options: string[] = [];
  await until('the preset is listed after the restart', async () => {
    options = await page.locator('#setting-system-preset option').allInnerTexts();
    return options.includes('Little dog');
  }, 10_000).catch((e) => {
    throw new Error(`${(e as Error).message} (options: ${JSON.stringify(options)})`);
  });
  await page.locator('#setting-system-preset').selectOption('Little dog');
  await until('the preset is the system prompt again', async () => (await page.locator('#setting-system-prompt').inputValue()) === PRESET, 10_000);
  // The first chat, with its own settings.
  await page.getByRole('navigation', { name: 'Conversations' }).getByText(DRAFT).click();
  await page.getByLabel('Chat settings').click();
  assert.equal(await page.locator('#chat-system-prompt').inputValue(), CHAT_SYSTEM);
  assert.equal(await page.locator('#chat-maxTokens').inputValue(), '12');
  // Its own system prompt, not the preset now in the settings, is in its prompt.
  const conversation = [{ role: 'system', content: CHAT_SYSTEM }, { role: 'user', content: DRAFT }, { role: 'assistant', content: answer.content }];
  await waitMeter(page, await modelCount(app!.url, conversation), 'the first chat after the restart');
  // A preset chosen for this chat becomes its system prompt.
  await page.locator('#chat-system-source').selectOption({ label: 'Preset: Little dog' });
  await until('the preset is the chat prompt', async () => (await page.locator('#chat-system-prompt').inputValue()) === PRESET, 10_000);
  await waitMeter(page, await modelCount(app!.url, [{ role: 'system', content: PRESET }, ...conversation.slice(1)]), 'the chat under the preset');
});
