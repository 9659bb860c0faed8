/**
 * "My models" end to end: `serve` mode with the model library pointed (ROPEWALK_LIBRARY_HOME) at
 * a fixture home laid out as LM Studio, Ollama (manifest + blob), Jan and the Hugging Face cache
 * keep their models (real small GGUF files copied from ../shared/models at test time), in
 * Debian's headless Chromium. The library lists them under the names those apps show; the
 * built-in model is marked as the children's-story model, and so is the first start; Open loads
 * one (and it becomes a recent model); a dropped `.gguf` opens as the model while a dropped text
 * file stays a document. Screenshots at 1440 and 420 px, light and dark, in test/artifacts/.
 * Also (issue 19's smaller list): in `serve` mode the panel says the API is live and at what URL.
 */
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { ARTIFACTS, startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';
import { makeLibraryFixture, type LibraryFixture } from '../helpers/library-fixtures.ts';

let app: E2eApp;
let fx: LibraryFixture;
const pageErrors: string[] = [];

before(async () => {
  fx = await makeLibraryFixture();
  app = await startE2eApp(undefined, { ROPEWALK_LIBRARY_HOME: fx.home });
});
after(async () => {
  await app?.close();
  fx?.remove();
});

async function openPage(width: number, height = 900): Promise<Page> {
  const page = await app.browser.newPage({ viewport: { width, height } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(app.url);
  if (width < 1000) {
    await page.getByRole('button', { name: 'Model and settings' }).click(); // the panel starts closed in a narrow window
  }
  await page.getByText('ready', { exact: true }).first().waitFor({ timeout: 60_000 });
  return page;
}

/** Elements of the library whose right edge lies past the panel's (the panel scrolls sideways then). */
const overflowing = (page: Page) =>
  page.evaluate(() => {
    const panel = document.querySelector('#side-panel') as HTMLElement;
    const right = panel.getBoundingClientRect().left + panel.clientWidth + 1;
    return Array.from(panel.querySelectorAll('.library *')).filter((el) => el.getBoundingClientRect().right > right).map((el) => el.className || el.tagName);
  });

const modelName = (page: Page) => page.locator('.model-card .model-name').innerText();

test('lists the fixture models by their apps’ names, marks the built-in one, and Open loads a model', async () => {
  const page = await openPage(1440);
  const names = page.locator('.library-row .library-name');
  await until('the library has listed every fixture model', async () => (await names.count()) === 1 + Object.keys(fx.expected).length);
  const listed = await names.allInnerTexts();
  assert.deepEqual(listed.slice(1).sort(), Object.keys(fx.expected).sort());
  const builtin = page.locator('.library-row[data-source="builtin"]');
  assert.equal(await builtin.locator('.library-name').innerText(), 'stories260K');
  assert.match(await builtin.innerText(), /children's stories: it continues a story, it does not answer questions/);
  assert.match(await page.locator('.chat-empty .first-start').innerText(), /stories260K is the built-in model\..*open one under My models/s);
  const q4 = page.locator('.library-row', { has: page.getByText('stories:q4', { exact: true }) });
  assert.match(await q4.innerText(), /llama · Q4_0 · 293K params · .* · 2,048 ctx/);
  assert.match(await q4.locator('.library-fit').innerText(), /^Fits: needs .* at 2,048 tokens\)/);
  assert.match(await page.locator('.library-row', { has: page.getByText('tiny-org/tiny-qwen3', { exact: true }) }).innerText(), /qwen3 · BF16/);

  await page.getByRole('button', { name: 'Open stories:q4' }).click();
  // Named as Ollama names it, not by its blob's file name (sha256-…).
  await until('the Ollama model is loaded', async () => (await modelName(page)) === 'stories:q4' && (await page.getByText('ready', { exact: true }).count()) > 0, 60_000);
  assert.equal(await page.locator('.model-pill-name').innerText(), 'stories:q4');
  await until('it is a recent model, by its Ollama name', async () => (await page.locator('.library-recent').innerText().catch(() => '')).includes('stories:q4'));

  assert.deepEqual(await overflowing(page), [], 'nothing in the library sticks out of the panel');

  // The Models folder setting: another folder is listed as Ropewalk's own (here Jan's data folder).
  const janModels = path.join(fx.home, '.local', 'share', 'Jan', 'data');
  await page.getByLabel('Models folder').fill(janModels);
  await page.getByLabel('Models folder').press('Enter');
  await until('the folder is listed as Ropewalk’s', async () => (await page.locator('.library-row[data-source="ropewalk"] .library-name').allInnerTexts()).includes('llamacpp/models/stories-q5/model'));
  await page.getByLabel('Models folder').fill('');
  await page.getByLabel('Models folder').press('Enter');
  await until('back to the default folder', async () => (await page.locator('.library-row[data-source="ropewalk"] .library-name').allInnerTexts()).join() === 'stories260K-q8');

  await page.emulateMedia({ colorScheme: 'light' });
  await page.locator('.library').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: path.join(ARTIFACTS, 'library-1440-light.png') });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(300); // colour transitions settle
  await page.screenshot({ path: path.join(ARTIFACTS, 'library-1440-dark.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('a dropped .gguf opens as the model; a dropped text file stays a document', async () => {
  const page = await openPage(1440);
  await page.getByRole('button', { name: 'New chat' }).click();
  const file = fx.expected['stories260K-q8'];
  const size = statSync(file).size;
  // A page is never told a dropped file's path: the library finds it by name and size.
  const dropped = await page.evaluateHandle(
    ({ name, size }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(size)], name));
      dt.items.add(new File(['Tom flew a blue kite.'], 'notes.txt', { type: 'text/plain' }));
      return dt;
    },
    { name: path.basename(file), size },
  );
  const chat = page.locator('main.chat');
  await chat.dispatchEvent('dragover', { dataTransfer: dropped });
  await chat.dispatchEvent('drop', { dataTransfer: dropped });
  await until('the dropped GGUF is the model', async () => (await modelName(page)) === 'stories260K-q8', 60_000);
  await until('the text file is a document chip', async () => (await page.locator('.attachments .doc-chip-name').allInnerTexts()).join(',') === 'notes.txt');

  // A .gguf the library does not list says where to put it.
  const unknown = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['GGUF'], 'elsewhere.gguf'));
    return dt;
  });
  await chat.dispatchEvent('drop', { dataTransfer: unknown });
  await page.getByText(/elsewhere\.gguf is not in a folder Ropewalk looks in/).waitFor();
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('narrow window: the library fits in 420 px (screenshots, both themes)', async () => {
  const page = await openPage(420, 800);
  const library = page.locator('.library');
  await library.evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await until('the library has rows', async () => (await page.locator('.library-row').count()) > 1);
  assert.deepEqual(await overflowing(page), [], 'nothing in the library sticks out of the panel');
  await page.emulateMedia({ colorScheme: 'light' });
  await page.screenshot({ path: path.join(ARTIFACTS, 'library-420-light.png') });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(ARTIFACTS, 'library-420-dark.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('serve mode says the OpenAI-compatible API is live, and at what URL (it said nothing)', async () => {
  const page = await openPage(1440);
  const note = page.getByRole('status').filter({ hasText: 'API of the loaded model is live at' });
  await note.waitFor();
  assert.equal(await note.locator('code').innerText(), `${app.url}v1`);
  const models = (await (await fetch(`${app.url}v1/models`)).json()) as { data: unknown[] };
  assert.ok(models.data.length > 0, 'and it answers there');
  await page.close();
  assert.deepEqual(pageErrors, []);
});
