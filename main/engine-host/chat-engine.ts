/**
 * What the services ask of an engine, whichever runs the model: the local `EngineHost` (a worker
 * thread over ONNX Runtime) or a `RemoteEngine` (an OpenAI-compatible server, main/remote/).
 * Chats, counts and the context meter go through this one interface, so the services follow the
 * same path for both.
 */
import type { ModelInfo } from '../engine/generate/engine.ts';
import type { ChatMessage, GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';
import type { EngineCacheStats, TokenizeRequest } from './protocol.ts';

/** How an engine's token counts relate to what the model sees: exact, or an estimate ("≈"). */
export type CountAccuracy = 'exact' | 'estimate';

export interface ChatEngine {
  /** The model answering, or null. `bundleDir` identifies it (counts are cached by it). */
  readonly model: ModelInfo | null;
  /** Whether `countTokens` / `countEach` are exact. */
  readonly countAccuracy: CountAccuracy;
  /** Tokens the request's prompt takes (template and BOS included). */
  countTokens(request: Pick<GenerationRequest, 'prompt' | 'messages' | 'enableThinking'>): Promise<number>;
  /** Tokens of plain texts (no BOS, no template), in order. */
  countEach(texts: string[]): Promise<number[]>;
  /** RoPE and KV cache counters (a remote engine's are all 0: its caches are the server's). */
  stats(): Promise<EngineCacheStats>;
  /** Token ids (see EngineHost.tokenize). */
  tokenize(request: TokenizeRequest): Promise<number[]>;
  detokenize(ids: number[]): Promise<string>;
  /** The prompt text a chat renders to (template, or transcript). */
  renderChat(messages: ChatMessage[]): Promise<string>;
  /**
   * Streams a generation: prefill progress (local only), token text, then one `done`. Aborting
   * `signal` ends it with done{reason:'cancelled'} and the text so far.
   * @throws before the first event when the request is refused.
   */
  generate(request: GenerationRequest, opts?: { signal?: AbortSignal }): AsyncGenerator<GenerationEvent>;
}
