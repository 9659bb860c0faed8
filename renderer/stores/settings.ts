/**
 * Settings concern: the services' `Settings` (loaded at start and again whenever a model loads,
 * since the max context follows the trained context until set; patched field by field). A patch
 * that fails leaves the last saved settings in place and reports the error. `localServer` is the
 * desktop app's local API server as the services report it (refreshed with the settings).
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RequestOf, RopewalkApi } from '../../main/contract/channels.ts';
import type { LocalServerState, Settings } from '../../main/contract/types.ts';
import { describeError } from '../lib/errors.ts';
import type { NoticesStore } from './notices.ts';

export type SettingsPatch = RequestOf<'updateSettings'>;

export interface SettingsState {
  settings: Settings | null;
  localServer: LocalServerState | null;
  /** Patches in flight. */
  saving: number;
  /** When the last patch was accepted (ms since the epoch; the panel says "Saved"); null: none yet. */
  savedAt: number | null;
  load(): Promise<void>;
  /** Saves a patch; resolves true when the services accepted it. */
  update(patch: SettingsPatch): Promise<boolean>;
}

export type SettingsStore = StoreApi<SettingsState>;

export function createSettingsStore(api: RopewalkApi, notices: NoticesStore, onChanged: () => void): SettingsStore {
  return createStore<SettingsState>()((set, get) => ({
    settings: null,
    localServer: null,
    saving: 0,
    savedAt: null,
    async load() {
      try {
        set({ settings: await api.getSettings({}), localServer: await api.getLocalServer({}) });
      } catch (e) {
        notices.getState().report(e);
      }
    },
    async update(patch) {
      set({ saving: get().saving + 1 });
      try {
        set({ settings: await api.updateSettings(patch), savedAt: Date.now() });
        if (patch.localServer !== undefined || patch.localServerPort !== undefined || patch.localServerCors !== undefined) set({ localServer: await api.getLocalServer({}) });
        onChanged();
        return true;
      } catch (e) {
        // A model that does not load with the new settings (too little memory for the max
        // context) is said once, at the model path field, from the model state (loadErrorOf).
        if (describeError(e).code !== 'MODEL_LOAD') notices.getState().report(e);
        return false;
      } finally {
        set({ saving: get().saving - 1 });
      }
    },
  }));
}
