/**
 * The window's keyboard shortcuts: one table, read by the key handler (App), the tooltips of the
 * buttons they stand for, and the list in Settings, so the three never disagree. `Mod` is Cmd on
 * macOS and Ctrl elsewhere. Pure: takes plain key facts, no DOM events.
 */

export type ShortcutId = 'newChat' | 'search' | 'toggleSidebar' | 'toggleSettings' | 'stop';

export interface Shortcut {
  id: ShortcutId;
  /** KeyboardEvent.key, compared case-insensitively. */
  key: string;
  /** Needs Cmd (macOS) or Ctrl (elsewhere). */
  mod: boolean;
  /** What it does, for the list in Settings. */
  action: string;
}

export const SHORTCUTS: readonly Shortcut[] = [
  { id: 'newChat', key: 'n', mod: true, action: 'New chat' },
  { id: 'search', key: 'k', mod: true, action: 'Search conversations' },
  { id: 'toggleSidebar', key: 'b', mod: true, action: 'Show or hide the conversations' },
  { id: 'toggleSettings', key: ',', mod: true, action: 'Show or hide model and settings' },
  { id: 'stop', key: 'Escape', mod: false, action: 'Stop the answer' },
];

/** The key facts of a keydown that matter here. */
export interface KeyPress {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  shiftKey: boolean;
  altKey: boolean;
}

/** The shortcut a key press stands for, or null. Shift and Alt never match (they are other keys' variants). */
export function shortcutOf(press: KeyPress, mac: boolean): ShortcutId | null {
  if (press.shiftKey || press.altKey) return null;
  const mod = mac ? press.metaKey && !press.ctrlKey : press.ctrlKey && !press.metaKey;
  const bare = !press.ctrlKey && !press.metaKey;
  const key = press.key.toLowerCase();
  const hit = SHORTCUTS.find((s) => s.key.toLowerCase() === key && (s.mod ? mod : bare));
  return hit?.id ?? null;
}

/** How to press it, as the platform writes it: "Ctrl+K" or "⌘K", "Esc". */
export function keysOf(id: ShortcutId, mac: boolean): string {
  const s = SHORTCUTS.find((x) => x.id === id)!;
  const key = s.key === 'Escape' ? 'Esc' : s.key.toUpperCase();
  if (!s.mod) return key;
  return mac ? `⌘${key}` : `Ctrl+${key}`;
}

/** aria-keyshortcuts value (WAI-ARIA syntax: "Control+K", "Meta+K", "Escape"). */
export function ariaKeysOf(id: ShortcutId, mac: boolean): string {
  const s = SHORTCUTS.find((x) => x.id === id)!;
  if (!s.mod) return s.key;
  return `${mac ? 'Meta' : 'Control'}+${s.key.toUpperCase()}`;
}

/** A tooltip with the shortcut: "New chat (Ctrl+N)". */
export function withKeys(label: string, id: ShortcutId, mac: boolean): string {
  return `${label} (${keysOf(id, mac)})`;
}
