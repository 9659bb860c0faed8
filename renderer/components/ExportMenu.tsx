/**
 * Export the open conversation (Markdown to read, JSON to keep and import back), with the
 * settings it runs under, each answer's stats and the documents (JSON: with their text); and Import…, which reads a JSON export and
 * opens it as a new conversation. Files are made in the window (lib/conversation-file.ts) and
 * saved as a download; nothing leaves the machine.
 */
import { useRef } from 'react';
import { useChat, useConversations, useStores } from '../hooks.ts';
import { effectiveSettings } from '../../main/contract/chat-settings.ts';
import { summaryById } from '../stores/conversations.ts';
import { conversationToJson, conversationToMarkdown, exportFileName } from '../lib/conversation-file.ts';
import { DownloadIcon, UploadIcon } from './icons.tsx';

function download(name: string, type: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function ExportMenu() {
  const stores = useStores();
  const conversationId = useChat((s) => s.conversationId);
  const hasMessages = useChat((s) => s.messages.length > 0);
  const summary = useConversations((s) => summaryById(s, conversationId));
  const menu = useRef<HTMLDetailsElement>(null);
  if (!conversationId || !hasMessages) return null;

  const save = async (kind: 'md' | 'json') => {
    const { messages } = stores.chat.getState();
    const conversation = { id: conversationId, title: summary?.title ?? 'Conversation', createdAt: summary?.createdAt ?? Date.now(), updatedAt: summary?.updatedAt ?? Date.now(), messages };
    // The settings this chat runs under: its own system prompt and sampler over the settings.
    const settings = stores.settings.getState().settings;
    const documentTexts = kind === 'json' ? await stores.chat.getState().documentTexts() : undefined;
    const ctx = { settings: settings && effectiveSettings(settings, summary?.chatSettings), model: stores.model.getState().model?.info?.name ?? null, now: Date.now(), documentTexts };
    if (kind === 'md') download(exportFileName(conversation.title, 'md'), 'text/markdown;charset=utf-8', conversationToMarkdown(conversation, ctx));
    else download(exportFileName(conversation.title, 'json'), 'application/json', conversationToJson(conversation, ctx));
    menu.current?.removeAttribute('open');
  };

  return (
    <details className="menu" ref={menu}>
      <summary className="icon-btn" aria-label="Export" title="Export this conversation">
        <DownloadIcon size={18} />
      </summary>
      <div className="menu-list" role="group" aria-label="Export as">
        <button type="button" className="btn btn-ghost btn-sm" onClick={() => void save('md')}>
          Markdown (.md)
        </button>
        <button type="button" className="btn btn-ghost btn-sm" onClick={() => void save('json')}>
          JSON (.json, imports back)
        </button>
      </div>
    </details>
  );
}

export function ImportButton() {
  const stores = useStores();
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <button type="button" className="btn btn-ghost btn-sm btn-block" onClick={() => input.current?.click()}>
        <UploadIcon size={14} />
        <span>Import…</span>
      </button>
      <input
        ref={input}
        type="file"
        accept=".json,application/json"
        aria-label="Import a conversation"
        className="offscreen"
        tabIndex={-1}
        onChange={async (e) => {
          const file = e.target.files?.[0];
          e.target.value = '';
          if (!file) return;
          if (await stores.conversations.getState().importFile(await file.text())) stores.ui.getState().closeSidebarOverlay();
        }}
      />
    </>
  );
}
