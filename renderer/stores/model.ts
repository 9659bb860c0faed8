/**
 * Model concern: the services' `ModelState` (from `getModel`, `modelState` events and
 * `openModel`), and the open-model action with its own error line for the panel.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { ModelState } from '../../main/contract/types.ts';
import { describeError } from '../lib/errors.ts';
import type { NoticesStore } from './notices.ts';

export interface ModelStoreState {
  model: ModelState | null;
  /** An openModel call is in flight. */
  opening: boolean;
  /** Why the last openModel call failed (also reported to the banner). */
  openError: string | null;
  load(): Promise<void>;
  open(path: string): Promise<void>;
  /** A `modelState` event. */
  apply(state: ModelState): void;
}

export type ModelStore = StoreApi<ModelStoreState>;

export function createModelStore(api: RopewalkApi, notices: NoticesStore, onChanged: () => void): ModelStore {
  return createStore<ModelStoreState>()((set) => ({
    model: null,
    opening: false,
    openError: null,
    async load() {
      try {
        set({ model: await api.getModel({}) });
      } catch (e) {
        notices.getState().report(e);
      }
    },
    async open(path) {
      const trimmed = path.trim();
      if (!trimmed) {
        set({ openError: 'Type the path of a model file or folder first.' });
        return;
      }
      set({ opening: true, openError: null });
      try {
        set({ model: await api.openModel({ path: trimmed }) });
        onChanged();
      } catch (e) {
        set({ openError: describeError(e).message });
        notices.getState().report(e);
      } finally {
        set({ opening: false });
      }
    },
    apply(state) {
      set({ model: state });
      if (state.status === 'ready') onChanged();
    },
  }));
}
