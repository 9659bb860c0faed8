/**
 * Entry point of the window: picks the transport (Electron preload bridge or serve-mode
 * WebSocket), builds the stores with a requestAnimationFrame scheduler, renders the App, and
 * reloads everything when a dropped WebSocket reconnects.
 */
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { getApi, getConnection } from './api.ts';
import { App } from './App.tsx';
import { StoresContext } from './hooks.ts';
import { animationFrameScheduler } from './lib/stream-buffer.ts';
import { createStores } from './stores/index.ts';
import 'katex/dist/katex.min.css';
import './styles.css';
import './chat.css';
import './library.css';

const api = getApi();
const connection = getConnection();
const stores = createStores(api, { frames: animationFrameScheduler(window), width: window.innerWidth, storage: localStorageOrNone() });

/** localStorage, or none where the origin has none (reading it throws in opaque origins). */
function localStorageOrNone(): Storage | undefined {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
}

if (connection) {
  let dropped = false;
  connection.onStatus((status) => {
    if (status === 'reconnecting') dropped = true;
    if (status === 'open' && dropped) {
      dropped = false;
      void stores.resync();
    }
  });
}

/** The conversation named by the URL (`#id`), which reopens the chat that was open before a reload. */
function conversationInUrl(): string | null {
  try {
    return decodeURIComponent(window.location.hash.slice(1)) || null;
  } catch {
    return null;
  }
}

void stores.start(conversationInUrl());

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
createRoot(root).render(
  <StrictMode>
    <StoresContext value={stores}>
      <App connection={connection} />
    </StoresContext>
  </StrictMode>,
);
