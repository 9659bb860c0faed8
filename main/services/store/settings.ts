/**
 * Settings in the store: key → JSON value rows. Validation is the settings service's
 * (`main/services/settings.ts`); a row that does not parse is skipped (its default applies).
 */
import type Database from 'better-sqlite3';

/** The settings table. */
export class SettingsTable {
  constructor(private readonly db: Database.Database) {}

  /** All stored settings, key → parsed JSON value (unparseable rows are skipped). */
  getSettings(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const { key, value } of this.db.prepare(`SELECT key, value FROM settings`).all() as { key: string; value: string }[]) {
      try {
        out[key] = JSON.parse(value);
      } catch {
        // A hand-edited row; the default applies.
      }
    }
    return out;
  }

  /** Stores settings (JSON); `undefined` values delete their key. One transaction. */
  setSettings(values: Record<string, unknown>): void {
    const put = this.db.prepare(`INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`);
    const del = this.db.prepare(`DELETE FROM settings WHERE key = ?`);
    this.db.transaction(() => {
      for (const [k, v] of Object.entries(values)) {
        if (v === undefined) del.run(k);
        else put.run(k, JSON.stringify(v));
      }
    })();
  }
}
