/**
 * The error banner: failed calls land here as { code, message } notices that the user dismisses.
 * Nothing that fails may crash the window; every store reports through `report`.
 */
import { createStore, type StoreApi } from 'zustand/vanilla';
import { describeError } from '../lib/errors.ts';

export interface Notice {
  id: number;
  code: string;
  message: string;
}

export interface NoticesState {
  notices: Notice[];
  /** Adds a notice for anything thrown (the same message twice in a row is shown once). */
  report(error: unknown): void;
  dismiss(id: number): void;
  clear(): void;
}

export type NoticesStore = StoreApi<NoticesState>;

/** At most this many notices are kept; older ones drop off. */
const MAX_NOTICES = 4;

export function createNoticesStore(): NoticesStore {
  let nextId = 1;
  return createStore<NoticesState>()((set, get) => ({
    notices: [],
    report(error) {
      const { code, message } = describeError(error);
      const last = get().notices.at(-1);
      if (last && last.code === code && last.message === message) return;
      set({ notices: [...get().notices, { id: nextId++, code, message }].slice(-MAX_NOTICES) });
    },
    dismiss(id) {
      set({ notices: get().notices.filter((n) => n.id !== id) });
    },
    clear() {
      set({ notices: [] });
    },
  }));
}
