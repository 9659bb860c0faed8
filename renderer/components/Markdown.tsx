/**
 * Renders model output (untrusted) as Markdown: raw HTML shows as text, links keep only
 * http/https/mailto and open outside the app window (target _blank; the shell decides), images
 * are not loaded (shown as their alt text and link), code blocks get a language label and a copy
 * button. See lib/markdown.ts for the safety options, which the tests exercise.
 */
import { memo, useRef, type ComponentPropsWithoutRef, type ReactNode } from 'react';
import ReactMarkdown, { type Components, type ExtraProps } from 'react-markdown';
import { markdownOptions } from '../lib/markdown.ts';
import { CopyButton } from './CopyButton.tsx';

function CodeBlock({ children, node }: ComponentPropsWithoutRef<'pre'> & ExtraProps) {
  const pre = useRef<HTMLPreElement>(null);
  const code = node?.children[0];
  const classes = code && code.type === 'element' ? code.properties.className : undefined;
  const language = Array.isArray(classes)
    ? classes.map(String).find((c) => c.startsWith('language-'))?.slice('language-'.length)
    : undefined;
  return (
    <div className="code-block">
      <div className="code-head">
        <span className="code-lang">{language ?? 'text'}</span>
        <CopyButton label="Copy code" text={() => pre.current?.textContent ?? ''} className="btn btn-ghost btn-xs code-copy" />
      </div>
      <pre ref={pre}>{children}</pre>
    </div>
  );
}

function Link({ href, children }: ComponentPropsWithoutRef<'a'> & ExtraProps) {
  if (!href) return <span className="link-removed">{children}</span>;
  return (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow" title={href}>
      {children}
    </a>
  );
}

function Image({ src, alt }: ComponentPropsWithoutRef<'img'> & ExtraProps) {
  const label: ReactNode = `[image${alt ? `: ${alt}` : ''}]`;
  if (typeof src !== 'string' || !src) return <span className="image-placeholder">{label}</span>;
  return (
    <a className="image-placeholder" href={src} target="_blank" rel="noopener noreferrer nofollow" title={src}>
      {label}
    </a>
  );
}

function Table({ children }: ComponentPropsWithoutRef<'table'> & ExtraProps) {
  return (
    <div className="table-wrap">
      <table>{children}</table>
    </div>
  );
}

const components: Components = { pre: CodeBlock, a: Link, img: Image, table: Table };

export const Markdown = memo(function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <ReactMarkdown {...markdownOptions} components={components}>
        {text}
      </ReactMarkdown>
    </div>
  );
});
