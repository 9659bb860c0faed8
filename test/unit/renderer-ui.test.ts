/**
 * renderer/stores/ui.ts and renderer/lib/shortcuts.ts: the sidebar collapses by itself below its
 * width and comes back above it; the settings panel starts closed in a narrow window and the
 * user's choice is remembered per width mode across a reload (a new store over the same
 * storage); the theme choice is remembered and resolved against the system's; shortcuts match
 * Ctrl on Linux/Windows and Cmd on macOS, never with Shift or Alt.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keysOf, shortcutOf, withKeys } from '../../renderer/lib/shortcuts.ts';
import { createUiStore, PANEL_NARROW_BELOW, resolveTheme, SIDEBAR_NARROW_BELOW, type KeyValueStorage } from '../../renderer/stores/ui.ts';

class MemoryStorage implements KeyValueStorage {
  readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
}

describe('window layout store', () => {
  it('the sidebar collapses by itself below its width and returns above it', () => {
    const ui = createUiStore({ width: 1280 });
    assert.equal(ui.getState().sidebarOpen, true);
    ui.getState().setWidth(420);
    assert.equal(ui.getState().sidebarOpen, false, 'collapsed at 420 px');
    ui.getState().toggleSidebar();
    assert.equal(ui.getState().sidebarOpen, true, 'opened over the chat');
    ui.getState().closeSidebarOverlay();
    assert.equal(ui.getState().sidebarOpen, false, 'closes after a pick');
    ui.getState().setWidth(SIDEBAR_NARROW_BELOW);
    assert.equal(ui.getState().sidebarOpen, true, 'back at the wide width');
  });

  it('a narrow window starts with the settings panel closed; the choice survives a reload, per width mode', () => {
    const storage = new MemoryStorage();
    const narrow = createUiStore({ width: PANEL_NARROW_BELOW - 1, storage });
    assert.equal(narrow.getState().panelOpen, false);
    narrow.getState().togglePanel();
    assert.equal(createUiStore({ width: 800, storage }).getState().panelOpen, true, 'opened in a narrow window, open after reload');
    const wide = createUiStore({ width: 1400, storage });
    assert.equal(wide.getState().panelOpen, true, 'wide default');
    wide.getState().togglePanel();
    assert.equal(createUiStore({ width: 1400, storage }).getState().panelOpen, false, 'closed in a wide window, closed after reload');
    assert.equal(createUiStore({ width: 800, storage }).getState().panelOpen, true, 'the narrow choice is its own');
  });

  it('a wide sidebar closed by the user stays closed after a reload; a narrow one always starts closed', () => {
    const storage = new MemoryStorage();
    createUiStore({ width: 1280, storage }).getState().toggleSidebar();
    assert.equal(createUiStore({ width: 1280, storage }).getState().sidebarOpen, false);
    const narrow = createUiStore({ width: 500, storage });
    narrow.getState().toggleSidebar();
    assert.equal(createUiStore({ width: 500, storage }).getState().sidebarOpen, false);
  });

  it('Escape closes what covers the chat: the narrow sidebar, then the narrow panel; nothing in a wide window', () => {
    const narrow = createUiStore({ width: 420 });
    narrow.getState().toggleSidebar();
    narrow.getState().togglePanel();
    assert.deepEqual([narrow.getState().sidebarOpen, narrow.getState().panelOpen], [true, true]);
    assert.equal(narrow.getState().closeOverlay(), true);
    assert.deepEqual([narrow.getState().sidebarOpen, narrow.getState().panelOpen], [false, true], 'the sidebar first');
    assert.equal(narrow.getState().closeOverlay(), true);
    assert.equal(narrow.getState().panelOpen, false);
    assert.equal(narrow.getState().closeOverlay(), false, 'nothing left to close');
    const wide = createUiStore({ width: 1400 });
    assert.equal(wide.getState().closeOverlay(), false);
    assert.deepEqual([wide.getState().sidebarOpen, wide.getState().panelOpen], [true, true], 'beside the chat, not over it: kept');
  });

  it('Ctrl/Cmd+K opens a collapsed sidebar and asks for the search field', () => {
    const ui = createUiStore({ width: 420 });
    ui.getState().focusSearch();
    assert.equal(ui.getState().sidebarOpen, true);
    assert.equal(ui.getState().focusRequest, 'search');
    ui.getState().focusDone();
    assert.equal(ui.getState().focusRequest, null);
  });

  it('theme: remembered; "system" follows the system; junk in storage means system', () => {
    const storage = new MemoryStorage();
    const ui = createUiStore({ width: 1280, storage });
    assert.equal(ui.getState().theme, 'system');
    ui.getState().setTheme('dark');
    assert.equal(createUiStore({ width: 1280, storage }).getState().theme, 'dark');
    storage.setItem('ropewalk.theme', 'purple');
    assert.equal(createUiStore({ width: 1280, storage }).getState().theme, 'system');
    assert.equal(resolveTheme('system', true), 'dark');
    assert.equal(resolveTheme('system', false), 'light');
    assert.equal(resolveTheme('light', true), 'light');
  });

  it('a storage that throws loses the choice, not the window', () => {
    const broken: KeyValueStorage = {
      getItem: () => {
        throw new Error('SecurityError');
      },
      setItem: () => {
        throw new Error('QuotaExceededError');
      },
    };
    const ui = createUiStore({ width: 1280, storage: broken });
    ui.getState().togglePanel();
    assert.equal(ui.getState().panelOpen, false);
  });
});

describe('keyboard shortcuts', () => {
  const press = (key: string, mods: Partial<Record<'ctrlKey' | 'metaKey' | 'shiftKey' | 'altKey', boolean>> = {}) => ({
    key,
    ctrlKey: false,
    metaKey: false,
    shiftKey: false,
    altKey: false,
    ...mods,
  });

  it('Ctrl on Linux and Windows, Cmd on macOS', () => {
    assert.equal(shortcutOf(press('n', { ctrlKey: true }), false), 'newChat');
    assert.equal(shortcutOf(press('N', { ctrlKey: true }), false), 'newChat', 'Caps Lock');
    assert.equal(shortcutOf(press('n', { metaKey: true }), false), null);
    assert.equal(shortcutOf(press('k', { metaKey: true }), true), 'search');
    assert.equal(shortcutOf(press('k', { ctrlKey: true }), true), null);
    assert.equal(shortcutOf(press('b', { ctrlKey: true }), false), 'toggleSidebar');
    assert.equal(shortcutOf(press(',', { ctrlKey: true }), false), 'toggleSettings');
  });

  it('Escape alone stops; letters alone, Shift and Alt variants are not shortcuts', () => {
    assert.equal(shortcutOf(press('Escape'), false), 'stop');
    assert.equal(shortcutOf(press('Escape', { ctrlKey: true }), false), null);
    assert.equal(shortcutOf(press('n'), false), null);
    assert.equal(shortcutOf(press('N', { ctrlKey: true, shiftKey: true }), false), null);
    assert.equal(shortcutOf(press('k', { ctrlKey: true, altKey: true }), false), null);
  });

  it('tooltips say the keys as the platform writes them', () => {
    assert.equal(withKeys('New chat', 'newChat', false), 'New chat (Ctrl+N)');
    assert.equal(keysOf('search', true), '⌘K');
    assert.equal(keysOf('stop', false), 'Esc');
  });
});
