/**
 * One message. User messages: plain text (whitespace kept) with Copy and Edit (an inline editor,
 * MessageEdit.tsx, that resends with `editMessage`; what followed stays as a branch). Assistant
 * messages: Markdown, a live line while streaming (AnswerStats.tsx: "Reading prompt n/total",
 * tokens so far and tokens/s), a reasoning model's thinking in a collapsible block above the
 * answer (Thinking.tsx), then the answer's stats, its error if any, "not saved yet: disk full" while
 * the disk refuses its writes (kept in memory, retried), Copy (the answer alone),
 * Edit (its text, kept as a new version), and on the last answer Regenerate, and Continue when
 * it reached max new tokens. User messages show their documents as chips
 * and can be deleted with their answer; a message the context-full policy leaves out is marked
 * "not in context".
 */
import { Fragment, memo } from 'react';
import { useShallow } from 'zustand/react/shallow';
import type { Message } from '../../main/contract/types.ts';
import { findCitations } from '../lib/citations.ts';
import { useChat, useModel, useStores } from '../hooks.ts';
import type { LiveAnswer } from '../stores/chat.ts';
import { LiveLine, Stats } from './AnswerStats.tsx';
import { CopyButton } from './CopyButton.tsx';
import { Collapsible } from './Collapsible.tsx';
import { DocumentChip } from './Documents.tsx';
import { Markdown } from './Markdown.tsx';
import { MessageEdit } from './MessageEdit.tsx';
import { PencilIcon, RefreshIcon } from './icons.tsx';
import { ThinkingBlock } from './Thinking.tsx';

export interface MessageViewProps {
  message: Message;
  live: LiveAnswer | undefined;
  /** The conversation's last message is this answer (Regenerate goes here). */
  isLastAnswer: boolean;
  /** Something is generating: actions that start an answer are hidden. */
  generating: boolean;
  editing: boolean;
  /** The context-full policy leaves this message out of the prompt. */
  outOfContext?: boolean;
}

export const MessageView = memo(function MessageView({ message, live, isLastAnswer, generating, editing, outOfContext }: MessageViewProps) {
  const view =
    message.role === 'user' ? (
      <UserMessage message={message} generating={generating} editing={editing} />
    ) : (
      <AssistantMessage message={message} live={live} isLastAnswer={isLastAnswer} generating={generating} editing={editing} />
    );
  if (!outOfContext) return view;
  return (
    <div className="msg-out" title="Left out of the prompt by the context-full policy">
      <span className="msg-out-label">not in context</span>
      {view}
    </div>
  );
});

function UserMessage({ message, generating, editing }: { message: Message; generating: boolean; editing: boolean }) {
  const stores = useStores();
  if (editing) return <MessageEdit message={message} />;
  const local = message.id.startsWith('local-');
  return (
    <article className="msg msg-user" aria-label="Your message">
      {message.documents && message.documents.length > 0 && (
        <div className="msg-docs">
          {message.documents.map((d) => (
            <DocumentChip key={d.id} doc={d} />
          ))}
        </div>
      )}
      <Collapsible text={message.content} enabled>
        <div className="msg-bubble">{message.content}</div>
      </Collapsible>
      <div className="msg-actions">
        <BranchSwitch message={message} disabled={generating} />
        <CopyButton label="Copy" text={() => message.content} />
        {!generating && !local && (
          <button type="button" className="btn btn-ghost btn-xs" onClick={() => stores.chat.getState().startEdit(message.id)}>
            <PencilIcon size={14} />
            <span>Edit</span>
          </button>
        )}
        {!generating && !local && (
          <button type="button" className="btn btn-ghost btn-xs" title="Delete this message and its answer" onClick={() => void stores.chat.getState().deleteMessage(message.id)}>
            <span>Delete</span>
          </button>
        )}
      </div>
    </article>
  );
}

function AssistantMessage({ message, live, isLastAnswer, generating, editing }: MessageViewProps) {
  const stores = useStores();
  const streaming = message.status === 'streaming';
  // A remote engine's KV cache is the server's: Continue is a local model's (the services refuse it too).
  const local = useModel((s) => !s.model?.info?.remote);
  if (editing && !streaming) return <MessageEdit message={message} />;
  return (
    <article className={`msg msg-assistant${streaming ? ' streaming' : ''}`} aria-label="Answer" aria-busy={streaming}>
      {message.reasoning && <ThinkingBlock id={message.id} reasoning={message.reasoning} thinking={streaming && !message.content} stats={message.stats} />}
      {message.content ? (
        <Collapsible text={message.content} enabled={!streaming}>
          <Markdown text={message.content} />
        </Collapsible>
      ) : streaming ? null : (
        <p className="msg-empty">{message.reasoning ? '(no answer after the thinking)' : '(no text)'}</p>
      )}
      {streaming && <LiveLine live={live} hasText={message.content.length > 0 || Boolean(message.reasoning)} />}
      {message.status === 'error' && (
        <p className="msg-error" role="note">
          {message.error ?? 'The answer failed.'}
        </p>
      )}
      {message.notSaved && (
        <p className="msg-not-saved" role="status">
          not saved yet: {message.notSaved}
        </p>
      )}
      {!streaming && (
        <div className="msg-footer">
          {!streaming && message.content && <Citations text={message.content} />}
          {message.stats ? <Stats stats={message.stats} /> : message.status === 'cancelled' ? <span className="stats">{message.content ? 'Stopped' : 'Stopped before the first token'}</span> : null}
          <div className="msg-actions">
            <BranchSwitch message={message} disabled={generating} />
            <CopyButton label="Copy" text={() => message.content} />
            {!generating && (
              <button type="button" className="btn btn-ghost btn-xs" title="Edit this answer's text (kept as a new version)" onClick={() => stores.chat.getState().startEdit(message.id)}>
                <PencilIcon size={14} />
                <span>Edit</span>
              </button>
            )}
            {isLastAnswer && !generating && local && message.stats?.finishReason === 'length' && (
              <button type="button" className="btn btn-ghost btn-xs" title="Go on from where the answer stopped, in the same answer" onClick={() => void stores.chat.getState().continueAnswer()}>
                <span>Continue</span>
              </button>
            )}
            {isLastAnswer && !generating && (
              <button type="button" className="btn btn-ghost btn-xs" onClick={() => void stores.chat.getState().regenerate()}>
                <RefreshIcon size={14} />
                <span>Regenerate</span>
              </button>
            )}
          </div>
        </div>
      )}
    </article>
  );
}

/** ‹ i/n ›: the versions regenerate and edit left at this message's place. */
function BranchSwitch({ message, disabled }: { message: Message; disabled: boolean }) {
  const stores = useStores();
  const ids = message.branches;
  if (!ids || ids.length < 2) return null;
  const at = ids.indexOf(message.id);
  const go = (i: number) => void stores.chat.getState().selectBranch(ids[i]);
  return (
    <span className="branches" role="group" aria-label="Versions">
      <button type="button" className="icon-btn" aria-label="Previous version" disabled={disabled || at <= 0} onClick={() => go(at - 1)}>
        ‹
      </button>
      <span className="branch-pos" aria-live="polite">
        {at + 1}/{ids.length}
      </span>
      <button type="button" className="icon-btn" aria-label="Next version" disabled={disabled || at >= ids.length - 1} onClick={() => go(at + 1)}>
        ›
      </button>
    </span>
  );
}

/** The citations of the conversation's documents in an answer, each a link that opens the reader at its page or section. */
function Citations({ text }: { text: string }) {
  const stores = useStores();
  const documents = useChat(useShallow((s) => s.messages.flatMap((m) => m.documents ?? [])));
  const cites = findCitations(text, documents);
  if (cites.length === 0) return null;
  return (
    <div className="msg-cites">
      Cited:{' '}
      {cites.map((c, i) => (
        <Fragment key={c.label}>
          {i > 0 ? ' ' : ''}
          <button type="button" className="link-btn" title={`Open ${c.label} in the reader`} onClick={() => void stores.chat.getState().openDocument(c.documentId, { part: c.part })}>
            [{c.label}]
          </button>
        </Fragment>
      ))}
    </div>
  );
}

