/**
 * Images of known text for OCR tests, rendered by Debian's headless Chromium (playwright-core):
 * `renderTextImages(paragraphs, type)` → one screenshot (PNG or JPEG bytes) per page of black
 * serif text on white, 816 × 1056 CSS pixels at device scale 1 (a Letter page at 96 dpi), with the
 * size in pixels. The expected words are the input, never OCR output.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export interface RenderedPage {
  bytes: Buffer;
  width: number;
  height: number;
}

/** One image per entry of `pages` (each a list of paragraphs); `size` other than a Letter page (CSS pixels, 72 px margins). */
export async function renderTextImages(pages: readonly (readonly string[])[], type: 'png' | 'jpeg', size: { width: number; height: number } = { width: 816, height: 1056 }): Promise<RenderedPage[]> {
  assert.ok(existsSync(CHROMIUM), `Debian's chromium is needed at ${CHROMIUM} (apt-get install chromium)`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const { width, height } = size;
    const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
    const out: RenderedPage[] = [];
    for (const paragraphs of pages) {
      const body = paragraphs.map((p) => `<p>${p.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]!)}</p>`).join('');
      await page.setContent(`<html><body style="margin:72px;background:#fff;color:#000;font:22px/1.5 'DejaVu Serif',serif">${body}</body></html>`);
      out.push({ bytes: await page.screenshot({ type, ...(type === 'jpeg' ? { quality: 90 } : {}) }), width, height });
    }
    return out;
  } finally {
    await browser.close();
  }
}
