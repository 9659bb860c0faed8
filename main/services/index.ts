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
import type { Settings } from '../contract/types.ts';
import { defaultModelPath } from '../common/default-model.ts';
import { EngineHost } from '../engine-host/host.ts';
import type { EngineSpawn } from '../engine-host/channel.ts';
import { BudgetService } from './budget.ts';
import { notSavedOnRestart } from './answer-save.ts';
import { ChatService } from './chat-service.ts';
import { completionBackend, type CompletionBackend } from './completions.ts';
import { DocumentService } from './documents.ts';
import { EventHub } from './events.ts';
import { contractHandlers, refreshActiveBudget, type HandlerParts, type LocalServerControl } from './handlers.ts';
import { EngineSwitch } from './engine-switch.ts';
import { ModelService } from './model-service.ts';
import { RemoteKeyStore, type SecretCipher } from './secrets.ts';
import { DEFAULT_SETTINGS, FALLBACK_MAX_CONTEXT, SettingsService } from './settings.ts';
import { ModelProfiles } from './model-profiles.ts';
import { ModelLibraryService } from './model-library.ts';
import type { ConversationStore } from './store.ts';
import { openConversationStore, type StoreRecovery } from './store-recovery.ts';

export type { CompletionBackend } from './completions.ts';
export type { LocalServerControl } from './handlers.ts';

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
  /** `serve --threads`: stored as the threads setting before the model loads. */
  threads?: number;
  /** The desktop app's native file dialog: the chosen model file, or null when cancelled (none: serve mode, no dialog). */
  chooseModelFile?: () => Promise<string | null>;
  /** How the engine's own process is started (the desktop app: Electron's utilityProcess; default: child_process.fork). */
  engineSpawn?: EngineSpawn;
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
  store.recoverInterrupted(INTERRUPTED_MESSAGE, notSavedOnRestart);
  store.releaseDraftDocuments();
  const host = new EngineHost({ spawn: opts.engineSpawn });
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
      threads: settings?.get().threads ?? 0,
      kvCacheDtype: settings?.get().kvCacheDtype ?? DEFAULT_SETTINGS.kvCacheDtype,
    }),
    isGenerating: () => chat?.generating ?? false,
    onLoaded: () => void (chat && refreshActiveBudget({ budget, chat, emit })),
    nameOf: (path): string | null => library.nameOf(path),
  });
  // An engine that dies — mid-answer or idle — is restarted with its model at once, so /health, /v1
  // and the window see it come back without waiting for a next call (recover is shared if running).
  host.onCrash(() => void models.recover());
  settings = new SettingsService(store, models);
  if (opts.executionProvider !== undefined) settings.presetExecutionProvider(opts.executionProvider);
  if (opts.threads !== undefined) settings.presetThreads(opts.threads);
  const library: ModelLibraryService = new ModelLibraryService({
    store,
    builtinPath: opts.defaultModel ?? defaultModelPath(),
    modelsFolder: () => settingsService.get().modelsFolder,
    maxContext: (trained) => settingsService.userMaxContext ?? trained ?? FALLBACK_MAX_CONTEXT,
    kvCacheDtype: () => settingsService.get().kvCacheDtype,
  });
  const profiles = new ModelProfiles(store);
  const documents = new DocumentService(engine, store);
  const budget = new BudgetService(engine, store, settings, models, documents);
  chat = new ChatService({ engine, store, settings, budget, models, emit });
  const settingsService = settings;
  const chatService = chat;
  const parts: HandlerParts = { store, chat, budget, documents, settings, models, library, emit, localServer: () => localServer, chooseModelFile: opts.chooseModelFile, profiles };
  const completions = completionBackend({ instanceId, engine, models, settings, chat });
  const localServer = opts.localServer?.(completions) ?? null;
  if (localServer) await localServer.apply(settingsService.get());

  const modelLoaded = opts.loadModel === false ? Promise.resolve() : models.start();
  let disposing: Promise<void> | null = null;
  return {
    handlers: contractHandlers(parts),
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
