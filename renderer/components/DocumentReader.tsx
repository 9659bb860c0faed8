/**
 * The document reader: a document's extracted text, as plain text (never HTML), with the passage
 * asked for (a used part, a citation) marked and scrolled into view. A modal `<dialog>`
 * (`showModal`): the page behind is inert, focus moves into the dialog, Tab and Shift+Tab cycle
 * inside it (the platform lets focus leave to the browser's own UI; here it wraps), Esc and a
 * click on the backdrop close it, and on close focus goes back to what had it before (the chip
 * or link that opened it).
 */
import { useEffect, useRef, type KeyboardEvent, type MouseEvent } from 'react';
import type { DocumentText } from '../../main/contract/types.ts';
import { useChat, useStores } from '../hooks.ts';
import { formatTokens } from '../lib/meter.ts';

/** The text, with the highlighted passage (if any) marked and scrolled into view. */
function ReaderText({ text, highlight }: { text: string; highlight?: { start: number; end: number } }) {
  const mark = useRef<HTMLElement>(null);
  useEffect(() => {
    mark.current?.scrollIntoView({ block: 'start' });
  }, [text, highlight?.start, highlight?.end]);
  // Focusable, so the keyboard can scroll it.
  if (!highlight) return <pre className="doc-reader-text" tabIndex={0}>{text}</pre>;
  return (
    <pre className="doc-reader-text" tabIndex={0}>
      {text.slice(0, highlight.start)}
      <mark ref={mark} className="doc-reader-mark">
        {text.slice(highlight.start, highlight.end)}
      </mark>
      {text.slice(highlight.end)}
    </pre>
  );
}

const FOCUSABLE = 'button:not([disabled]), [href], input:not([disabled]), select, textarea, [tabindex]:not([tabindex="-1"])';

/** Tab on the last focusable element goes to the first, Shift+Tab on the first to the last. */
function wrapTab(e: KeyboardEvent<HTMLDialogElement>): void {
  if (e.key !== 'Tab') return;
  const items = [...e.currentTarget.querySelectorAll<HTMLElement>(FOCUSABLE)];
  if (items.length === 0) return;
  const [first, last] = [items[0], items[items.length - 1]];
  const at = document.activeElement;
  if (e.shiftKey && (at === first || !e.currentTarget.contains(at))) {
    e.preventDefault();
    last.focus();
  } else if (!e.shiftKey && (at === last || !e.currentTarget.contains(at))) {
    e.preventDefault();
    first.focus();
  }
}

function ReaderDialog({ doc }: { doc: DocumentText & { highlight?: { start: number; end: number } } }) {
  const stores = useStores();
  const dialog = useRef<HTMLDialogElement>(null);
  const close = () => stores.chat.getState().closeDocument();
  useEffect(() => {
    const el = dialog.current;
    if (!el) return;
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    el.showModal();
    return () => {
      if (el.open) el.close();
      // The opener may have gone (a re-render replaced it): then the composer is the place to be.
      if (opener?.isConnected) opener.focus();
      else stores.ui.getState().focusComposer();
    };
  }, [stores]);
  const onBackdrop = (e: MouseEvent<HTMLDialogElement>) => {
    if (e.target === e.currentTarget) close(); // the dialog's box is its content; outside it is the backdrop
  };
  return (
    <dialog
      ref={dialog}
      className="doc-reader"
      aria-label={doc.name}
      onCancel={(e) => {
        e.preventDefault(); // Esc: the store closes it, so state and dialog agree
        close();
      }}
      onKeyDown={wrapTab}
      onClick={onBackdrop}
    >
      <div className="doc-reader-box">
        <header>
          <h2>{doc.name}</h2>
          <span className="doc-chip-meta">
            {doc.kind} · {doc.tokens === null ? '' : `${doc.tokensEstimated ? '≈' : ''}${formatTokens(doc.tokens)} tokens`}
          </span>
          <button type="button" className="btn" onClick={close}>
            Close
          </button>
        </header>
        <ReaderText text={doc.text} highlight={doc.highlight} />
      </div>
    </dialog>
  );
}

/** The reader, while a document is open (the chat store's `reading`). */
export function DocumentReader() {
  const doc = useChat((s) => s.reading);
  // Keyed by document, so opening another one is a fresh dialog (its opener remembered anew).
  return doc ? <ReaderDialog key={doc.id} doc={doc} /> : null;
}
