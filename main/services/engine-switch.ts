/**
 * The engine the services use: the local worker (`EngineHost`) or a remote engine
 * (`RemoteEngine`), one at a time, behind the one `ChatEngine` interface. Switching keeps the
 * local worker (and any model it holds) alive, so switching back only reloads what changed.
 */
import type { ChatEngine } from '../engine-host/chat-engine.ts';
import type { EngineHost } from '../engine-host/host.ts';
import type { TokenizeRequest } from '../engine-host/protocol.ts';
import type { ChatMessage, GenerationRequest } from '../engine/generate/types.ts';
import type { RemoteEngine } from '../remote/remote-engine.ts';

export class EngineSwitch implements ChatEngine {
  private remoteEngine: RemoteEngine | null = null;

  constructor(readonly local: EngineHost) {}

  /** The remote engine in use, or null when the local one answers. */
  get remote(): RemoteEngine | null {
    return this.remoteEngine;
  }

  private get active(): ChatEngine {
    return this.remoteEngine ?? this.local;
  }

  /** Answers with `engine` from now on (null: the local worker). */
  use(engine: RemoteEngine | null): void {
    this.remoteEngine = engine;
  }

  get model() {
    return this.active.model;
  }

  get countAccuracy() {
    return this.active.countAccuracy;
  }

  countTokens(request: Pick<GenerationRequest, 'prompt' | 'messages' | 'enableThinking'>) {
    return this.active.countTokens(request);
  }

  countEach(texts: string[]) {
    return this.active.countEach(texts);
  }

  stats() {
    return this.active.stats();
  }

  tokenize(request: TokenizeRequest) {
    return this.active.tokenize(request);
  }

  detokenize(ids: number[]) {
    return this.active.detokenize(ids);
  }

  renderChat(messages: ChatMessage[]) {
    return this.active.renderChat(messages);
  }

  generate(request: GenerationRequest, opts?: { signal?: AbortSignal }) {
    return this.active.generate(request, opts);
  }
}
