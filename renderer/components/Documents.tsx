/**
 * Documents in the window: chips (a document's name and tokens, pages read by OCR, pages without
 * text; clicking one opens its extracted
 * text in the reader), the composer's attachments row with its Attach button (a file input), the
 * offer when the documents do not fit (raise the max context, use the relevant parts, cancel);
 * the reader dialog is DocumentReader.tsx. Files are only read as bytes here; the services extract the text.
 */
import { useRef } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { raiseToFit } from '../../main/contract/context-full.ts';
import { noTextWarning, ocrNote, pageList } from '../../main/contract/document-pages.ts';
import type { ContextBudget, DocumentInfo } from '../../main/contract/types.ts';
import { useBudget, useChat, useModel, useStores } from '../hooks.ts';
import { formatTokens } from '../lib/meter.ts';

type ChipDoc = Pick<DocumentInfo, 'id' | 'name' | 'tokens' | 'fit'> & Partial<Pick<DocumentInfo, 'kind' | 'ocrPages' | 'pagesWithoutText' | 'tokensEstimated'>>;

/**
 * A document chip: opens the extracted text. It says which pages OCR read ("OCR p. 2–3") and,
 * as a warning, which have no text at all ("no text p. 4"); the sentences (the CLI's words) are
 * its tooltip.
 */
export function DocumentChip({ doc, onRemove }: { doc: ChipDoc; onRemove?: () => void }) {
  const stores = useStores();
  const tokens = doc.tokens === null ? '' : ` · ${doc.tokensEstimated ? '≈' : ''}${formatTokens(doc.tokens)} tokens`;
  const facts = { kind: doc.kind ?? '', ocrPages: doc.ocrPages, pagesWithoutText: doc.pagesWithoutText };
  const notes = [ocrNote(facts), noTextWarning(facts)].filter((n): n is string => n !== null);
  const title = [`Open the text of ${doc.name}`, ...notes].join('\n');
  return (
    <span className="doc-chip" data-fit={doc.fit} data-warning={doc.pagesWithoutText?.length ? 'true' : undefined}>
      <button type="button" className="doc-chip-open" title={title} onClick={() => void stores.chat.getState().openDocument(doc.id, undefined, doc.name)}>
        <span className="doc-chip-name">{doc.name}</span>
        <span className="doc-chip-meta">
          {tokens}
          {doc.fit === 'relevant' ? ' · relevant parts' : ''}
          {doc.ocrPages?.length ? (doc.kind === 'image' ? ' · OCR' : ` · OCR p. ${pageList(doc.ocrPages)}`) : ''}
        </span>
        {doc.pagesWithoutText?.length ? <span className="doc-chip-warning">{` · no text p. ${pageList(doc.pagesWithoutText)}`}</span> : null}
      </button>
      {onRemove && (
        <button type="button" className="doc-chip-remove" aria-label={`Remove ${doc.name}`} onClick={onRemove}>
          ×
        </button>
      )}
    </span>
  );
}

/** The composer's Attach button and the row of attached documents. */
export function Attachments() {
  const stores = useStores();
  const input = useRef<HTMLInputElement>(null);
  const attachments = useChat((s) => s.attachments);
  const attaching = useChat(useShallow((s) => s.attaching));
  const progress = useChat((s) => s.progress);
  const ocr = useChat((s) => s.ocr);
  return (
    <div className="attachments">
      <button type="button" className="btn btn-attach" onClick={() => input.current?.click()}>
        Attach
      </button>
      <input
        ref={input}
        type="file"
        multiple
        hidden
        aria-label="Attach files"
        onChange={(e) => {
          const files = [...(e.target.files ?? [])];
          e.target.value = '';
          void stores.chat.getState().attachFiles(files);
        }}
      />
      {attachments.map((d) => (
        <DocumentChip key={d.id} doc={d} onRemove={() => stores.chat.getState().removeAttachment(d.id)} />
      ))}
      {attaching.map((name, i) => (
        <span key={`${name}-${i}`} className="doc-chip doc-chip-busy" role="status">
          Reading {name}
          {ocr[name] ? ' by OCR' : ''}…{progress[name] !== undefined ? ` ${Math.round(progress[name] * 100)} %` : ''}
          <button type="button" className="doc-chip-remove" aria-label={`Stop reading ${name}`} onClick={() => stores.chat.getState().stopAttaching(name)}>
            ×
          </button>
        </span>
      ))}
    </div>
  );
}

/**
 * When the draft's documents do not fit: by how much, and what to do. Raising the max context is
 * offered only below the model's trained context and up to it (past it, the model has never seen
 * such positions): the CLI's rule, context-full.ts `raiseToFit`.
 */
export function NotFitOffer({ budget }: { budget: ContextBudget }) {
  const stores = useStores();
  const attachments = useChat((s) => s.attachments);
  const trained = useModel((s) => s.model?.info?.trainedContext ?? 0);
  if (attachments.length === 0 || budget.fits || budget.documents === 0) return null;
  const over = budget.total - budget.maxContext;
  // Before the model's info arrives (trained 0) nothing is offered: the bound is not known yet.
  const raiseTo = trained > 0 ? raiseToFit(budget.total, budget.maxContext, trained) : null;
  const allRelevant = attachments.every((a) => a.fit === 'relevant');
  return (
    <div className="not-fit" role="group" aria-label="The documents do not fit">
      <p>
        The documents do not fit: {formatTokens(budget.total)} tokens with the reply reserve, {formatTokens(over)} over the max context of{' '}
        {formatTokens(budget.maxContext)}.
      </p>
      <div className="not-fit-actions">
        {raiseTo !== null && (
          <button type="button" className="btn" onClick={() => void stores.settings.getState().update({ maxContext: raiseTo })}>
            Raise max context to {formatTokens(raiseTo)}
          </button>
        )}
        {!allRelevant && (
          <button type="button" className="btn btn-primary" onClick={() => stores.chat.getState().setFit('relevant')}>
            Use the relevant parts
          </button>
        )}
        <button type="button" className="btn" onClick={() => stores.chat.getState().clearAttachments()}>
          Cancel
        </button>
      </div>
      {raiseTo === null && trained > 0 && <p className="not-fit-note">The model was trained on {formatTokens(trained)} positions; a larger max context is not offered.</p>}
    </div>
  );
}

/** The budget the composer shows, when it is this conversation's. */
export function useOwnBudget(conversationId: string | null): ContextBudget | null {
  return useBudget((s) => (s.budget && s.budget.conversationId === conversationId ? s.budget : null));
}
