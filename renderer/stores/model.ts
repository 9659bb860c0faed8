/**
 * Model concern: the services' `ModelState` (from `getModel`, `modelState` events and
 * `openModel`), and the open-model action (a path, and optionally `quantize`: a float model's
 * Linear weights imported as 4- or 8-bit blocks, as the CLI's `--quantize`). A failed load is shown once, at the model path field
 * (`loadError`: the call's error, or the services' last load error), not in the banner or the
 * model card; it clears when a model loads.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { ModelState, QuantizeOption } from '../../main/contract/types.ts';
import { describeError } from '../lib/errors.ts';
import type { NoticesStore } from './notices.ts';

export interface ModelStoreState {
  model: ModelState | null;
  /** An openModel call is in flight. */
  opening: boolean;
  /** Why the last openModel call failed (shown at the path field only). */
  openError: string | null;
  load(): Promise<void>;
  /** Imports and loads the model at `path`; `quantize` null or absent: its weights as stored. */
  open(path: string, quantize?: QuantizeOption | null): Promise<void>;
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
    async open(path, quantize) {
      const trimmed = path.trim();
      if (!trimmed) {
        set({ openError: 'Type the path of a model file or folder first.' });
        return;
      }
      set({ opening: true, openError: null });
      try {
        const model = await api.openModel({ path: trimmed, ...(quantize ? { quantize } : {}) });
        set({ model, openError: null });
        onChanged();
      } catch (e) {
        set({ openError: describeError(e).message });
      } finally {
        set({ opening: false });
      }
    },
    apply(state) {
      set(state.status === 'ready' && !state.error ? { model: state, openError: null } : { model: state });
      if (state.status === 'ready') onChanged();
    },
  }));
}

/** The one load error to show (at the path field): this window's failed call, else the services' last failed load. */
export function loadErrorOf(s: Pick<ModelStoreState, 'model' | 'openError'>): string | null {
  return s.openError ?? (s.model?.status === 'loading' ? null : (s.model?.error ?? null));
}
