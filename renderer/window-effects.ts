/**
 * The window-wide effects App installs once: the layout follows the window's width, the theme
 * follows the choice (or the system's `prefers-color-scheme`) as `data-theme` on <html>, and the
 * keyboard shortcuts of lib/shortcuts.ts run their actions, and the URL's `#id` names the open
 * conversation (so a reload reopens it; a changed hash opens that one).
 */
import { useEffect } from 'react';
import { useUi, type useStores } from './hooks.ts';
import { shortcutOf, type ShortcutId } from './lib/shortcuts.ts';
import { isGenerating } from './stores/chat.ts';
import { resolveTheme } from './stores/ui.ts';

type Stores = ReturnType<typeof useStores>;

/** macOS (Cmd is the shortcut modifier there). */
export const IS_MAC = typeof navigator !== 'undefined' && /Mac|iPhone|iPad/.test(navigator.userAgent);

export function useWindowWidth(stores: Stores): void {
  useEffect(() => {
    const onResize = () => stores.ui.getState().setWidth(window.innerWidth);
    onResize();
    window.addEventListener('resize', onResize);
    return () => window.removeEventListener('resize', onResize);
  }, [stores]);
}

export function useUrlHash(stores: Stores): void {
  useEffect(() => {
    const show = (id: string | null) => {
      const want = id ? `#${encodeURIComponent(id)}` : '';
      if (window.location.hash !== want) window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}${want}`);
    };
    show(stores.chat.getState().conversationId);
    const unsubscribe = stores.chat.subscribe((s, prev) => {
      if (s.conversationId !== prev.conversationId) show(s.conversationId);
    });
    const onHash = () => {
      let id: string;
      try {
        id = decodeURIComponent(window.location.hash.slice(1));
      } catch {
        return;
      }
      if (id && id !== stores.chat.getState().conversationId) void stores.conversations.getState().select(id);
    };
    window.addEventListener('hashchange', onHash);
    return () => {
      unsubscribe();
      window.removeEventListener('hashchange', onHash);
    };
  }, [stores]);
}

export function useTheme(): void {
  const choice = useUi((s) => s.theme);
  useEffect(() => {
    const query = window.matchMedia('(prefers-color-scheme: dark)');
    const apply = () => {
      const theme = resolveTheme(choice, query.matches);
      document.documentElement.dataset.theme = theme;
      document.documentElement.style.colorScheme = theme;
    };
    apply();
    query.addEventListener('change', apply);
    return () => query.removeEventListener('change', apply);
  }, [choice]);
}

/** Runs a shortcut's action; false when it does nothing now (the key then keeps its default). */
function run(stores: Stores, id: ShortcutId): boolean {
  const ui = stores.ui.getState();
  switch (id) {
    case 'newChat':
      void stores.conversations.getState().create();
      ui.focusComposer();
      return true;
    case 'search':
      ui.focusSearch();
      return true;
    case 'toggleSidebar':
      ui.toggleSidebar();
      return true;
    case 'toggleSettings':
      ui.togglePanel();
      return true;
    case 'stop':
      // The document reader's own Escape closes it (DocumentReader.tsx), and nothing else.
      if (stores.chat.getState().reading) return false;
      if (!isGenerating(stores.chat.getState())) return ui.closeOverlay();
      void stores.chat.getState().stop();
      ui.focusComposer();
      return true;
  }
}

export function useShortcuts(stores: Stores): void {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.isComposing) return;
      const id = shortcutOf(e, IS_MAC);
      if (!id) return;
      // Escape in a one-line field (search, rename, a setting) does not stop an answer (it may
      // still close the overlay the field is in).
      const inField = e.target instanceof HTMLElement && (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT');
      if (id === 'stop' && inField && isGenerating(stores.chat.getState())) return;
      if (run(stores, id)) e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [stores]);
}
