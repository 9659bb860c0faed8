/**
 * The message column of the open conversation. Keeps the view pinned to the bottom while an
 * answer streams, unless the user scrolled up to read. Empty states: no conversation, or a new
 * one; with the built-in model loaded they say what it is and how to open your own.
 */
import { useLayoutEffect, useRef } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useBudget, useChat, useLibrary, useModel } from '../hooks.ts';
import { builtinNameOf } from '../stores/library.ts';
import { BUILTIN_NOTE } from './ModelLibrary.tsx';
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
  const builtinName = useLibrary(builtinNameOf);
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
            {modelName !== null && modelName === builtinName && (
              <p className="first-start">
                <strong>{modelName}</strong> is the built-in model. {BUILTIN_NOTE} To chat with your own, open one under <em>My models</em> in the
                side panel, or drop a <code>.gguf</code> file on this window.
              </p>
            )}
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
