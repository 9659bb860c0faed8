/**
 * React access to the stores: a context holding the `Stores` built in main.tsx, and one hook per
 * concern taking a selector (atomic values, or `useShallow` for derived objects, as zustand v5
 * requires to avoid re-render loops).
 */
import { createContext, useContext } from 'react';
import type { ContextFullPolicy } from '../main/contract/types.ts';
import { useStore } from 'zustand';
import type { BudgetState } from './stores/budget.ts';
import type { ChatState } from './stores/chat.ts';
import { summaryById, type ConversationsState } from './stores/conversations.ts';
import type { Stores } from './stores/index.ts';
import type { LibraryState } from './stores/library.ts';
import type { ModelStoreState } from './stores/model.ts';
import type { NoticesState } from './stores/notices.ts';
import type { SettingsState } from './stores/settings.ts';
import type { UiState } from './stores/ui.ts';

export const StoresContext = createContext<Stores | null>(null);

export function useStores(): Stores {
  const stores = useContext(StoresContext);
  if (!stores) throw new Error('StoresContext is missing: render inside <StoresContext value={stores}>');
  return stores;
}

export const useChat = <T,>(selector: (s: ChatState) => T): T => useStore(useStores().chat, selector);
export const useBudget = <T,>(selector: (s: BudgetState) => T): T => useStore(useStores().budget, selector);
export const useConversations = <T,>(selector: (s: ConversationsState) => T): T => useStore(useStores().conversations, selector);
export const useModel = <T,>(selector: (s: ModelStoreState) => T): T => useStore(useStores().model, selector);
export const useLibrary = <T,>(selector: (s: LibraryState) => T): T => useStore(useStores().library, selector);
export const useSettings = <T,>(selector: (s: SettingsState) => T): T => useStore(useStores().settings, selector);
export const useNotices = <T,>(selector: (s: NoticesState) => T): T => useStore(useStores().notices, selector);
export const useUi = <T,>(selector: (s: UiState) => T): T => useStore(useStores().ui, selector);

/** The open chat's id and its own context-full policy (null: none of its own, the setting applies). */
export function useOpenChatPolicy(): { conversationId: string | null; own: ContextFullPolicy | null } {
  const conversationId = useChat((s) => s.conversationId);
  const own = useConversations((s) => summaryById(s, conversationId)?.contextFullPolicy ?? null);
  return { conversationId, own };
}
