/**
 * Library concern: the models on this machine and the recent ones (`listModels`), refreshed on
 * demand and after a model loads (the recent list and the fit estimates change with it), and
 * the desktop app's native file dialog (`chooseModelFile`; serve mode has none: the path field
 * stays). Opening goes through the model store, so its progress and errors show where they
 * always do.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { RopewalkApi } from '../../main/contract/channels.ts';
import type { ModelLibrary } from '../../main/contract/library.ts';
import { describeError } from '../lib/errors.ts';

export interface LibraryState {
  library: ModelLibrary | null;
  scanning: boolean;
  /** Why the last listing failed. */
  error: string | null;
  refresh(): Promise<void>;
  /** Opens the native file dialog; resolves the chosen path, or null (cancelled, or no dialog here). */
  choose(): Promise<string | null>;
}

export type LibraryStore = StoreApi<LibraryState>;

export function createLibraryStore(api: RopewalkApi): LibraryStore {
  return createStore<LibraryState>()((set, get) => ({
    library: null,
    scanning: false,
    error: null,
    async refresh() {
      if (get().scanning) return;
      set({ scanning: true });
      try {
        set({ library: await api.listModels({}), error: null });
      } catch (e) {
        set({ error: describeError(e).message });
      } finally {
        set({ scanning: false });
      }
    },
    async choose() {
      try {
        return (await api.chooseModelFile({})).path;
      } catch (e) {
        set({ error: describeError(e).message });
        return null;
      }
    },
  }));
}

/** The built-in model's name as the library lists it (null before the first listing). */
export function builtinNameOf(s: Pick<LibraryState, 'library'>): string | null {
  return s.library?.models.find((m) => m.source === 'builtin')?.name ?? null;
}
