/**
 * The message column of the open conversation. Keeps the view pinned to the bottom while an
 * answer streams, unless the user scrolled up to read. Empty states: no conversation, or a new one.
 */
import { useLayoutEffect, useRef } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useBudget, useChat, useModel } from '../hooks.ts';
import { isGenerating } from '../stores/chat.ts';
import { MessageView } from './MessageView.tsx';

const NONE: string[] = [];

export function ChatView() {
  const { conversationId, messages, live, loading, editingId } = useChat(
    useShallow((s) => ({ conversationId: s.conversationId, messages: s.messages, live: s.live, loading: s.loading, editingId: s.editingId })),
  );
  const outOfContext = useBudget(useShallow((s) => (s.budget && s.budget.conversationId === conversationId ? s.budget.outOfContext : NONE)));
  const generating = useChat(isGenerating);
  const modelName = useModel((s) => s.model?.info?.name ?? null);
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);

  useLayoutEffect(() => {
    pinned.current = true;
  }, [conversationId]);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [messages, live, conversationId]);

  const onScroll = () => {
    const el = scroller.current;
    if (el) pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };

  const last = messages.at(-1);
  return (
    <div className="chat-scroll" ref={scroller} onScroll={onScroll}>
      <div className="chat-column">
        {loading ? (
          <p className="chat-loading">Loading…</p>
        ) : messages.length === 0 ? (
          <div className="chat-empty">
            <div className="chat-empty-mark" aria-hidden="true" />
            <h2>{conversationId ? 'New conversation' : 'Chat with a model on your machine'}</h2>
            <p>
              {modelName ? (
                <>
                  <strong>{modelName}</strong> runs locally and offline.{' '}
                </>
              ) : null}
              Type a message below: <kbd>Enter</kbd> sends, <kbd>Shift</kbd>+<kbd>Enter</kbd> adds a line.
            </p>
          </div>
        ) : (
          messages.map((m) => (
            <MessageView
              key={m.id}
              message={m}
              live={live[m.id]}
              isLastAnswer={m === last && m.role === 'assistant'}
              generating={generating}
              editing={m.id === editingId}
              outOfContext={outOfContext.includes(m.id)}
            />
          ))
        )}
      </div>
    </div>
  );
}
