/**
 * One message. User messages: plain text (whitespace kept) with Copy and Edit (an inline editor
 * that resends with `editMessage`, dropping what followed). Assistant messages: Markdown, a live
 * line while streaming ("Reading prompt n/total", tokens so far), a reasoning model's thinking in
 * a collapsible block above the answer (Thinking.tsx), then the answer's stats (TTFT,
 * tokens/s, tokens reused from the KV cache, finish reason, the document parts used), its error
 * if any, "not saved yet: disk full" while the disk refuses its writes (kept in memory, retried), Copy (the answer alone), and Regenerate on the last answer. User messages show their documents as chips
 * and can be deleted with their answer; a message the context-full policy leaves out is marked
 * "not in context".
 */
import { Fragment, memo, useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { contextShiftNote } from '../../main/contract/context-full.ts';
import type { AnswerStats, Message } from '../../main/contract/types.ts';
import { formatTokens } from '../lib/meter.ts';
import { findCitations } from '../lib/citations.ts';
import { useChat, useStores } from '../hooks.ts';
import type { LiveAnswer } from '../stores/chat.ts';
import { CopyButton } from './CopyButton.tsx';
import { Collapsible } from './Collapsible.tsx';
import { DocumentChip } from './Documents.tsx';
import { Markdown } from './Markdown.tsx';
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
      <AssistantMessage message={message} live={live} isLastAnswer={isLastAnswer} generating={generating} />
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
  if (editing) return <EditMessage message={message} />;
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

function EditMessage({ message }: { message: Message }) {
  const stores = useStores();
  const [value, setValue] = useState(message.content);
  const area = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    const el = area.current;
    if (!el) return;
    el.focus();
    el.setSelectionRange(el.value.length, el.value.length);
  }, []);
  const submit = () => {
    if (value.trim()) void stores.chat.getState().submitEdit(message.id, value);
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Escape') {
      e.preventDefault(); // this editor's Escape, not the window's
      stores.chat.getState().cancelEdit();
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      submit();
    }
  };
  return (
    <article className="msg msg-user msg-editing" aria-label="Edit your message">
      <textarea ref={area} aria-label="Edit message" value={value} onChange={(e) => setValue(e.target.value)} onKeyDown={onKey} />
      <div className="msg-edit-actions">
        <span className="hint">Sends the edited message; the answers after it stay as the earlier branch (‹ › on the message).</span>
        <button type="button" className="btn btn-ghost btn-sm" onClick={() => stores.chat.getState().cancelEdit()}>
          Cancel
        </button>
        <button type="button" className="btn btn-primary btn-sm" disabled={!value.trim()} onClick={submit}>
          Save &amp; submit
        </button>
      </div>
    </article>
  );
}

function AssistantMessage({ message, live, isLastAnswer, generating }: Omit<MessageViewProps, 'editing'>) {
  const stores = useStores();
  const streaming = message.status === 'streaming';
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

function LiveLine({ live, hasText }: { live: LiveAnswer | undefined; hasText: boolean }) {
  const prefill = live?.prefill;
  if (live?.waiting && !prefill && !hasText) {
    return (
      <div className="live-line" role="status">
        <span>Waiting for {live.waiting === 1 ? 'another request' : `${live.waiting} other requests`} to finish (Stop cancels)</span>
      </div>
    );
  }
  if (prefill && !hasText) {
    const pct = prefill.total > 0 ? Math.round((prefill.processed / prefill.total) * 100) : 0;
    return (
      <div className="live-line" role="status">
        <span>
          Reading prompt {formatTokens(prefill.processed)}/{formatTokens(prefill.total)}
        </span>
        <span className="live-bar" aria-hidden="true">
          <span style={{ width: `${pct}%` }} />
        </span>
      </div>
    );
  }
  return (
    <div className="live-line" role="status">
      <span className="typing" aria-hidden="true">
        <i />
        <i />
        <i />
      </span>
      <span>{live && live.generatedTokens > 0 ? `${formatTokens(live.generatedTokens)} tokens` : 'Thinking…'}</span>
    </div>
  );
}

const FINISH_LABELS: Record<AnswerStats['finishReason'], string> = {
  stop: 'the model ended its answer',
  length: 'the answer reached max new tokens',
  'context-full': 'the conversation reached the max context',
  cancelled: 'stopped by you',
  error: 'the answer failed',
};

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

/** "Used: …": the parts of documents the prompt held, each a link to its passage in the reader when its range is known. */
function UsedParts({ stats }: { stats: AnswerStats }) {
  const stores = useStores();
  const parts = stats.documentParts ?? [];
  return (
    <span className="stats-parts">
      Used:{' '}
      {parts.map((p, i) => {
        const r = stats.documentRanges?.[i];
        return (
          <Fragment key={i}>
            {i > 0 ? '; ' : ''}
            {r ? (
              <button type="button" className="link-btn" title="Open this part in the reader" onClick={() => void stores.chat.getState().openDocument(r.documentId, { start: r.start, end: r.end })}>
                {p}
              </button>
            ) : (
              p
            )}
          </Fragment>
        );
      })}
    </span>
  );
}

function Stats({ stats }: { stats: AnswerStats }) {
  if (stats.generatedTokens === 0) {
    // No token: TTFT and tokens/s have nothing to measure ("TTFT 0 ms · 0.0 tok/s" would lie).
    const what = stats.finishReason === 'cancelled' ? 'stopped before the first token' : `${FINISH_LABELS[stats.finishReason]} before the first token`;
    return (
      <span className="stats" title={statsTitle(stats)}>
        <span className={`finish finish-${stats.finishReason}`}>{what}</span>
      </span>
    );
  }
  const tokPerSec = stats.decodeTokensPerSec.toFixed(stats.decodeTokensPerSec >= 100 ? 0 : 1);
  // The chip is a short label; the sentence (the CLI's words too) is its tooltip and the stats' last line.
  const shiftNote = contextShiftNote(stats.contextShift);
  return (
    <span className="stats" title={statsTitle(stats)}>
      <span>TTFT {formatTokens(stats.ttftMs)} ms</span>
      <span>{tokPerSec} tok/s</span>
      <span>{formatTokens(stats.generatedTokens)} tokens</span>
      {stats.reusedTokens > 0 && <span className="stats-reused">{formatTokens(stats.reusedTokens)} reused</span>}
      {shiftNote && (
        <span className="stats-shifted" title={shiftNote}>
          context shifted
        </span>
      )}
      <span className={`finish finish-${stats.finishReason}`}>{stats.finishReason}</span>
      {stats.documentParts && stats.documentParts.length > 0 && <UsedParts stats={stats} />}
    </span>
  );
}

function statsTitle(s: AnswerStats): string {
  if (s.generatedTokens === 0) {
    return [`Finish reason: ${s.finishReason} (${FINISH_LABELS[s.finishReason]})`, `Prompt tokens: ${formatTokens(s.promptTokens)} (${formatTokens(s.reusedTokens)} reused from the cache)`].join('\n');
  }
  return [
    `Finish reason: ${s.finishReason} (${FINISH_LABELS[s.finishReason]})`,
    `Time to first token: ${s.ttftMs.toFixed(0)} ms`,
    `Decode: ${s.decodeTokensPerSec.toFixed(1)} tokens/s`,
    `Prefill: ${s.prefillTokensPerSec.toFixed(1)} tokens/s`,
    `Prompt tokens: ${formatTokens(s.promptTokens)} (${formatTokens(s.reusedTokens)} reused from the cache)`,
    `Generated tokens: ${formatTokens(s.generatedTokens)}`,
  ]
    .concat(s.executionProvider ? [`Execution provider: ${s.executionProvider}${s.nodesOnCpu != null && s.executionProvider !== 'cpu' ? ` (${formatTokens(s.nodesOnCpu)} nodes on the CPU)` : ''}`] : [])
    .concat(contextShiftNote(s.contextShift) ?? [])
    .join('\n');
}
