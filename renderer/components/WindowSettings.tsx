/**
 * Settings of this window (kept in the window, not sent to the services): the colour theme
 * (system / light / dark) and the list of keyboard shortcuts (from lib/shortcuts.ts, the same
 * table the key handler and the tooltips read).
 */
import { useStores, useUi } from '../hooks.ts';
import { keysOf, SHORTCUTS } from '../lib/shortcuts.ts';
import { THEME_CHOICES, type ThemeChoice } from '../stores/ui.ts';
import { IS_MAC } from '../window-effects.ts';

const THEME_LABELS: Record<ThemeChoice, string> = { system: 'Same as the system', light: 'Light', dark: 'Dark' };

export function WindowSettings() {
  const stores = useStores();
  const theme = useUi((s) => s.theme);
  return (
    <section className="panel-section" aria-labelledby="window-heading">
      <h2 id="window-heading">Window</h2>
      <div className="field">
        <label htmlFor="setting-theme">Theme</label>
        <select id="setting-theme" value={theme} onChange={(e) => stores.ui.getState().setTheme(e.target.value as ThemeChoice)}>
          {THEME_CHOICES.map((t) => (
            <option key={t} value={t}>
              {THEME_LABELS[t]}
            </option>
          ))}
        </select>
      </div>
      <div className="field">
        <span className="field-label" id="shortcuts-heading">
          Keyboard shortcuts
        </span>
        <dl className="shortcuts" aria-labelledby="shortcuts-heading">
          {SHORTCUTS.map((s) => (
            <div key={s.id}>
              <dt>{s.action}</dt>
              <dd>
                <kbd>{keysOf(s.id, IS_MAC)}</kbd>
              </dd>
            </div>
          ))}
        </dl>
      </div>
    </section>
  );
}
