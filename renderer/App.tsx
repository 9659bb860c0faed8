/**
 * The window's layout: conversations sidebar | chat (header, banner, messages, composer with the
 * context meter; files dropped on it are attached, a dropped `.gguf` opens as the model; the
 * document reader) | model, my models + settings panel.
 * Both sides collapse (buttons in the header, keyboard shortcuts); below a width they open over
 * the chat instead (stores/ui.ts says when).
 */
import { useChat, useConversations, useModel, useStores, useUi } from './hooks.ts';
import { DocumentReader } from './components/DocumentReader.tsx';
import type { WsApi } from './lib/ws-client.ts';
import { ariaKeysOf, withKeys } from './lib/shortcuts.ts';
import { ChatView } from './components/ChatView.tsx';
import { Composer } from './components/Composer.tsx';
import { ExportMenu } from './components/ExportMenu.tsx';
import { ChatSettingsMenu } from './components/ChatSettings.tsx';
import { ModelLibrary } from './components/ModelLibrary.tsx';
import { ModelPanel } from './components/ModelPanel.tsx';
import { isModelFile, openDroppedModel } from './lib/dropped-model.ts';
import { engineChip } from './lib/engine-chip.ts';
import { useShallow } from 'zustand/react/shallow';
import { ConnectionBar, Notices } from './components/Notices.tsx';
import { SettingsPanel } from './components/SettingsPanel.tsx';
import { Sidebar } from './components/Sidebar.tsx';
import { WindowSettings } from './components/WindowSettings.tsx';
import { ChipIcon, PanelIcon, SidebarIcon } from './components/icons.tsx';
import { sidebarIsOverlay, PANEL_NARROW_BELOW } from './stores/ui.ts';
import { summaryById } from './stores/conversations.ts';
import { IS_MAC, useShortcuts, useTheme, useUrlHash, useWindowWidth } from './window-effects.ts';

export function App({ connection }: { connection: WsApi | null }) {
  const stores = useStores();
  useWindowWidth(stores);
  useTheme();
  useShortcuts(stores);
  useUrlHash(stores);
  const sidebarOpen = useUi((s) => s.sidebarOpen);
  const panelOpen = useUi((s) => s.panelOpen);
  const overlay = useUi((s) => sidebarIsOverlay(s.width));
  const panelOver = useUi((s) => s.width < PANEL_NARROW_BELOW);
  const classes = ['app', sidebarOpen ? 'with-sidebar' : 'no-sidebar', panelOpen ? 'with-panel' : '', overlay ? 'sidebar-overlay' : '', panelOver ? 'panel-overlay' : ''];
  return (
    <div className={classes.filter(Boolean).join(' ')}>
      {sidebarOpen && <Sidebar />}
      {sidebarOpen && overlay && <div className="scrim" aria-hidden="true" onClick={() => stores.ui.getState().toggleSidebar()} />}
      <main
        className="chat"
        onDragOver={(e) => {
          if (e.dataTransfer.types.includes('Files')) e.preventDefault();
        }}
        onDrop={(e) => {
          if (e.dataTransfer.files.length === 0) return;
          e.preventDefault();
          const files = [...e.dataTransfer.files];
          const models = files.filter((f) => isModelFile(f.name));
          const documents = files.filter((f) => !isModelFile(f.name));
          if (models.length > 0) void openDroppedModel(stores, models[0]);
          if (documents.length > 0) void stores.chat.getState().attachFiles(documents);
        }}
      >
        <ChatHeader />
        <ConnectionBar connection={connection} />
        <Notices />
        <ChatView />
        <Composer />
        <DocumentReader />
      </main>
      {panelOpen && (
        <aside className="panel" id="side-panel" aria-label="Model and settings">
          <ModelPanel />
          <ModelLibrary />
          <SettingsPanel />
          <WindowSettings />
        </aside>
      )}
    </div>
  );
}

function ChatHeader() {
  const stores = useStores();
  const sidebarOpen = useUi((s) => s.sidebarOpen);
  const panelOpen = useUi((s) => s.panelOpen);
  const conversationId = useChat((s) => s.conversationId);
  // Known whatever the search shows (a search that hides the open chat keeps its title).
  const title = useConversations((s) => summaryById(s, conversationId)?.title ?? null);
  const modelName = useModel((s) => s.model?.info?.name ?? null);
  const chip = useModel(useShallow((s) => engineChip(s.model?.info ?? null)));
  return (
    <header className="chat-header">
      <div className="chat-header-left">
        <button
          type="button"
          className={`icon-btn${sidebarOpen ? ' pressed' : ''}`}
          aria-label="Sidebar"
          aria-expanded={sidebarOpen}
          aria-controls="sidebar"
          aria-keyshortcuts={ariaKeysOf('toggleSidebar', IS_MAC)}
          title={withKeys(sidebarOpen ? 'Hide conversations' : 'Show conversations', 'toggleSidebar', IS_MAC)}
          onClick={() => stores.ui.getState().toggleSidebar()}
        >
          <SidebarIcon size={18} />
        </button>
        <h1 className="chat-title">{conversationId ? title || 'New chat' : 'Ropewalk'}</h1>
      </div>
      <div className="chat-header-right">
        <ChatSettingsMenu />
        <ExportMenu />
        {modelName && (
          <span className="model-pill" title="Model in use">
            <ChipIcon size={14} />
            <span className="model-pill-name">{modelName}</span>
            {chip && (
              <span className="model-pill-ep" title={chip.title}>
                {chip.label}
              </span>
            )}
          </span>
        )}
        <button
          type="button"
          className={`icon-btn${panelOpen ? ' pressed' : ''}`}
          aria-label="Model and settings"
          aria-expanded={panelOpen}
          aria-controls="side-panel"
          aria-keyshortcuts={ariaKeysOf('toggleSettings', IS_MAC)}
          title={withKeys(panelOpen ? 'Hide model and settings' : 'Show model and settings', 'toggleSettings', IS_MAC)}
          onClick={() => stores.ui.getState().togglePanel()}
        >
          <PanelIcon size={18} />
        </button>
      </div>
    </header>
  );
}
