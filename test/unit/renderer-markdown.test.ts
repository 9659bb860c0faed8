/**
 * Model output is untrusted: rendered with the window's Markdown options (renderer/lib/markdown.ts)
 * through react-markdown and react-dom/server, raw HTML comes out as text (no <script>, no <img
 * onerror>), links keep only http/https/mailto, and Markdown itself (code, tables) still renders;
 * code is highlighted, math typeset by KaTeX (invalid TeX as text, no links from TeX).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import ReactMarkdown from 'react-markdown';
import { markdownOptions, safeUrl } from '../../renderer/lib/markdown.ts';

const render = (text: string) => renderToStaticMarkup(createElement(ReactMarkdown, markdownOptions, text));

describe('renderer Markdown safety', () => {
  it('shows raw HTML as text', () => {
    const html = render('Look: <img src=x onerror=alert(1)> and <script>alert(2)</script>');
    assert.doesNotMatch(html, /<img/i);
    assert.doesNotMatch(html, /<script/i);
    assert.match(html, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.match(html, /&lt;script&gt;alert\(2\)&lt;\/script&gt;/);
  });

  it('shows a block of raw HTML as text', () => {
    const html = render('<div onclick="alert(1)">\n<iframe src="https://example.com"></iframe>\n</div>');
    assert.doesNotMatch(html, /<(div|iframe)/i);
    assert.match(html, /&lt;iframe/);
  });

  it('drops javascript:, data: and relative link targets, keeps http, https and mailto', () => {
    const html = render('[a](javascript:alert(1)) [b](JAVASCRIPT:alert(1)) [c](data:text/html,x) [d](/etc/passwd) [e](https://example.com/x) [f](mailto:a@b.c)');
    assert.doesNotMatch(html, /javascript|data:|passwd/i);
    assert.match(html, /href="https:\/\/example.com\/x"/);
    assert.match(html, /href="mailto:a@b.c"/);
  });

  it('safeUrl keeps only http, https and mailto', () => {
    assert.equal(safeUrl('http://example.com'), 'http://example.com/');
    assert.equal(safeUrl('https://example.com/a?b#c'), 'https://example.com/a?b#c');
    assert.equal(safeUrl('mailto:someone@example.com'), 'mailto:someone@example.com');
    for (const bad of ['javascript:alert(1)', ' javascript:alert(1)', 'java\tscript:alert(1)', 'vbscript:x', 'file:///etc/passwd', 'data:image/png;base64,AA', '#top', '/x', 'x.html']) {
      assert.equal(safeUrl(bad), null, bad);
    }
  });

  it('still renders Markdown: code blocks, inline code, tables, emphasis', () => {
    const html = render('**bold** and `x<y`\n\n```js\nif (a < b) alert(1)\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |');
    assert.match(html, /<strong>bold<\/strong>/);
    assert.match(html, /<code>x&lt;y<\/code>/);
    assert.match(html, /<pre><code class="hljs language-js"><span class="hljs-keyword">if<\/span> \(a &lt; b\) <span class="hljs-title function_">alert<\/span>\(<span class="hljs-number">1<\/span>\)\n<\/code><\/pre>/);
    assert.match(html, /<table>/);
  });

  it('typesets $…$ and $$…$$ with KaTeX; invalid TeX is its own text, in the text colour, not an error', () => {
    const html = render('Energy $E = mc^2$, display:\n\n$$\n\\frac{a}{b}\n$$\n\nand broken $\\frac{1$ here.');
    assert.match(html, /<span class="katex">/);
    assert.match(html, /<span class="katex-display">/);
    assert.match(html, /<span class="katex-error" title="[^"]*" style="color:currentColor">\\frac\{1<\/span>/);
  });

  it('$$…$$ on one line is display math, as within a paragraph; $…$ stays inline (it rendered inline-size)', () => {
    for (const src of ['$$E = mc^2$$', 'The energy\n$$E = mc^2$$\nof a mass.', 'So $$E = mc^2$$ here.']) {
      const html = render(src);
      assert.equal((html.match(/<span class="katex-display">/g) ?? []).length, 1, `${JSON.stringify(src)}: ${html.slice(0, 120)}`);
    }
    assert.doesNotMatch(render('Energy $E = mc^2$ inline, and a price of $5 and $6.'), /katex-display/);
    // A dollar pair inside code is not math at all.
    assert.doesNotMatch(render('`$$x$$`'), /katex/);
  });

  it('KaTeX makes no links or images from TeX (trust off): \\href and \\includegraphics stay text', () => {
    const html = render('$\\href{javascript:alert(1)}{x}$ and $\\includegraphics{https://example.com/a.png}$');
    assert.doesNotMatch(html, /<a |<img /);
  });

  it('highlights only fences that name a language; unknown names stay plain', () => {
    assert.doesNotMatch(render('```\nif (a) b()\n```'), /hljs-/);
    assert.match(render('```no-such-language\nif (a) b()\n```'), /<code class="hljs language-no-such-language">if \(a\) b\(\)\n<\/code>/);
  });
});
