/**
 * End to end, the window as users expect it (issue 10), in `serve` mode with the real
 * stories260K model and Debian's headless Chromium: narrow windows (420 px and the Electron
 * window's 560 px minimum: the sidebar collapsed behind a named button, Send on screen), settings
 * refused or warned about at the field, the keyboard (Escape stops an answer before its first token and focus returns to the message box;
 * Ctrl+K / Ctrl+B / Ctrl+, / Ctrl+N; tooltips and the list in Settings name them; the panel
 * choice survives a reload), and the dark theme, whose text contrast is measured (WCAG AA) on
 * the main surfaces in both themes, and the model panel opening a float checkpoint quantized to
 * 8 bits (its load phases shown in words, as the CLI says them), and a full context in words (a
 * shifted answer's stats in the CLI's sentence, each context-full policy's hint). Screenshots at 1280×800 and
 * 420×800, light and dark, are saved under test/artifacts/.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { luminance, parseCssColor, textContrast } from '../helpers/contrast.ts';
import { ARTIFACTS, startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';
import { STORIES_BIN } from '../helpers/paths.ts';
import { holdAnswerFrames, type AnswerHold } from '../helpers/ws-hold.ts';
import type { AnswerStats } from '../../main/contract/types.ts';

// Greedy stories260K repeats this for ~2,000 tokens: an answer long enough to stop.
const LONG_PROMPT = 'Mom said no. Mom said no. Mom said no.';
const SEEDED_ANSWER = 'Once upon a time there was a **little** dog.\n\n```js\nconst dog = "Spot";\n```\n\nThe end.';

const SHIFTED_STATS: AnswerStats = {
  finishReason: 'length',
  promptTokens: 40,
  generatedTokens: 2000,
  reusedTokens: 0,
  ttftMs: 12,
  prefillTokensPerSec: 900,
  decodeTokensPerSec: 300,
  contextShift: { shifts: 3, droppedTokens: 1536 },
};

let app: E2eApp;
const pageErrors: string[] = [];

before(async () => {
  app = await startE2eApp((store) => {
    // An answer that went on past the max context (seeded first, so "A seeded chat" stays the newest).
    const shifted = store.createConversation('A shifted answer');
    store.appendMessage(shifted.id, { role: 'user', content: 'Tell me a long story', status: 'complete' });
    store.appendMessage(shifted.id, { role: 'assistant', content: 'Once upon a time, and on and on.', status: 'complete', stats: SHIFTED_STATS });
    // The JS backend: the native one writes the long answer below at ~1,000 tokens/s, done
    // before a click on Stop can land mid-stream.
    store.setSettings({ 'settings.backend': 'js' });
    const c = store.createConversation('A seeded chat');
    store.appendMessage(c.id, { role: 'user', content: 'Tell me about a dog', status: 'complete' });
    store.appendMessage(c.id, { role: 'assistant', content: SEEDED_ANSWER, status: 'complete' });
  });
});

after(async () => {
  await app?.close();
});

async function openPage(width: number, height = 800, beforeGoto?: (page: Page) => Promise<void>): Promise<Page> {
  const page = await app.browser.newPage({ viewport: { width, height } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await beforeGoto?.(page);
  await page.goto(app.url);
  await page.getByText('ready', { exact: true }).or(page.getByRole('button', { name: 'Sidebar' })).first().waitFor({ timeout: 60_000 });
  return page;
}

/** The accessible name of the focused element (aria-label or text). */
const focusedName = (page: Page) =>
  page.evaluate('document.activeElement && (document.activeElement.getAttribute("aria-label") || document.activeElement.textContent)') as Promise<string | null>;

/** Text colour and the background stack (innermost first, up to the first opaque one) of the first match of each selector. */
async function colours(page: Page, selectors: readonly string[]): Promise<Array<{ selector: string; color: string; backgrounds: string[] }>> {
  const script = `(${JSON.stringify(selectors)}).flatMap((selector) => {
    const el = document.querySelector(selector);
    if (!el) return [];
    const backgrounds = [];
    for (let n = el; n; n = n.parentElement) {
      const b = getComputedStyle(n).backgroundColor;
      backgrounds.push(b);
      if (b.startsWith('rgb(')) break;
    }
    return [{ selector, color: getComputedStyle(el).color, backgrounds }];
  })`;
  return (await page.evaluate(script)) as Array<{ selector: string; color: string; backgrounds: string[] }>;
}

/** Main surfaces: header, sidebar, messages, Markdown, stats, composer, Send, panel fields and hints. */
const SURFACES = [
  '.chat-title',
  '.brand-name',
  '.conv-link',
  '.conv-time',
  '.msg-bubble',
  '.markdown p',
  '.stats > span',
  '.composer-box textarea',
  '.btn-send',
  '.panel-section h2',
  '.field label',
  '.field-hint',
  '.badge',
  '.model-facts dt',
  '.code-head',
  '.code-block pre',
  '.code-block .hljs-keyword',
  '.code-block .hljs-string',
];

async function assertContrast(page: Page, theme: string): Promise<void> {
  await page.waitForTimeout(300); // colour transitions (0.12 s) settle first
  const found = await colours(page, SURFACES);
  assert.ok(found.length >= 10, `most surfaces are on screen (${found.map((f) => f.selector).join(', ')})`);
  const failing = found
    .map((f) => ({ ...f, ratio: textContrast(f.color, f.backgrounds) }))
    .filter((f) => f.ratio < 4.5)
    .map((f) => `${f.selector}: ${f.ratio.toFixed(2)} (${f.color} on ${f.backgrounds.join(' < ')})`);
  assert.deepEqual(failing, [], `WCAG AA (4.5:1) in the ${theme} theme`);
  // Code blocks follow the theme (they stayed dark in the light theme once).
  const code = found.find((f) => f.selector === '.code-block pre');
  assert.ok(code, 'the seeded answer\'s code block is on screen');
  const light = luminance(parseCssColor(code.backgrounds.find((b) => b.startsWith('rgb(')) ?? ''));
  assert.ok(theme === 'light' ? light > 0.8 : light < 0.05, `code block background luminance ${light.toFixed(3)} in the ${theme} theme`);
}

async function assertSendOnScreen(page: Page, width: number): Promise<void> {
  const box = await page.getByRole('button', { name: 'Send' }).boundingBox();
  assert.ok(box, 'Send is rendered');
  assert.ok(box.x >= 0 && box.x + box.width <= width, `Send lies within ${width} px (x ${box.x.toFixed(0)}–${(box.x + box.width).toFixed(0)})`);
}

test('narrow windows: the sidebar collapses behind a named button, Send stays on screen (420 px and 560 px)', async () => {
  const page = await openPage(420);
  const toggle = page.getByRole('button', { name: 'Sidebar' });
  await toggle.waitFor();
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false', 'collapsed by itself at 420 px');
  assert.equal(await page.getByRole('navigation', { name: 'Conversations' }).count(), 0);
  assert.equal(await page.getByRole('complementary', { name: 'Model and settings' }).count(), 0, 'the settings panel starts closed');
  await page.getByRole('textbox', { name: 'Message' }).fill('A draft long enough to fill the narrow composer with words');
  await assertSendOnScreen(page, 420);

  // The sidebar opens over the chat and closes again once a conversation is picked.
  await toggle.click();
  const nav = page.getByRole('navigation', { name: 'Conversations' });
  await nav.getByRole('link', { name: /A seeded chat/ }).click();
  await page.getByText('Tell me about a dog').waitFor();
  assert.equal(await nav.count(), 0, 'picked: the sidebar closed');
  await page.getByRole('textbox', { name: 'Message' }).fill('Another draft');
  await page.emulateMedia({ colorScheme: 'light' });
  await page.screenshot({ path: path.join(ARTIFACTS, 'window-420-light.png') });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(300); // colour transitions settle
  await page.screenshot({ path: path.join(ARTIFACTS, 'window-420-dark.png') });

  await page.setViewportSize({ width: 560, height: 600 });
  await assertSendOnScreen(page, 560);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('dark theme: follows the system, can be chosen in Settings, and keeps WCAG AA contrast; screenshots at 1280×800', async () => {
  const page = await openPage(1280);
  await page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: /A seeded chat/ }).click();
  await page.locator('.markdown p').first().waitFor();
  await page.getByRole('textbox', { name: 'Message' }).fill('A draft');

  await page.emulateMedia({ colorScheme: 'light' });
  assert.equal(await page.evaluate('document.documentElement.dataset.theme'), 'light');
  await assertContrast(page, 'light');
  await page.screenshot({ path: path.join(ARTIFACTS, 'window-1280-light.png') });

  await page.emulateMedia({ colorScheme: 'dark' });
  await until('the dark theme applies', async () => (await page.evaluate('document.documentElement.dataset.theme')) === 'dark', 5_000);
  await assertContrast(page, 'dark');
  await page.screenshot({ path: path.join(ARTIFACTS, 'window-1280-dark.png') });

  // The setting wins over the system, and survives a reload.
  await page.getByLabel('Theme').selectOption('light');
  assert.equal(await page.evaluate('document.documentElement.dataset.theme'), 'light');
  await page.reload();
  await page.getByLabel('Theme').waitFor();
  assert.equal(await page.evaluate('document.documentElement.dataset.theme'), 'light', 'kept across a reload while the system is dark');
  await page.getByLabel('Theme').selectOption('system');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('keyboard: Escape stops an answer before its first token and focus returns to the message box; shortcuts', async () => {
  const held: { hold?: AnswerHold } = {};
  const page = await openPage(1280, 800, async (p) => void (held.hold = await holdAnswerFrames(p)));
  const hold = held.hold!;
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  const setSetting = async (label: string, value: string) => {
    const field = page.getByLabel(label, { exact: true });
    await field.fill(value);
    await field.press('Enter');
  };
  // A new max context reloads the model: other settings wait for it (the services refuse meanwhile).
  await setSetting('Max context', '4096');
  await until('the model reloaded at 4096', async () => (await page.getByRole('meter').getAttribute('aria-valuemax')) === '4096');
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  await setSetting('Max new tokens', '3000');
  await setSetting('Temperature', '0');

  // Settings that stay consistent: a warning past the trained context (512), refusals at the field.
  await page
    .locator('#setting-maxContext-error')
    .getByText("Max context 4,096 is above the model's trained context (512): answers lose quality past it; 512 or less keeps them at full quality.", { exact: true })
    .waitFor();
  const maxTokens = page.locator('#setting-maxTokens'); // the Settings panel's (a chat's own settings have one too)
  for (const [typed, why] of [['5000', 'Must be less than the max context (4,096)'], ['1e3', '"1e3" is not a decimal number.']]) {
    await maxTokens.fill(typed);
    await page.getByRole('alert').getByText(why, { exact: false }).waitFor({ timeout: 5_000 });
  }
  await maxTokens.fill('3000');
  await maxTokens.press('Enter');
  assert.deepEqual(await page.locator('.notice').allInnerTexts(), [], 'the refusals stay at the field, not in the banner');

  assert.equal(await page.locator('.model-facts .backend').textContent(), 'JS', 'the seeded backend setting is in use');
  // Escape at once after Enter: the answer has not produced a token yet.
  const composer = page.getByRole('textbox', { name: 'Message' });
  await page.getByRole('button', { name: 'New chat' }).click();
  await composer.fill(LONG_PROMPT);
  await composer.press('Enter');
  await page.getByRole('button', { name: 'Stop' }).waitFor({ timeout: 30_000 });
  await page.keyboard.press('Escape');
  await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: 30_000 });
  const answer = page.locator('.msg-assistant').last();
  await until('the answer says it was stopped', async () => /stopped|cancelled/i.test(await answer.innerText()), 10_000).catch(async (e: Error) => {
    throw new Error(`${e.message}; the answer reads: ${JSON.stringify(await answer.innerText())}`);
  });
  assert.equal(await focusedName(page), 'Message', 'focus is back in the message box after Escape');

  // Stop by mouse, mid-stream: focus returns to the message box too. The answer is held in the
  // window mid-stream (test/helpers/ws-hold.ts): it ends in about two seconds, and a CI run's
  // click found it over.
  const answers = await page.locator('.msg-assistant').count();
  hold.arm();
  await composer.fill(LONG_PROMPT);
  await composer.press('Enter');
  await until('the new answer streams, held in the window', async () => hold.holding && (await page.locator('.msg-assistant').count()) > answers);
  await page.getByRole('button', { name: 'Stop' }).click();
  hold.release();
  await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: 30_000 });
  assert.equal(await focusedName(page), 'Message', 'focus is back in the message box after Stop');

  // Shortcuts, named in their tooltips and in Settings.
  assert.match((await page.getByRole('button', { name: 'New chat' }).getAttribute('title')) ?? '', /Ctrl\+N/);
  assert.match((await page.getByRole('button', { name: 'Sidebar' }).getAttribute('title')) ?? '', /Ctrl\+B/);
  const shortcuts = page.locator('.shortcuts');
  for (const keys of ['Ctrl+N', 'Ctrl+K', 'Ctrl+B', 'Ctrl+,', 'Esc']) assert.equal(await shortcuts.getByText(keys, { exact: true }).count(), 1, keys);

  await page.keyboard.press('Control+k');
  assert.equal(await focusedName(page), 'Search conversations');
  await page.keyboard.press('Control+b');
  await until('the sidebar hides', async () => (await page.getByRole('navigation', { name: 'Conversations' }).count()) === 0, 5_000);
  await page.keyboard.press('Control+b');
  await page.getByRole('navigation', { name: 'Conversations' }).waitFor();

  const chats = page.getByRole('navigation', { name: 'Conversations' }).getByRole('listitem');
  const before = await chats.count();
  await page.keyboard.press('Control+n');
  await until('a new chat is listed', async () => (await chats.count()) === before + 1, 10_000);
  assert.equal(await focusedName(page), 'Message', 'the new chat takes the focus');

  const panel = page.getByRole('complementary', { name: 'Model and settings' });
  await page.keyboard.press('Control+,');
  await until('the settings panel closes', async () => (await panel.count()) === 0, 5_000);
  await page.reload();
  await page.getByRole('button', { name: 'Sidebar' }).waitFor();
  await page.waitForTimeout(300);
  assert.equal(await panel.count(), 0, 'closed after a reload');
  await page.keyboard.press('Control+,');
  await panel.waitFor();
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('a full context in words: a shifted answer says so in the CLI\'s sentence; Settings says what each policy does mid-answer', async () => {
  const page = await openPage(1280);
  await page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: /A shifted answer/ }).click();
  // The chip is a short label; its tooltip and the stats tooltip's last line are the CLI's note (main/contract/context-full.ts).
  const sentence = 'The max context was reached; the context was shifted 3 times and the answer went on (1,536 earlier tokens dropped).';
  const chip = page.locator('.msg-assistant .stats-shifted');
  await chip.waitFor();
  assert.equal(await chip.textContent(), 'context shifted');
  assert.equal(await chip.getAttribute('title'), sentence);
  const statsTitle = (await page.locator('.msg-assistant .stats').getAttribute('title')) ?? '';
  assert.equal(statsTitle.split('\n').at(-1), sentence, statsTitle);

  // The chosen policy's hint under "When the context is full", and the open chat's own one.
  const hintOf = (id: string) => page.locator('.field', { has: page.locator(`#${id}`) }).locator('.field-hint');
  const policy = page.getByLabel('When the context is full', { exact: true });
  const hints: Record<string, string> = {
    'truncate-middle':
      'Keeps the system prompt and the first exchange with its documents; leaves out the oldest exchanges after it. An answer that reaches the max context goes on: the first exchange is kept and the oldest turns after it are dropped.',
    'rolling-window': 'Keeps the system prompt; leaves out the oldest exchanges. An answer that reaches the max context goes on: the oldest turns are dropped.',
    stop: 'Leaves nothing out: Send refuses a message that does not fit, and an answer that reaches the max context ends there.',
  };
  for (const [value, hint] of Object.entries(hints)) {
    await policy.selectOption(value);
    await until(`the hint for ${value}`, async () => (await hintOf('setting-context-full').textContent()) === hint, 10_000).catch(async (e: Error) => {
      throw new Error(`${e.message}; the hint reads ${JSON.stringify(await hintOf('setting-context-full').textContent())}`);
    });
  }
  assert.deepEqual(await policy.locator('option').allTextContents(), ['Stop', 'Truncate the middle', 'Rolling window']);
  await page.getByLabel('This chat, when full', { exact: true }).selectOption('truncate-middle');
  await until('the chat policy hint', async () => (await hintOf('setting-chat-policy').textContent()) === `${hints['truncate-middle']} (This chat only.)`, 10_000);
  await page.getByLabel('This chat, when full', { exact: true }).selectOption('');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('a model that cannot be opened: one error, at the field, that says what to do; the loaded model keeps answering', async () => {
  const page = await openPage(1280);
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  const missing = '/no/such/folder/model.gguf';
  await page.getByLabel('Model path').fill(missing);
  await page.getByRole('button', { name: 'Open model…' }).click();
  const advice = 'Check the path, or choose the model again';
  await page.getByRole('alert').getByText(advice, { exact: false }).waitFor({ timeout: 30_000 });
  assert.equal(await page.getByText(missing, { exact: false }).count(), 1, 'the error is shown once (not in the card and a banner too)');
  assert.equal(await page.getByText('ready', { exact: true }).count(), 1, 'the loaded model is still ready');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('model panel: a float checkpoint opened with "Quantize to 8 bits" loads as 8-bit blocks', async () => {
  const page = await openPage(1280);
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  await page.getByLabel('Model path').fill(STORIES_BIN);
  await page.getByLabel('Weights', { exact: true }).selectOption('q8');
  // Every phase the panel shows while loading, in words (main/contract/load-phase.ts), as the CLI says them.
  // (A string: tsx would wrap a named function in a __name helper the page does not have.)
  await page.evaluate(`{
    window.seenPhases = [];
    new MutationObserver(() => {
      for (const el of document.querySelectorAll('.model-phase')) if (window.seenPhases.at(-1) !== el.textContent) window.seenPhases.push(el.textContent);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  }`);
  await page.getByRole('button', { name: 'Open model…' }).click();
  const weights = page.locator('.model-weights');
  await until('the model panel lists 8-bit blocks', async () => /q8 \(rtn\)/.test((await weights.textContent()) ?? ''), 60_000).catch(async (e: Error) => {
    throw new Error(`${e.message}; the panel says: ${JSON.stringify(await page.locator('.model-card').innerText())}`);
  });
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 60_000 });
  const phases = (await page.evaluate('window.seenPhases')) as string[];
  assert.ok(phases.length > 0, 'the panel showed the load progress');
  const WORDS = ['starting the engine', 'hashing the model files', 'reading the model', 'building the graph', 'writing weights', 'found in the model cache'];
  for (const p of phases) assert.ok(WORDS.includes(p), `phase shown in words: ${JSON.stringify(p)} (all: ${JSON.stringify(phases)})`);
  await page.close();
  assert.deepEqual(pageErrors, []);
});
