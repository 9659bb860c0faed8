/**
 * The left sidebar: app name, "New chat", the title search, and the conversation list (a
 * `navigation` named "Conversations"). Each entry is a link that opens the conversation, with
 * Rename (inline field: Enter saves, Escape cancels) and Delete (an inline "Delete?" confirm
 * button; never window.confirm).
 */
import { memo, useEffect, useRef, useState, type FormEvent, type KeyboardEvent, type MouseEvent } from 'react';
import type { ConversationSummary } from '../../main/contract/types.ts';
import { useChat, useConversations, useStores, useUi } from '../hooks.ts';
import { ariaKeysOf, withKeys } from '../lib/shortcuts.ts';
import { splitMatches } from '../lib/text-match.ts';
import { IS_MAC } from '../window-effects.ts';
import { ImportButton } from './ExportMenu.tsx';
import { ChatIcon, PencilIcon, PlusIcon, SearchIcon, TrashIcon } from './icons.tsx';

export function Sidebar() {
  const stores = useStores();
  const items = useConversations((s) => s.items);
  const loaded = useConversations((s) => s.loaded);
  const search = useConversations((s) => s.search);
  const activeId = useChat((s) => s.conversationId);
  const focusSearch = useUi((s) => s.focusRequest === 'search');
  const searchField = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (!focusSearch) return;
    searchField.current?.focus();
    searchField.current?.select();
    stores.ui.getState().focusDone();
  }, [focusSearch, stores]);

  return (
    <aside className="sidebar" id="sidebar" aria-label="Conversations sidebar">
      <div className="sidebar-head">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true" />
          <span className="brand-name">Ropewalk</span>
        </div>
        <button
          type="button"
          className="btn btn-primary btn-block"
          title={withKeys('New chat', 'newChat', IS_MAC)}
          aria-keyshortcuts={ariaKeysOf('newChat', IS_MAC)}
          onClick={() => {
            void stores.conversations.getState().create();
            stores.ui.getState().closeSidebarOverlay();
            stores.ui.getState().focusComposer();
          }}
        >
          <PlusIcon />
          <span>New chat</span>
        </button>
        <div className="search">
          <SearchIcon size={14} />
          <input
            ref={searchField}
            type="search"
            aria-label="Search conversations"
            title={withKeys('Search conversations', 'search', IS_MAC)}
            aria-keyshortcuts={ariaKeysOf('search', IS_MAC)}
            placeholder="Search conversations"
            value={search}
            onChange={(e) => stores.conversations.getState().setSearch(e.target.value)}
          />
        </div>
      </div>
      <div className="sidebar-import">
        <ImportButton />
      </div>
      <nav className="conversations" aria-label="Conversations">
        {items.length === 0 && loaded ? (
          <p className="conversations-empty">{search.trim() ? 'No conversation matches.' : 'No conversations yet.'}</p>
        ) : (
          <ul>
            {items.map((c) => (
              <ConversationItem key={c.id} conversation={c} active={c.id === activeId} query={search.trim()} />
            ))}
          </ul>
        )}
      </nav>
    </aside>
  );
}

const ConversationItem = memo(function ConversationItem({ conversation, active, query }: { conversation: ConversationSummary; active: boolean; query: string }) {
  const stores = useStores();
  const [mode, setMode] = useState<'view' | 'rename' | 'confirm-delete'>('view');
  const title = conversation.title || 'Untitled';

  const open = (e: MouseEvent) => {
    e.preventDefault();
    void stores.conversations.getState().select(conversation.id);
    stores.ui.getState().closeSidebarOverlay();
  };

  if (mode === 'rename') {
    return (
      <li className="conv-item renaming">
        <RenameField
          initial={title}
          onDone={async (next) => {
            if (next !== null && next.trim() && next.trim() !== title) await stores.conversations.getState().rename(conversation.id, next);
            setMode('view');
          }}
        />
      </li>
    );
  }

  return (
    <li className={`conv-item${active ? ' active' : ''}${mode === 'confirm-delete' ? ' confirming' : ''}`}>
      <a href={`#${encodeURIComponent(conversation.id)}`} className="conv-link" aria-current={active ? 'page' : undefined} onClick={open} title={title}>
        <ChatIcon size={14} />
        <span className="conv-text">
          <span className="conv-title">
            <Highlighted text={title} query={query} />
          </span>
          {conversation.match && (
            <span className="conv-match">
              <Highlighted text={conversation.match} query={query} />
            </span>
          )}
        </span>
        <span className="conv-time">{relativeTime(conversation.updatedAt)}</span>
      </a>
      {mode === 'confirm-delete' ? (
        <div className="conv-confirm" key="confirm">
          <button
            type="button"
            className="btn btn-danger btn-xs"
            autoFocus
            onClick={async () => {
              if (!(await stores.conversations.getState().remove(conversation.id))) setMode('view');
            }}
          >
            Delete?
          </button>
          <button type="button" className="btn btn-ghost btn-xs" onClick={() => setMode('view')}>
            Cancel
          </button>
        </div>
      ) : (
        <div className="conv-actions" key="actions">
          <button type="button" className="icon-btn" aria-label="Rename" title="Rename" onClick={() => setMode('rename')}>
            <PencilIcon size={14} />
          </button>
          <button type="button" className="icon-btn" aria-label="Delete" title="Delete" onClick={() => setMode('confirm-delete')}>
            <TrashIcon size={14} />
          </button>
        </div>
      )}
    </li>
  );
});

/** Inline title field; onDone(null) when cancelled. */
function RenameField({ initial, onDone }: { initial: string; onDone: (title: string | null) => void }) {
  const [value, setValue] = useState(initial);
  const input = useRef<HTMLInputElement>(null);
  const finished = useRef(false);
  useEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, []);
  const finish = (title: string | null) => {
    if (finished.current) return;
    finished.current = true;
    onDone(title);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    finish(value);
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Escape') {
      e.preventDefault(); // this field's Escape, not the window's (which stops an answer)
      finish(null);
    }
  };
  return (
    <form className="rename-form" onSubmit={submit}>
      <input
        ref={input}
        aria-label="Conversation title"
        value={value}
        maxLength={200}
        onChange={(e) => setValue(e.target.value)}
        onKeyDown={onKey}
        onBlur={() => finish(value)}
      />
    </form>
  );
}

/** `text` with each case-insensitive occurrence of `query` in a <mark> (plain text: React escapes it). */
function Highlighted({ text, query }: { text: string; query: string }) {
  const parts = splitMatches(text, query);
  return <>{parts.map((p, i) => (p.hit ? <mark key={i}>{p.text}</mark> : p.text))}</>;
}

/** "now", "5m", "3h", "2d", or a date. */
function relativeTime(ms: number): string {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return 'now';
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  if (s < 7 * 86_400) return `${Math.floor(s / 86_400)}d`;
  return new Date(ms).toLocaleDateString('en-US', { month: 'short', day: 'numeric' });
}
