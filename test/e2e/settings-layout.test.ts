/**
 * Settings that stay true, in Chromium through `serve` with stories260K loaded under a long file
 * name (a model name as long as real ones, "…-Q4_K_M-instruct"): at 420 × 800 and 1440 × 900, in
 * the light and the dark theme, nothing in the model and settings panel or in the chat settings
 * popover is cut off (no element's box passes its container's right edge, no sideways scroll, the
 * popover inside the window), and a save says "Saved". Screenshots of each go to a folder under
 * the system's temp folder (printed), for a person to look at.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';
import { STORIES_BIN, STORIES_DIR } from '../helpers/paths.ts';

const modelDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-layout-model-'));
const LONG_NAME = 'stories260K-a-model-name-as-long-as-real-ones-8B-Q4_K_M-instruct';
const SHOTS = path.join(os.tmpdir(), 'ropewalk-layout-shots');
let app: E2eApp;

before(async () => {
  symlinkSync(STORIES_BIN, path.join(modelDir, `${LONG_NAME}.bin`));
  symlinkSync(path.join(STORIES_DIR, 'tok512.bin'), path.join(modelDir, 'tok512.bin'));
  mkdirSync(SHOTS, { recursive: true });
  app = await startE2eApp(undefined, { ROPEWALK_DEFAULT_MODEL: path.join(modelDir, `${LONG_NAME}.bin`) });
});
after(async () => {
  await app?.close();
  rmSync(modelDir, { recursive: true, force: true });
});

/** Elements inside `container` whose box passes its right edge (by more than a pixel), or the container's sideways scroll. */
async function overflowing(container: Locator): Promise<string[]> {
  return container.evaluate((root) => {
    const edge = root.getBoundingClientRect().right + 1;
    const out: string[] = [];
    if (root.scrollWidth > root.clientWidth + 1) out.push(`the container scrolls sideways (${root.scrollWidth} > ${root.clientWidth})`);
    for (const el of Array.from(root.querySelectorAll<HTMLElement>('*'))) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || getComputedStyle(el).visibility === 'hidden') continue;
      // Text cut with an ellipsis is the design (the model name); what must not happen is a box past the edge.
      if (r.right > edge) out.push(`${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}.${Array.from(el.classList).join('.')} ends at ${Math.round(r.right)} > ${Math.round(edge)}`);
    }
    return out;
  });
}

async function checkAt(page: Page, width: number, height: number, theme: 'light' | 'dark'): Promise<void> {
  await page.setViewportSize({ width, height });
  await page.emulateMedia({ colorScheme: theme });
  const panel = page.locator('#side-panel');
  if ((await panel.count()) === 0) await page.getByRole('button', { name: 'Model and settings' }).click();
  await panel.waitFor();
  await until('the model is named', async () => (await panel.innerText()).includes(LONG_NAME), 30_000);
  await page.waitForTimeout(200); // the panel's slide-in transition
  await panel.screenshot({ path: path.join(SHOTS, `panel-${width}-${theme}.png`) });
  assert.deepEqual(await overflowing(panel), [], `the panel at ${width} px, ${theme}`);
  await page.locator('section[aria-labelledby="settings-heading"]').screenshot({ path: path.join(SHOTS, `settings-${width}-${theme}.png`) });
  await page.getByRole('button', { name: 'Model and settings' }).click(); // closed: the popover is under the header
  await page.getByLabel('Chat settings').click();
  const popover = page.locator('.chat-settings');
  await popover.waitFor();
  await page.screenshot({ path: path.join(SHOTS, `chat-settings-${width}-${theme}.png`) });
  assert.deepEqual(await overflowing(popover), [], `the chat settings at ${width} px, ${theme}`);
  const box = (await popover.boundingBox())!;
  assert.ok(box.x >= 0 && box.x + box.width <= width, `the popover is inside the window at ${width} px: ${JSON.stringify(box)}`);
  await page.getByLabel('Chat settings').click();
}

test('no clipping in the settings panel or the chat settings at 420 and 1440 px, light and dark; saves say Saved', async () => {
  const page = await app.browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.goto(app.url);
  await page.getByText('ready', { exact: true }).first().waitFor({ timeout: 90_000 });
  await page.getByRole('button', { name: 'New chat' }).first().click();
  for (const width of [1440, 420]) for (const theme of ['light', 'dark'] as const) await checkAt(page, width, width === 420 ? 800 : 900, theme);
  // A save is acknowledged.
  if ((await page.locator('#side-panel').count()) === 0) await page.getByRole('button', { name: 'Model and settings' }).click();
  await page.locator('#setting-temperature').fill('0.7');
  await page.locator('#setting-temperature').press('Enter');
  await page.locator('#settings-status').getByText('Saved').waitFor({ timeout: 10_000 });
  process.stdout.write(`# screenshots: ${SHOTS}\n`);
});
