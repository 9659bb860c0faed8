/**
 * What the OpenAI-compatible endpoints (`serve`'s /v1 and the desktop app's Local server) run on:
 * the model's state and health, the settings, one generation at a time through the chat service's
 * queue, and the engine's tokenizer verbs once a model is loaded.
 */
import type { ModelInfo, Settings } from '../contract/types.ts';
import type { TokenizeRequest } from '../engine-host/protocol.ts';
import type { ChatMessage, GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';
import type { ChatService } from './chat-service.ts';
import type { EngineSwitch } from './engine-switch.ts';
import type { ModelService } from './model-service.ts';
import type { SettingsService } from './settings.ts';

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

/** The completion backend over the wired services. */
export function completionBackend(p: { instanceId: string; engine: EngineSwitch; models: ModelService; settings: SettingsService; chat: ChatService }): CompletionBackend {
  /** The engine once any load in progress is done. @throws ServiceError MODEL_NOT_READY when no model is loaded. */
  const loadedEngine = async (): Promise<EngineSwitch> => {
    await p.models.ready();
    p.models.assertLoaded();
    return p.engine;
  };
  return {
    instanceId: p.instanceId,
    model: () => (p.engine.model ? p.models.state.info : null),
    health: () => {
      const state = p.models.state;
      if (p.engine.model && state.status !== 'loading') return { status: 'ok' };
      return state.status === 'error' ? { status: 'error', error: state.error ?? 'no model is loaded' } : { status: 'loading' };
    },
    settings: () => p.settings.get(),
    complete: (request, signal) => p.chat.completion(request, signal),
    tokenize: async (request) => (await loadedEngine()).tokenize(request),
    detokenize: async (ids) => (await loadedEngine()).detokenize(ids),
    renderChat: async (messages) => (await loadedEngine()).renderChat(messages),
  };
}
