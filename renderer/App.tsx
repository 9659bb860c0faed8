/**
 * The window's layout: conversations sidebar | chat (header, banner, messages, composer with the
 * context meter; files dropped on it are attached; the document reader) | collapsible model +
 * settings panel.
 */
import { useState } from 'react';
import { useChat, useConversations, useModel, useStores } from './hooks.ts';
import { DocumentReader } from './components/Documents.tsx';
import type { WsApi } from './lib/ws-client.ts';
import { ChatView } from './components/ChatView.tsx';
import { Composer } from './components/Composer.tsx';
import { ModelPanel } from './components/ModelPanel.tsx';
import { ConnectionBar, Notices } from './components/Notices.tsx';
import { SettingsPanel } from './components/SettingsPanel.tsx';
import { Sidebar } from './components/Sidebar.tsx';
import { ChipIcon, PanelIcon } from './components/icons.tsx';

export function App({ connection }: { connection: WsApi | null }) {
  const [panelOpen, setPanelOpen] = useState(true);
  const stores = useStores();
  return (
    <div className={`app${panelOpen ? ' with-panel' : ''}`}>
      <Sidebar />
      <main
        className="chat"
        onDragOver={(e) => {
          if (e.dataTransfer.types.includes('Files')) e.preventDefault();
        }}
        onDrop={(e) => {
          if (e.dataTransfer.files.length === 0) return;
          e.preventDefault();
          void stores.chat.getState().attachFiles([...e.dataTransfer.files]);
        }}
      >
        <ChatHeader panelOpen={panelOpen} togglePanel={() => setPanelOpen((o) => !o)} />
        <ConnectionBar connection={connection} />
        <Notices />
        <ChatView />
        <Composer />
        <DocumentReader />
      </main>
      {panelOpen && (
        <aside className="panel" id="side-panel" aria-label="Model and settings">
          <ModelPanel />
          <SettingsPanel />
        </aside>
      )}
    </div>
  );
}

function ChatHeader({ panelOpen, togglePanel }: { panelOpen: boolean; togglePanel: () => void }) {
  const conversationId = useChat((s) => s.conversationId);
  const title = useConversations((s) => s.items.find((c) => c.id === conversationId)?.title ?? null);
  const modelName = useModel((s) => s.model?.info?.name ?? null);
  const ep = useModel((s) => s.model?.info?.executionProvider ?? null);
  return (
    <header className="chat-header">
      <h1 className="chat-title">{conversationId ? title || 'New chat' : 'Ropewalk'}</h1>
      <div className="chat-header-right">
        {modelName && (
          <span className="model-pill" title="Model in use">
            <ChipIcon size={14} />
            <span>{modelName}</span>
            {ep && <span className="model-pill-ep">{ep.toUpperCase()}</span>}
          </span>
        )}
        <button
          type="button"
          className={`icon-btn${panelOpen ? ' pressed' : ''}`}
          aria-label="Model and settings"
          aria-expanded={panelOpen}
          aria-controls="side-panel"
          title={panelOpen ? 'Hide model and settings' : 'Show model and settings'}
          onClick={togglePanel}
        >
          <PanelIcon size={18} />
        </button>
      </div>
    </header>
  );
}
