/**
 * What makes model output safe to render: it is untrusted text. react-markdown without
 * rehype-raw turns raw HTML into plain text (so `<script>` and `<img onerror>` show as text), and
 * `safeUrl` keeps only http, https and mailto links (no `javascript:`, `data:`, `file:` or
 * relative URLs that would navigate the app window). Shared by the Markdown component and its tests.
 *
 * Beyond GitHub-flavoured Markdown: `$…$` and `$$…$$` are math, typeset by KaTeX (remark-math +
 * rehype-katex; `$$…$$` is display math wherever it is written, on its own lines or within one
 * (remark-math reads the one-line form as inline; `remarkDisplayDollars` fixes that); KaTeX's `trust` stays off, so \href, \url and \includegraphics render as plain
 * text, and invalid TeX is shown as its source text, in the text colour, never as an error), and
 * fenced code is highlighted by rehype-highlight (highlight.js grammars through lowlight: spans
 * with `hljs-*` classes, coloured by chat.css; a fence naming an unknown language stays plain).
 * Both only add elements and classes; nothing from the model becomes HTML.
 */
import type { Options } from 'react-markdown';
import rehypeHighlight from 'rehype-highlight';
import rehypeKatex from 'rehype-katex';
import remarkGfm from 'remark-gfm';
import remarkMath from 'remark-math';

const ALLOWED_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

/** react-markdown `urlTransform`: the URL, normalized, when its protocol is allowed; else null. */
export function safeUrl(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null; // relative, or not a URL at all
  }
  return ALLOWED_PROTOCOLS.has(parsed.protocol) ? parsed.href : null;
}

/** The parts of an mdast node this file reads (remark's tree; structural, so no type package is needed). */
interface MdNode {
  type: string;
  children?: MdNode[];
  position?: { start: { offset?: number } };
  data?: { hProperties?: Record<string, unknown> };
}

/**
 * A remark plugin: inline math written with two dollars (`$$E = mc^2$$`, on one line) becomes
 * display math, as it is in TeX and as people mean it (remark-math keeps it inline-size, since
 * its flow form needs the fences on their own lines). The source text tells one dollar from two.
 */
export function remarkDisplayDollars() {
  return (tree: MdNode, file: { value: unknown }) => {
    const source = String(file.value);
    const walk = (node: MdNode): void => {
      const at = node.position?.start.offset;
      if (node.type === 'inlineMath' && at !== undefined && source.startsWith('$$', at)) {
        node.data = { ...node.data, hProperties: { ...node.data?.hProperties, className: ['language-math', 'math-display'] } };
      }
      node.children?.forEach(walk);
    };
    walk(tree);
  };
}

/** GitHub-flavoured Markdown (tables, strikethrough, task lists, autolinks) and math. */
export const remarkPlugins: NonNullable<Options['remarkPlugins']> = [remarkGfm, remarkMath, remarkDisplayDollars];

/**
 * KaTeX: errors shown as the TeX source in the surrounding text colour (`throwOnError: false`
 * keeps one bad formula from failing the message); highlight.js: only fences that name a
 * language (guessing one for plain text mislabels prose).
 */
export const rehypePlugins: NonNullable<Options['rehypePlugins']> = [
  [rehypeKatex, { throwOnError: false, errorColor: 'currentColor', trust: false, strict: 'ignore' }],
  [rehypeHighlight, { detect: false }],
];

/** The react-markdown options every message uses (components are added by the component). */
export const markdownOptions = {
  remarkPlugins,
  rehypePlugins,
  urlTransform: safeUrl,
  skipHtml: false, // keep raw HTML, shown as text: hiding it would hide what the model wrote
} as const;
