/**
 * Documents end to end, as a person uses them: `serve` mode with the real stories260K model in
 * Debian's headless Chromium. Attach a .md and a .pdf through the Attach button (a file input),
 * see their chips and the meter's documents segment, ask, ask a follow-up whose stats show the
 * tokens reused from the KV cache, open a chip's text, attach a document that does not fit, take
 * "Use the relevant parts" and get an answer that names the parts used; a PDF page without text
 * is named on its chip; a scanned page is read by OCR, and Stop ends that. A screenshot of that
 * state goes to test/artifacts/documents.png.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { buildRenderer } from '../../renderer/build.ts';
import { buildPdf, variedText } from '../helpers/documents.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(PROJECT_ROOT, 'test', 'artifacts');
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-e2e-docs-'));
let server: ChildProcess;
let url: string;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

before(async () => {
  assert.ok(existsSync(CHROMIUM), `Debian's chromium is needed at ${CHROMIUM} (apt-get install chromium)`);
  await buildRenderer({});
  server = spawn(process.execPath, ['--import', 'tsx', 'main/serve/cli.ts', '--port', '0', '--data', path.join(root, 'data')], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ROPEWALK_CACHE_DIR: path.join(root, 'cache') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: server.stdout! }).once('line', resolve);
    server.once('exit', (code) => reject(new Error(`serve exited with ${code} before printing its URL`)));
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  await browser?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await exited;
  }
  rmSync(root, { recursive: true, force: true });
});

async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function setSetting(label: string, value: string): Promise<void> {
  const field = page.getByLabel(label, { exact: true });
  await field.fill(value);
  await field.press('Enter');
}

/** Sends `text` and waits for its answer's stats. */
async function ask(text: string): Promise<string> {
  const answers = await page.locator('.msg-assistant .stats').count();
  await page.getByRole('textbox', { name: 'Message' }).fill(text);
  await page.getByRole('textbox', { name: 'Message' }).press('Enter');
  await until('the answer is done', async () => (await page.locator('.msg-assistant .stats').count()) > answers, 60_000);
  return page.locator('.msg-assistant .stats').last().innerText();
}

const attach = (files: { name: string; mimeType: string; buffer: Buffer }[]) => page.getByLabel('Attach files').setInputFiles(files);

test('attach, see chips and the documents segment, ask, follow up with reused tokens, open a chip, use the relevant parts', async () => {
  await page.goto(url);
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  await page.getByRole('button', { name: 'New chat' }).click();
  await setSetting('Max new tokens', '16');
  await setSetting('Temperature', '0');
  await page.waitForTimeout(200);

  const story = 'Lily had a red ball. She played in the park with Tom.\n\nTom had a blue kite.';
  await page.getByRole('button', { name: 'Attach' }).waitFor();
  await attach([
    { name: 'story.md', mimeType: 'text/markdown', buffer: Buffer.from(story) },
    { name: 'kite.pdf', mimeType: 'application/pdf', buffer: buildPdf([['The kite was blue.']]) },
  ]);
  await until('both chips show', async () => (await page.locator('.attachments .doc-chip-name').allInnerTexts()).join(',') === 'story.md,kite.pdf');
  await until('the meter has a documents segment', async () => (await page.locator('.meter .seg-documents').count()) === 1);

  const first = await ask('What did Lily have?');
  assert.match(first, /tokens/);
  assert.deepEqual(await page.locator('.msg-user .doc-chip-name').allInnerTexts(), ['story.md', 'kite.pdf'], 'chips on the user message');
  assert.equal(await page.locator('.attachments .doc-chip-name').count(), 0, 'the composer is empty again');

  const followUp = await ask('And what did Tom have?');
  const reused = Number(/([\d,]+) reused/.exec(followUp)?.[1].replace(/,/g, ''));
  assert.ok(reused > 60, `the follow-up reused the documents from the KV cache: ${followUp}`);

  await page.locator('.msg-user .doc-chip-open').nth(1).click();
  const reader = page.getByRole('dialog', { name: 'kite.pdf' });
  await reader.waitFor();
  assert.equal((await reader.locator('.doc-reader-text').innerText()).trim(), 'The kite was blue.');
  await reader.getByRole('button', { name: 'Close' }).click();

  const big = Array.from({ length: 40 }, (_, i) => `# Part ${i}\n\n${i === 17 ? 'The zebra ran to the river.' : `Lily and Tom played with ball number ${i} in the park.`}`).join('\n\n');
  await attach([{ name: 'big.md', mimeType: 'text/markdown', buffer: Buffer.from(big) }]);
  const offer = page.getByRole('group', { name: 'The documents do not fit' });
  await offer.waitFor();
  assert.match(await offer.innerText(), /over the max context of 512/);
  // 512 is stories260K's trained context: a larger max context is not offered (it costs quality).
  assert.equal(await offer.getByRole('button', { name: /Raise max context/ }).count(), 0, 'no raise at the trained context');
  assert.match(await offer.innerText(), /The model was trained on 512 positions; a larger max context is not offered\./);
  await offer.getByRole('button', { name: 'Use the relevant parts' }).click();
  await until('the offer is gone', async () => (await offer.count()) === 0);
  const answer = await ask('Where did the zebra run?');
  assert.match(answer, /Used: .*big\.md: § Part 17, chunk \d+/);
  // Each part used is a link: the reader opens at that chunk, highlighted.
  await page.locator('.msg-assistant').last().locator('.stats-parts .link-btn', { hasText: 'big.md: § Part 17' }).first().click();
  const bigReader = page.getByRole('dialog', { name: 'big.md' });
  await bigReader.waitFor();
  assert.match(await bigReader.locator('.doc-reader-mark').innerText(), /# Part 17\s+The zebra ran to the river\./);
  await bigReader.getByRole('button', { name: 'Close' }).click();
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, 'documents.png') });
  assert.deepEqual(pageErrors, []);
});

test('a file dropped on the chat and a file pasted into the message box are attached as chips', async () => {
  await page.goto(url);
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  await page.getByRole('button', { name: 'New chat' }).click();
  await until('the composer is empty of attachments', async () => (await page.locator('.attachments .doc-chip-name').count()) === 0);

  // Drag and drop: a real DataTransfer holding a File, dispatched as dragover + drop on the chat.
  const dropped = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['Tom flew a blue kite over the hill.'], 'dropped.txt', { type: 'text/plain' }));
    return dt;
  });
  const chat = page.locator('main.chat');
  await chat.dispatchEvent('dragover', { dataTransfer: dropped });
  await chat.dispatchEvent('drop', { dataTransfer: dropped });
  await until('the dropped file is a chip', async () => (await page.locator('.attachments .doc-chip-name').allInnerTexts()).join(',') === 'dropped.txt');

  // Paste: a ClipboardEvent whose clipboardData holds a file, on the message box.
  await page.getByRole('textbox', { name: 'Message' }).evaluate((box) => {
    const dt = new DataTransfer();
    dt.items.add(new File(['# Notes\n\nLily likes the red ball.'], 'pasted.md', { type: 'text/markdown' }));
    box.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  });
  await until('the pasted file is a chip too', async () => (await page.locator('.attachments .doc-chip-name').allInnerTexts()).join(',') === 'dropped.txt,pasted.md');
  assert.equal(await page.getByRole('textbox', { name: 'Message' }).inputValue(), '', 'a pasted file is not pasted as text');
  await until('the meter has a documents segment', async () => (await page.locator('.meter .seg-documents').count()) === 1);

  // A text over 256 Ki characters: its count is measured, and the chip says ≈.
  await attach([{ name: 'book.txt', mimeType: 'text/plain', buffer: Buffer.from(variedText(300_000)) }]);
  const book = page.locator('.attachments .doc-chip').filter({ hasText: 'book.txt' });
  await until('the big text is a chip with its count', async () => /tokens/.test(await book.locator('.doc-chip-meta').innerText().catch(() => '')));
  assert.match(await book.locator('.doc-chip-meta').innerText(), /^ ?· ≈[\d,]+ tokens$/);
  assert.doesNotMatch(await page.locator('.attachments .doc-chip').filter({ hasText: 'pasted.md' }).locator('.doc-chip-meta').innerText(), /≈/, 'a small one is counted');
  await page.getByRole('button', { name: 'Remove book.txt' }).click();

  // A PDF whose page 2 has no text (no text layer, no image for OCR): the chip names the page.
  await attach([{ name: 'mixed.pdf', mimeType: 'application/pdf', buffer: buildPdf([['Page one has text.'], null]) }]);
  const mixed = page.locator('.attachments .doc-chip').filter({ hasText: 'mixed.pdf' });
  await mixed.waitFor();
  assert.equal(await mixed.locator('.doc-chip-warning').innerText(), '· no text p. 2');
  assert.match((await mixed.locator('.doc-chip-open').getAttribute('title')) ?? '', /page 2 has no text \(no text layer, and OCR found none\): left out/);

  // A scanned page (a JPEG of this window): read by OCR, with its busy chip saying so; Stop ends it, attaching nothing, without a notice.
  const shot = await page.screenshot({ type: 'jpeg', quality: 80 });
  const notices = await page.locator('.notice').count();
  await attach([{ name: 'scan.pdf', mimeType: 'application/pdf', buffer: buildPdf([{ jpeg: shot, width: 1440, height: 900 }]) }]);
  const busy = page.locator('.attachments .doc-chip-busy', { hasText: 'scan.pdf' });
  await until('the OCR is under way', async () => /Reading scan\.pdf by OCR…/.test((await busy.allInnerTexts()).join('')), 60_000);
  await busy.getByRole('button', { name: 'Stop reading scan.pdf' }).click();
  await until('the busy chip is gone', async () => (await busy.count()) === 0, 20_000);
  assert.equal(await page.locator('.attachments .doc-chip-name', { hasText: 'scan.pdf' }).count(), 0, 'nothing attached');
  assert.equal(await page.locator('.notice').count(), notices, 'no error notice for a Stop');
  assert.deepEqual(pageErrors, []);
});
