/**
 * Model concern: the services' `ModelState` (from `getModel`, `modelState` events and
 * `openModel`), and the open-model action (a path, and optionally `quantize`: a float model's
 * Linear weights imported as 4- or 8-bit blocks, as the CLI's `--quantize`). A failed load is shown once, at the model path field
 * (`loadError`: the call's error, or the services' last load error), not in the banner or the
 * model card (a settings change that makes the model fail to load, too little memory for the max
 * context, is not put in the banner either); it, and any banner notice of a failed load, clears
 * when a model loads. The remote engine form's calls (`listRemote`,
 * `connectRemote`) keep their own state: the models the server lists and why a call failed.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RequestOf, RopewalkApi } from '../../main/contract/channels.ts';
import type { ModelState, QuantizeOption, RemoteModelEntry } from '../../main/contract/types.ts';
import { describeError } from '../lib/errors.ts';
import type { NoticesStore } from './notices.ts';

export interface ModelStoreState {
  model: ModelState | null;
  /** An openModel call is in flight. */
  opening: boolean;
  /** Why the last openModel call failed (shown at the path field only). */
  openError: string | null;
  /** The models the remote server listed (null: not asked yet). */
  remoteModels: RemoteModelEntry[] | null;
  /** A remote call in flight ('list' or 'connect'). */
  remoteBusy: 'list' | 'connect' | null;
  /** Why the last remote call failed (shown in the remote engine form). */
  remoteError: string | null;
  load(): Promise<void>;
  /** Imports and loads the model at `path`; `quantize` null: its weights as stored; absent: as last opened (else as stored). */
  open(path: string, quantize?: QuantizeOption | null): Promise<void>;
  /** Asks a server for its models (`apiKey` undefined: the one saved for that URL). */
  listRemote(baseUrl: string, apiKey?: string): Promise<void>;
  /** Makes the remote engine answer; resolves true when it does. */
  connectRemote(request: RequestOf<'connectRemote'>): Promise<boolean>;
  /** A `modelState` event. */
  apply(state: ModelState): void;
}

export type ModelStore = StoreApi<ModelStoreState>;

export function createModelStore(api: RopewalkApi, notices: NoticesStore, onChanged: () => void): ModelStore {
  return createStore<ModelStoreState>()((set) => ({
    model: null,
    opening: false,
    openError: null,
    remoteModels: null,
    remoteBusy: null,
    remoteError: null,
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
        const model = await api.openModel({ path: trimmed, ...(quantize !== undefined ? { quantize } : {}) });
        set({ model, openError: null });
        notices.getState().clearCode('MODEL_LOAD'); // an earlier load's failure no longer holds
        onChanged();
      } catch (e) {
        set({ openError: describeError(e).message });
      } finally {
        set({ opening: false });
      }
    },
    async listRemote(baseUrl, apiKey) {
      set({ remoteBusy: 'list', remoteError: null, remoteModels: null });
      try {
        const { models } = await api.listRemoteModels({ baseUrl, ...(apiKey ? { apiKey } : {}) });
        set({ remoteModels: models, remoteError: models.length ? null : 'The server lists no models.' });
      } catch (e) {
        set({ remoteError: describeError(e).message });
      } finally {
        set({ remoteBusy: null });
      }
    },
    async connectRemote(request) {
      set({ remoteBusy: 'connect', remoteError: null });
      try {
        set({ model: await api.connectRemote(request), openError: null });
        onChanged();
        return true;
      } catch (e) {
        set({ remoteError: describeError(e).message });
        return false;
      } finally {
        set({ remoteBusy: null });
      }
    },
    apply(state) {
      const loaded = state.status === 'ready' && !state.error;
      set(loaded ? { model: state, openError: null } : { model: state });
      if (loaded) notices.getState().clearCode('MODEL_LOAD'); // an earlier load's failure no longer holds
      if (state.status === 'ready') onChanged();
    },
  }));
}

/**
 * The one load error to show (at the path field): this window's failed call, else the services'
 * last failed load, unless the remote engine form is already saying it.
 */
export function loadErrorOf(s: Pick<ModelStoreState, 'model' | 'openError'> & Partial<Pick<ModelStoreState, 'remoteError'>>): string | null {
  if (s.openError) return s.openError;
  if (s.remoteError || s.model?.status === 'loading') return null;
  return s.model?.error ?? null;
}
