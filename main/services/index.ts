/**
 * The services and the handler of every contract method: what the Electron shell (app/, over
 * ipcMain) and `serve` mode (over a WebSocket) both expose through a `Router` (main/composition/start-backend.ts
 * puts them together). Plain Node: nothing here imports electron, a transport or the router.
 *
 * `startServices` opens the store (marking answers a dead process left 'streaming' as errors),
 * starts the engine worker and begins loading the model in the background, so a window can
 * appear at once: `getModel` says 'loading' until it is ready, and calls that need the model
 * (send, budget) wait for it.
 */
import { randomUUID } from 'node:crypto';
import type { Handlers } from '../contract/channels.ts';
import type { LocalServerState, ModelInfo, Settings } from '../contract/types.ts';
import { defaultModelPath } from '../common/default-model.ts';
import { EngineHost } from '../engine-host/host.ts';
import type { TokenizeRequest } from '../engine-host/protocol.ts';
import type { ChatMessage, GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';
import { BudgetService } from './budget.ts';
import { ChatService } from './chat-service.ts';
import { DocumentService } from './documents.ts';
import { ServiceError } from './errors.ts';
import { EventHub } from './events.ts';
import { EngineSwitch } from './engine-switch.ts';
import { ModelService } from './model-service.ts';
import { RemoteKeyStore, type SecretCipher } from './secrets.ts';
import { FALLBACK_MAX_CONTEXT, SettingsService } from './settings.ts';
import { ModelLibraryService } from './model-library.ts';
import type { ConversationStore } from './store.ts';
import { openConversationStore, type StoreRecovery } from './store-recovery.ts';

export interface StartServicesOptions {
  /** Folder of the database (`ropewalk.db`); created if missing. */
  dataDir: string;
  /** The embedded model's checkpoint (default: `defaultModelPath()`). */
  defaultModel?: string;
  /** Where imported model bundles are cached (default: the engine's cache folder). */
  cacheDir?: string;
  /** Start loading the model now (default true); with false, call `models.start()` later. */
  loadModel?: boolean;
  /** The desktop app's local API server, made over the completions (none: `getLocalServer` says 'unavailable'). */
  localServer?: (completions: CompletionBackend) => LocalServerControl;
  /** Encrypts a remote engine's API key at rest (the app's safeStorage); none: the key stays in memory only. */
  secretCipher?: SecretCipher | null;
  /** Saved as the execution-provider setting before the first load (`serve --ep`). */
  executionProvider?: Settings['executionProvider'];
  /** The desktop app's native file dialog: the chosen model file, or null when cancelled (none: serve mode, no dialog). */
  chooseModelFile?: () => Promise<string | null>;
}

/** Starts and stops a local API server as the settings say (implemented by the transport, main/serve). */
export interface LocalServerControl {
  state(): LocalServerState;
  /** Brings the server in line with the settings; a failure (port taken) is reported in the state, never thrown. */
  apply(settings: Settings): Promise<LocalServerState>;
  close(): Promise<void>;
}

const LOCAL_SERVER_KEYS = ['localServer', 'localServerPort', 'localServerCors'] as const;

/** What the OpenAI-compatible endpoints run on. */
export interface CompletionBackend {
  /** This Ropewalk's id, sent as `X-Ropewalk-Instance` so it can tell its own API from another server's. */
  instanceId: string;
  model(): ModelInfo | null;
  /** 'ok' when a model is loaded; 'loading' while one loads; 'error' (with why) when none could be. */
  health(): { status: 'ok' | 'loading' | 'error'; error?: string };
  settings(): Settings;
  /** Streams one generation (see ChatService.completion). */
  complete(request: GenerationRequest, signal: AbortSignal): AsyncGenerator<GenerationEvent>;
  /** Token ids for `/tokenize` (see EngineHost.tokenize). @throws ServiceError MODEL_NOT_READY; the engine's errors. */
  tokenize(request: TokenizeRequest): Promise<number[]>;
  /** Text of token ids for `/detokenize`. @throws ServiceError MODEL_NOT_READY; the engine's errors. */
  detokenize(ids: number[]): Promise<string>;
  /** The prompt a chat renders to, for `/apply-template`. @throws ServiceError MODEL_NOT_READY; the engine's errors. */
  renderChat(messages: ChatMessage[]): Promise<string>;
}

export interface Services {
  /** The handler of every contract method (the router validates requests, then calls these). */
  handlers: Handlers;
  /** The services' events, for the transports to forward. */
  events: EventHub;
  /** The local engine worker. */
  host: EngineHost;
  /** What the services use: the local worker or a remote engine. */
  engine: EngineSwitch;
  store: ConversationStore;
  /** Set when the database was damaged at start, moved aside and replaced by a fresh one. */
  storeRecovery: StoreRecovery | null;
  models: ModelService;
  chat: ChatService;
  /** What `serve` mode's OpenAI-compatible endpoints run on. */
  completions: CompletionBackend;
  /** Settles when the first model load has ended (loaded or failed); never rejects. */
  modelLoaded: Promise<void>;
  /** Stops any answer (kept as cancelled), stops the worker, closes the database. Idempotent. */
  dispose(): Promise<void>;
}

export const INTERRUPTED_MESSAGE = 'the app stopped while this answer was being generated';

/**
 * Opens the store in `dataDir` (a damaged database is moved aside and a fresh one started:
 * `storeRecovery`), starts the engine host and wires every handler.
 * @throws ServiceError DATA_DIR / SCHEMA_TOO_NEW, or SQLite's error for a database that cannot
 *   be read for another reason than damage (permissions, I/O).
 */
export async function startServices(opts: StartServicesOptions): Promise<Services> {
  const { store, recovery: storeRecovery } = openConversationStore(opts.dataDir);
  store.recoverInterrupted(INTERRUPTED_MESSAGE);
  store.releaseDraftDocuments();
  const host = new EngineHost();
  const engine = new EngineSwitch(host);
  const instanceId = randomUUID();
  const keys = new RemoteKeyStore(store, opts.secretCipher ?? null);
  const events = new EventHub();
  const emit = events.emit;

  let chat: ChatService | null = null;
  let settings: SettingsService | null = null;
  const models = new ModelService({
    host,
    engine,
    keys,
    instanceId,
    store,
    emit,
    defaultModel: opts.defaultModel ?? defaultModelPath(),
    cacheDir: opts.cacheDir,
    loadOptions: () => ({
      ...(settings?.userMaxContext !== undefined ? { maxContext: settings.userMaxContext } : {}),
      executionProvider: settings?.get().executionProvider ?? 'auto',
      backend: settings?.get().backend ?? 'native',
    }),
    isGenerating: () => chat?.generating ?? false,
    onLoaded: () => void refreshBudget(),
    nameOf: (path): string | null => library.nameOf(path),
  });
  // An engine that dies — mid-answer or idle — is restarted with its model at once, so /health, /v1
  // and the window see it come back without waiting for a next call (recover is shared if running).
  host.onCrash(() => void models.recover());
  settings = new SettingsService(store, models);
  if (opts.executionProvider !== undefined) settings.presetExecutionProvider(opts.executionProvider);
  const library: ModelLibraryService = new ModelLibraryService({
    store,
    builtinPath: opts.defaultModel ?? defaultModelPath(),
    modelsFolder: () => settingsService.get().modelsFolder,
    maxContext: (trained) => settingsService.userMaxContext ?? trained ?? FALLBACK_MAX_CONTEXT,
  });
  const documents = new DocumentService(engine, store);
  const budget = new BudgetService(engine, store, settings, models, documents);
  chat = new ChatService({ engine, store, settings, budget, models, emit });
  const settingsService = settings;
  const chatService = chat;

  /** Recounts the budget the window looked at last and pushes it (settings or model changed). */
  async function refreshBudget(): Promise<void> {
    const active = budget.active;
    if (!active || chatService.generating) return;
    try {
      const draft = budget.lastDraft(active.conversationId);
      emit('budgetChanged', await budget.getBudget(active.conversationId, draft.content, draft.documents));
    } catch {
      // A deleted conversation or no model: the next getBudget reports it.
    }
  }
  const listChanged = () => emit('conversationsChanged', { conversations: store.listConversations() });

  /** Attaches in progress by file name, for Stop. */
  const attachesInFlight = new Map<string, AbortController[]>();
  const handlers: Handlers = {
    listConversations: async ({ search }) => store.listConversations(search),
    createConversation: async ({ title }) => {
      const c = store.createConversation(title);
      listChanged();
      return c;
    },
    getConversation: async ({ id }) => chatService.withStreamedText(store.getConversation(id)),
    renameConversation: async ({ id, title }) => {
      const s = store.renameConversation(id, title);
      listChanged();
      return s;
    },
    setConversationPolicy: async ({ id, policy }) => {
      const s = store.setConversationPolicy(id, policy);
      listChanged();
      void refreshBudget();
      return s;
    },
    setConversationThinking: async ({ id, thinking }) => {
      const s = store.setConversationThinking(id, thinking);
      listChanged();
      void refreshBudget(); // the toggle changes the prompt the meter counts
      return s;
    },
    deleteConversation: async ({ id }) => {
      store.getSummary(id);
      await chatService.stop(id);
      store.deleteConversation(id);
      budget.forget(id);
      listChanged();
      return null;
    },
    sendMessage: ({ conversationId, content, documents: docs }) => chatService.send(conversationId, content, docs),
    stopGeneration: async ({ conversationId }) => {
      await chatService.stop(conversationId);
      return null;
    },
    regenerate: ({ conversationId }) => chatService.regenerate(conversationId),
    editMessage: ({ conversationId, messageId, content }) => chatService.edit(conversationId, messageId, content),
    deleteMessage: async ({ conversationId, messageId }) => {
      const c = chatService.deleteMessage(conversationId, messageId);
      void refreshBudget();
      listChanged();
      return c;
    },
    getBudget: ({ conversationId, draft, documents: docs }) => budget.getBudget(conversationId, draft, docs),
    attachDocument: async ({ name, data }) => {
      await models.ready();
      // Stop (stopAttaching) aborts every attach of this name in progress.
      const stop = new AbortController();
      attachesInFlight.set(name, [...(attachesInFlight.get(name) ?? []), stop]);
      try {
        return await documents.attach(name, Buffer.from(data, 'base64'), (fraction, phase) => emit('documentProgress', { name, fraction, ...(phase ? { phase } : {}) }), stop.signal);
      } finally {
        const left = (attachesInFlight.get(name) ?? []).filter((c) => c !== stop);
        if (left.length) attachesInFlight.set(name, left);
        else attachesInFlight.delete(name);
      }
    },
    stopAttaching: async ({ name }) => {
      for (const c of attachesInFlight.get(name) ?? []) c.abort();
      return null;
    },
    openDocument: ({ id }) => documents.open(id),
    getSettings: async () => settingsService.get(),
    updateSettings: async (patch) => {
      const s = await settingsService.update(patch, { generating: chatService.generating });
      void refreshBudget();
      if (localServer && LOCAL_SERVER_KEYS.some((k) => patch[k] !== undefined)) await localServer.apply(s);
      return s;
    },
    getModel: async () => models.state,
    getLocalServer: async () => localServer?.state() ?? { status: 'unavailable', baseUrl: null, error: null },
    openModel: async ({ path, quantize }) => {
      const state = await models.open(path, quantize);
      library.remember(path);
      return state;
    },
    listModels: () => library.list(),
    chooseModelFile: async () => (opts.chooseModelFile ? { available: true, path: await opts.chooseModelFile() } : { available: false, path: null }),
    listRemoteModels: async ({ baseUrl, apiKey }) => ({ models: await models.listRemote(baseUrl, apiKey) }),
    connectRemote: ({ baseUrl, model, apiKey, tokenizerPath }) => models.openRemote({ baseUrl, model, apiKey, tokenizerPath }),
    importConversation: async ({ title, messages }) => {
      const c = store.importConversation(title, messages);
      listChanged();
      return c;
    },
    selectBranch: async ({ conversationId, messageId }) => {
      if (chatService.generating) throw new ServiceError('BUSY', 'an answer is being generated; stop it before switching to another version');
      return chatService.withStreamedText(store.selectBranch(conversationId, messageId));
    },
  };

  /** The engine once any load in progress is done. @throws ServiceError MODEL_NOT_READY when no model is loaded. */
  const loadedEngine = async (): Promise<EngineSwitch> => {
    await models.ready();
    models.assertLoaded();
    return engine;
  };
  const completions: CompletionBackend = {
    instanceId,
    model: () => (engine.model ? models.state.info : null),
    health: () => {
      const state = models.state;
      if (engine.model && state.status !== 'loading') return { status: 'ok' };
      return state.status === 'error' ? { status: 'error', error: state.error ?? 'no model is loaded' } : { status: 'loading' };
    },
    settings: () => settingsService.get(),
    complete: (request, signal) => chatService.completion(request, signal),
    tokenize: async (request) => (await loadedEngine()).tokenize(request),
    detokenize: async (ids) => (await loadedEngine()).detokenize(ids),
    renderChat: async (messages) => (await loadedEngine()).renderChat(messages),
  };
  const localServer = opts.localServer?.(completions) ?? null;
  if (localServer) await localServer.apply(settingsService.get());

  const modelLoaded = opts.loadModel === false ? Promise.resolve() : models.start();
  let disposing: Promise<void> | null = null;
  return {
    handlers,
    events,
    host,
    engine,
    store,
    storeRecovery,
    models,
    chat,
    completions,
    modelLoaded,
    dispose: () =>
      (disposing ??= (async () => {
        await localServer?.close();
        await chatService.dispose();
        await host.dispose();
        store.close();
      })()),
  };
}
