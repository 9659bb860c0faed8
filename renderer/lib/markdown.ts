/**
 * What makes model output safe to render: it is untrusted text. react-markdown without
 * rehype-raw turns raw HTML into plain text (so `<script>` and `<img onerror>` show as text), and
 * `safeUrl` keeps only http, https and mailto links (no `javascript:`, `data:`, `file:` or
 * relative URLs that would navigate the app window). Shared by the Markdown component and its tests.
 */
import remarkGfm from 'remark-gfm';

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

/** GitHub-flavoured Markdown (tables, strikethrough, task lists, autolinks). */
export const remarkPlugins = [remarkGfm];

/** The react-markdown options every message uses (components are added by the component). */
export const markdownOptions = {
  remarkPlugins,
  urlTransform: safeUrl,
  skipHtml: false, // keep raw HTML, shown as text: hiding it would hide what the model wrote
} as const;
