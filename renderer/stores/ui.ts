/**
 * Window layout concern (renderer only, never sent to the services): whether the conversations
 * sidebar and the model + settings panel are shown, the colour theme, and focus requests (the
 * message box after Stop, the search field on Ctrl/Cmd+K).
 *
 * Layout follows the window's width. Each side has a wide and a narrow mode:
 *   sidebar: narrow below SIDEBAR_NARROW_BELOW px — it collapses by itself and opens over the chat;
 *   panel:   narrow below PANEL_NARROW_BELOW px — closed by default (it would cover the chat).
 * The user's choice is remembered per mode in `storage` (localStorage in the window), so
 * narrowing the window does not undo what they chose for a wide one, and a reload keeps it.
 * The narrow sidebar always starts closed (an overlay left open would hide the chat).
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import { readKey as read, writeKey as write, type KeyValueStorage } from '../lib/storage.ts';

export type { KeyValueStorage };

export type ThemeChoice = 'system' | 'light' | 'dark';
export const THEME_CHOICES: readonly ThemeChoice[] = ['system', 'light', 'dark'];

/** Below this width (CSS px) the sidebar collapses by itself; 720 leaves the chat ≥ 460 px beside a 260 px sidebar. */
export const SIDEBAR_NARROW_BELOW = 720;
/** Below this width the settings panel opens over the chat, so it starts closed. */
export const PANEL_NARROW_BELOW = 1100;


export interface UiState {
  /** Window width, CSS px. */
  width: number;
  sidebarOpen: boolean;
  panelOpen: boolean;
  theme: ThemeChoice;
  /** A field asked to take focus; the component that owns it focuses it and calls focusDone(). */
  focusRequest: FocusTarget | null;
  setWidth(px: number): void;
  toggleSidebar(): void;
  /** Closes the sidebar when it covers the chat (narrow), e.g. after a conversation is picked. */
  closeSidebarOverlay(): void;
  /**
   * Escape with no answer to stop: closes what covers the chat at this width — the narrow
   * sidebar, else the narrow settings panel. @returns whether it closed one.
   */
  closeOverlay(): boolean;
  togglePanel(): void;
  setTheme(theme: ThemeChoice): void;
  focusComposer(): void;
  /** Opens the sidebar if needed and focuses its search field. */
  focusSearch(): void;
  focusDone(): void;
}

export type FocusTarget = 'composer' | 'search';

export type UiStore = StoreApi<UiState>;

type Mode = 'wide' | 'narrow';
const sidebarMode = (width: number): Mode => (width < SIDEBAR_NARROW_BELOW ? 'narrow' : 'wide');
const panelMode = (width: number): Mode => (width < PANEL_NARROW_BELOW ? 'narrow' : 'wide');
const KEY = { sidebar: 'ropewalk.sidebar.wide', panel: (m: Mode) => `ropewalk.panel.${m}`, theme: 'ropewalk.theme' };

export function createUiStore(options: { width: number; storage?: KeyValueStorage }): UiStore {
  const { storage } = options;
  const sidebarFor = (width: number) => sidebarMode(width) === 'wide' && read(storage, KEY.sidebar) !== 'closed';
  const panelFor = (width: number) => {
    const saved = read(storage, KEY.panel(panelMode(width)));
    return saved === null ? panelMode(width) === 'wide' : saved === 'open';
  };
  const savedTheme = read(storage, KEY.theme);
  const theme: ThemeChoice = THEME_CHOICES.includes(savedTheme as ThemeChoice) ? (savedTheme as ThemeChoice) : 'system';

  return createStore<UiState>()((set, get) => ({
    width: options.width,
    sidebarOpen: sidebarFor(options.width),
    panelOpen: panelFor(options.width),
    theme,
    focusRequest: null,

    setWidth(px) {
      const { width } = get();
      if (px === width) return;
      const patch: Partial<UiState> = { width: px };
      if (sidebarMode(px) !== sidebarMode(width)) patch.sidebarOpen = sidebarFor(px);
      if (panelMode(px) !== panelMode(width)) patch.panelOpen = panelFor(px);
      set(patch);
    },
    toggleSidebar() {
      const { sidebarOpen, width } = get();
      if (sidebarMode(width) === 'wide') write(storage, KEY.sidebar, sidebarOpen ? 'closed' : 'open');
      set({ sidebarOpen: !sidebarOpen });
    },
    closeSidebarOverlay() {
      if (sidebarMode(get().width) === 'narrow' && get().sidebarOpen) set({ sidebarOpen: false });
    },
    closeOverlay() {
      const { sidebarOpen, panelOpen, width } = get();
      if (sidebarMode(width) === 'narrow' && sidebarOpen) {
        set({ sidebarOpen: false });
        return true;
      }
      if (panelMode(width) === 'narrow' && panelOpen) {
        get().togglePanel();
        return true;
      }
      return false;
    },
    togglePanel() {
      const { panelOpen, width } = get();
      write(storage, KEY.panel(panelMode(width)), panelOpen ? 'closed' : 'open');
      set({ panelOpen: !panelOpen });
    },
    setTheme(next) {
      write(storage, KEY.theme, next);
      set({ theme: next });
    },
    focusComposer() {
      set({ focusRequest: 'composer' });
    },
    focusSearch() {
      set({ sidebarOpen: true, focusRequest: 'search' });
    },
    focusDone() {
      set({ focusRequest: null });
    },
  }));
}

/** The theme to paint: the choice, or the system's when the choice is 'system'. */
export function resolveTheme(choice: ThemeChoice, systemPrefersDark: boolean): 'light' | 'dark' {
  return choice === 'system' ? (systemPrefersDark ? 'dark' : 'light') : choice;
}

/** Whether the sidebar covers the chat at this width (it then closes after a pick). */
export const sidebarIsOverlay = (width: number): boolean => sidebarMode(width) === 'narrow';
