/**
 * The error banner: failed calls land here as { code, message } notices that the user dismisses,
 * each shown once however often it recurs (a repeat moves it last instead of stacking a copy).
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
  /** Adds a notice for anything thrown; a notice already shown is not added again (it moves last). */
  report(error: unknown): void;
  dismiss(id: number): void;
  /** Drops the notices of one code (what they said is no longer true: a model loaded since a MODEL_LOAD). */
  clearCode(code: string): void;
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
      const notices = get().notices;
      const same = notices.find((n) => n.code === code && n.message === message);
      if (same === notices.at(-1) && same) return;
      const others = same ? notices.filter((n) => n !== same) : notices;
      set({ notices: [...others, same ?? { id: nextId++, code, message }].slice(-MAX_NOTICES) });
    },
    dismiss(id) {
      set({ notices: get().notices.filter((n) => n.id !== id) });
    },
    clearCode(code) {
      if (get().notices.some((n) => n.code === code)) set({ notices: get().notices.filter((n) => n.code !== code) });
    },
    clear() {
      set({ notices: [] });
    },
  }));
}
