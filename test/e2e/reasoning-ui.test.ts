/**
 * A reasoning model's thinking in the window, end to end: `serve` with a REAL Qwen3 model run by
 * ONNX Runtime whose weights force its reply (test/helpers/bigram-qwen3.ts:
 * `<think>Let me think</think>Hello!`, or `Hello!` when the prompt turns thinking off), driven
 * in Debian's headless Chromium. The window's WebSocket is routed through Playwright so the
 * answer's first text is held back: while only the reasoning has arrived, the "Thinking…" block
 * is open above an empty answer; once the answer arrives it collapses to "Thought for … · 5
 * tokens" and opens on a click. Copy takes the answer alone. The chat's Think toggle (offered
 * because Qwen3's template reads enable_thinking) turns thinking off for the next answer; after a
 * reload the stored reasoning and the toggle are still there. A screenshot goes to test/artifacts/.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page, WebSocketRoute } from 'playwright-core';
import { chainAfter, writeBigramQwen3 } from '../helpers/bigram-qwen3.ts';
import { ARTIFACTS, startE2eApp, until, type E2eApp } from '../helpers/e2e-app.ts';

const REPLY = [151667, 10061, 752, 1744, 151668, 9707, 0]; // <think>Let me think</think>Hello!
const modelRoot = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-e2e-qwen3-'));
const modelDir = path.join(modelRoot, 'qwen3-bigram');
let app: E2eApp;
let page: Page;
const pageErrors: string[] = [];

/** Holds the server's frames from the first one that carries answer text, until `release`. */
const gate = { armed: false, holding: false, held: [] as string[], page: null as WebSocketRoute | null };

function release(): void {
  gate.armed = gate.holding = false;
  for (const f of gate.held.splice(0)) gate.page?.send(f);
}

before(async () => {
  const next = chainAfter(198, REPLY);
  next.set(271, 9707); // enable_thinking false: the prompt ends "</think>\n\n", the reply is "Hello!"
  await writeBigramQwen3(modelDir, next);
  app = await startE2eApp(undefined, { ROPEWALK_DEFAULT_MODEL: modelDir });
  const context = await app.browser.newContext({ viewport: { width: 1280, height: 860 }, permissions: ['clipboard-read', 'clipboard-write'] });
  page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.routeWebSocket(/\/ws$/, (ws) => {
    gate.page = ws;
    const server = ws.connectToServer();
    server.onMessage((m) => {
      const text = typeof m === 'string' ? m : m.toString('utf8');
      if (gate.armed && !gate.holding) {
        const f = JSON.parse(text) as { kind: string; event?: string; data?: { text?: string; reasoning?: string } };
        if (f.kind === 'event' && f.event === 'answerDelta' && f.data?.text) {
          // Reasoning comes before the answer: a frame with both lets its reasoning through first.
          if (f.data.reasoning) ws.send(JSON.stringify({ ...f, data: { ...f.data, text: '' } }));
          gate.holding = true;
          gate.held.push(JSON.stringify({ ...f, data: { ...f.data, reasoning: undefined } }));
          return;
        }
        if (f.kind === 'event' && f.event === 'answerDone') gate.holding = true;
      }
      if (gate.holding) gate.held.push(text);
      else ws.send(text);
    });
  });
});

after(async () => {
  await app?.close();
  rmSync(modelRoot, { recursive: true, force: true });
});

const lastAnswer = () => page.locator('.msg-assistant').last();

test('Thinking open while the model thinks, collapsed with its time and tokens once the answer starts; Copy takes the answer; Think off', async () => {
  await page.goto(app.url);
  await page.getByRole('button', { name: 'New chat' }).click();
  await page.getByText('ready', { exact: true }).waitFor({ timeout: 120_000 });
  const think = page.getByRole('checkbox', { name: 'Think' });
  await think.waitFor();
  assert.equal(await think.isChecked(), true, "unset: Qwen3's default, thinking on");

  gate.armed = true;
  const composer = page.getByRole('textbox', { name: 'Message' });
  await composer.fill('Hi');
  await composer.press('Enter');

  // Only the reasoning has reached the window: the block is open, the answer empty.
  const thinking = lastAnswer().getByRole('button', { name: 'Thinking…' });
  await thinking.waitFor({ timeout: 60_000 });
  await until('the reasoning streamed in', async () => (await lastAnswer().getByRole('region', { name: 'Thinking' }).textContent()) === 'Let me think');
  assert.equal(await thinking.getAttribute('aria-expanded'), 'true');
  assert.ok(!(await lastAnswer().innerText()).includes('Hello!'), 'no answer text yet');

  release();
  const thought = lastAnswer().getByRole('button', { name: /^Thought for \d+\.\d s · 5 tokens$/ });
  await thought.waitFor({ timeout: 30_000 });
  assert.equal(await thought.getAttribute('aria-expanded'), 'false', 'collapsed once the answer started');
  assert.equal(await lastAnswer().getByRole('region', { name: 'Thinking' }).count(), 0);
  assert.ok((await lastAnswer().innerText()).includes('Hello!'));
  await thought.click();
  assert.equal(await lastAnswer().getByRole('region', { name: 'Thinking' }).textContent(), 'Let me think', 'a click opens it');
  await page.screenshot({ path: path.join(ARTIFACTS, 'reasoning-window.png') });

  await lastAnswer().getByRole('button', { name: 'Copy' }).click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'Hello!', 'Copy takes the answer alone');

  // Think off: the template closes the block in the prompt, the model answers at once.
  await think.click(); // the checkbox follows the stored toggle, after the call returns
  await until('the toggle is stored', async () => !(await think.isChecked()));
  await composer.fill('Again');
  await composer.press('Enter');
  await until('the second answer', async () => (await page.locator('.msg-assistant').count()) === 2 && (await lastAnswer().innerText()).includes('Hello!') && (await lastAnswer().getByRole('button', { name: 'Copy' }).count()) === 1, 60_000);
  assert.equal(await lastAnswer().locator('.thinking').count(), 0, 'no thinking block without reasoning');

  // Stored: after a reload the first answer keeps its reasoning apart, the chat its toggle.
  await page.reload();
  await page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: /Hi/ }).click();
  await page.locator('.msg-assistant').first().getByRole('button', { name: /^Thought for/ }).waitFor({ timeout: 30_000 });
  assert.equal(await page.getByRole('checkbox', { name: 'Think' }).isChecked(), false);
  assert.deepEqual(pageErrors, []);
});
