/**
 * The handler of every contract method (`Handlers`, main/contract/channels.ts), over the services
 * `startServices` wired: one small group per concern — conversations, answers, documents,
 * settings and models — joined by `contractHandlers`. The router validates each request before a
 * handler sees it; a handler throws the services' typed errors (ServiceError and the engine's).
 * Side effects every group shares: the conversation list is pushed after a change
 * (`conversationsChanged`), and the budget the window looked at last is recounted and pushed
 * after anything that changes it (`refreshActiveBudget`).
 */
import type { Handlers } from '../contract/channels.ts';
import type { LocalServerState, Settings } from '../contract/types.ts';
import type { BudgetService } from './budget.ts';
import type { ChatService } from './chat-service.ts';
import type { DocumentService } from './documents.ts';
import { ServiceError } from './errors.ts';
import type { Emit } from './events.ts';
import type { ModelLibraryService } from './model-library.ts';
import type { ModelProfiles } from './model-profiles.ts';
import type { ModelService } from './model-service.ts';
import type { SettingsService } from './settings.ts';
import type { ConversationStore } from './store.ts';

/** Starts and stops a local API server as the settings say (implemented by the transport, main/serve). */
export interface LocalServerControl {
  state(): LocalServerState;
  /** Brings the server in line with the settings; a failure (port taken) is reported in the state, never thrown. */
  apply(settings: Settings): Promise<LocalServerState>;
  close(): Promise<void>;
}

/** What the handlers work on. */
export interface HandlerParts {
  store: ConversationStore;
  chat: ChatService;
  budget: BudgetService;
  documents: DocumentService;
  settings: SettingsService;
  models: ModelService;
  library: ModelLibraryService;
  emit: Emit;
  /** The desktop app's local API server (null: none, e.g. serve mode). */
  localServer: () => LocalServerControl | null;
  /** The desktop app's native file dialog (none: serve mode). */
  chooseModelFile?: () => Promise<string | null>;
  /** Each model's remembered load and generation defaults (model-profiles.ts). */
  profiles: ModelProfiles;
}

const LOCAL_SERVER_KEYS = ['localServer', 'localServerPort', 'localServerCors'] as const;

/**
 * Recounts the budget the window looked at last and pushes it (`budgetChanged`) — after a
 * settings or model change — unless an answer is streaming (its own events move the meter).
 * Never throws: a deleted conversation or a missing model is reported by the next getBudget.
 */
export async function refreshActiveBudget(p: Pick<HandlerParts, 'budget' | 'chat' | 'emit'>): Promise<void> {
  const active = p.budget.active;
  if (!active || p.chat.generating) return;
  try {
    const draft = p.budget.lastDraft(active.conversationId);
    p.emit('budgetChanged', await p.budget.getBudget(active.conversationId, draft.content, draft.documents));
  } catch {
    // A deleted conversation or no model: the next getBudget reports it.
  }
}

/** Every contract method's handler. */
export function contractHandlers(p: HandlerParts): Handlers {
  const listChanged = () => p.emit('conversationsChanged', { conversations: p.store.listConversations() });
  const refreshBudget = () => void refreshActiveBudget(p);
  return {
    ...conversationHandlers(p, listChanged, refreshBudget),
    ...answerHandlers(p, listChanged, refreshBudget),
    ...documentHandlers(p),
    ...settingsHandlers(p, refreshBudget),
    ...modelHandlers(p),
  };
}

type Group<K extends keyof Handlers> = Pick<Handlers, K>;

function conversationHandlers(
  { store, chat, budget, settings }: HandlerParts,
  listChanged: () => void,
  refreshBudget: () => void,
): Group<'listConversations' | 'createConversation' | 'getConversation' | 'renameConversation' | 'setConversationPolicy' | 'setConversationSettings' | 'setConversationThinking' | 'deleteConversation' | 'importConversation'> {
  /** Runs a change of one conversation's summary and pushes the list. */
  const changed = <T>(change: () => T): T => {
    const out = change();
    listChanged();
    return out;
  };
  return {
    listConversations: async ({ search }) => store.listConversations(search),
    createConversation: async ({ title }) => changed(() => store.createConversation(title)),
    getConversation: async ({ id }) => chat.withStreamedText(store.getConversation(id)),
    renameConversation: async ({ id, title }) => changed(() => store.renameConversation(id, title)),
    setConversationPolicy: async ({ id, policy }) => {
      const s = changed(() => store.setConversationPolicy(id, policy));
      refreshBudget();
      return s;
    },
    setConversationSettings: async ({ id, settings: own }) => {
      const s = changed(() => settings.setForConversation(id, own));
      refreshBudget();
      return s;
    },
    setConversationThinking: async ({ id, thinking }) => {
      const s = changed(() => store.setConversationThinking(id, thinking));
      refreshBudget(); // the toggle changes the prompt the meter counts
      return s;
    },
    deleteConversation: async ({ id }) => {
      store.getSummary(id);
      await chat.stop(id);
      store.deleteConversation(id);
      budget.forget(id);
      listChanged();
      return null;
    },
    importConversation: async ({ title, messages }) => changed(() => store.importConversation(title, messages)),
  };
}

function answerHandlers(
  { store, chat, budget }: HandlerParts,
  listChanged: () => void,
  refreshBudget: () => void,
): Group<'sendMessage' | 'stopGeneration' | 'regenerate' | 'editMessage' | 'continueAnswer' | 'editAnswer' | 'deleteMessage' | 'getBudget' | 'selectBranch'> {
  return {
    sendMessage: ({ conversationId, content, documents }) => chat.send(conversationId, content, documents),
    stopGeneration: async ({ conversationId }) => {
      await chat.stop(conversationId);
      return null;
    },
    regenerate: ({ conversationId }) => chat.regenerate(conversationId),
    editMessage: ({ conversationId, messageId, content }) => chat.edit(conversationId, messageId, content),
    continueAnswer: ({ conversationId, messageId }) => chat.continueAnswer(conversationId, messageId),
    editAnswer: async ({ conversationId, messageId, content }) => chat.editAnswer(conversationId, messageId, content),
    deleteMessage: async ({ conversationId, messageId }) => {
      const c = chat.deleteMessage(conversationId, messageId);
      refreshBudget();
      listChanged();
      return c;
    },
    getBudget: ({ conversationId, draft, documents }) => budget.getBudget(conversationId, draft, documents),
    selectBranch: async ({ conversationId, messageId }) => {
      if (chat.generating) throw new ServiceError('BUSY', 'an answer is being generated; stop it before switching to another version');
      return chat.withStreamedText(store.selectBranch(conversationId, messageId));
    },
  };
}

function documentHandlers({ documents, models, emit }: HandlerParts): Group<'attachDocument' | 'stopAttaching' | 'openDocument'> {
  const inFlight = new AttachesInFlight();
  return {
    attachDocument: async ({ name, data }) => {
      await models.ready();
      const stop = inFlight.start(name);
      try {
        return await documents.attach(name, Buffer.from(data, 'base64'), (fraction, phase) => emit('documentProgress', { name, fraction, ...(phase ? { phase } : {}) }), stop.signal);
      } finally {
        inFlight.end(name, stop);
      }
    },
    stopAttaching: async ({ name }) => {
      inFlight.stop(name);
      return null;
    },
    openDocument: ({ id }) => documents.open(id),
  };
}

function settingsHandlers({ settings, chat, localServer, models, profiles }: HandlerParts, refreshBudget: () => void): Group<'getSettings' | 'updateSettings' | 'getLocalServer'> {
  return {
    getSettings: async () => settings.get(),
    updateSettings: async (patch) => {
      const s = await settings.update(patch, { generating: chat.generating });
      const loaded = models.localPath;
      if (loaded !== null) profiles.record(loaded, patch as Partial<Settings>);
      refreshBudget();
      const server = localServer();
      if (server && LOCAL_SERVER_KEYS.some((k) => patch[k] !== undefined)) await server.apply(s);
      return s;
    },
    getLocalServer: async () => localServer()?.state() ?? { status: 'unavailable', baseUrl: null, error: null },
  };
}

function modelHandlers({ models, library, chooseModelFile, profiles, settings }: HandlerParts): Group<'getModel' | 'openModel' | 'listModels' | 'chooseModelFile' | 'listRemoteModels' | 'connectRemote'> {
  return {
    getModel: async () => models.state,
    openModel: async ({ path, quantize }) => {
      // The model's remembered defaults: its weights choice unless one is asked for, its max
      // context for the load, its sampler and system prompt once it loaded (model-profiles.ts).
      const remembered = profiles.get(path);
      const weights = quantize !== undefined ? quantize : (remembered?.quantize ?? null);
      const defaults = remembered ? { maxContext: remembered.settings.maxContext, apply: () => settings.applyModelDefaults(remembered.settings) } : undefined;
      const state = await models.open(path, weights ?? undefined, defaults);
      profiles.record(path, {}, weights);
      library.remember(path);
      return state;
    },
    listModels: () => library.list(),
    chooseModelFile: async () => (chooseModelFile ? { available: true, path: await chooseModelFile() } : { available: false, path: null }),
    listRemoteModels: async ({ baseUrl, apiKey }) => ({ models: await models.listRemote(baseUrl, apiKey) }),
    connectRemote: ({ baseUrl, model, apiKey, tokenizerPath }) => models.openRemote({ baseUrl, model, apiKey, tokenizerPath }),
  };
}

/** Attaches in progress by file name, so Stop (stopAttaching) aborts every attach of that name. */
class AttachesInFlight {
  private readonly byName = new Map<string, AbortController[]>();

  start(name: string): AbortController {
    const stop = new AbortController();
    this.byName.set(name, [...(this.byName.get(name) ?? []), stop]);
    return stop;
  }

  end(name: string, stop: AbortController): void {
    const left = (this.byName.get(name) ?? []).filter((c) => c !== stop);
    if (left.length) this.byName.set(name, left);
    else this.byName.delete(name);
  }

  stop(name: string): void {
    for (const c of this.byName.get(name) ?? []) c.abort();
  }
}
