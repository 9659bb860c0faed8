/**
 * Messages between the engine host (main thread) and the engine worker (worker_threads).
 * Plain data only. Every request carries an `id`; the worker answers with events that echo it.
 *
 *   host → worker: load | generate | cancel | count | countEach | tokenize | renderChat | detokenize | reset | stats | shutdown
 *   worker → host: loaded | event | result | error   (error carries { code, message })
 */
import type { KvCacheStats } from '../engine/cache/kv-cache.ts';
import type { RopeCacheStats } from '../engine/cache/rope-cache.ts';
import type { SerializedEngineError } from '../engine/errors.ts';
import type { EngineOptions, ModelInfo } from '../engine/generate/engine.ts';
import type { ChatMessage, GenerationEvent, GenerationRequest } from '../engine/generate/types.ts';

/** What a load's progress says besides phase and fraction: weight bytes written, seconds left. */
export interface LoadProgressDetail {
  bytes?: number;
  totalBytes?: number;
  etaSeconds?: number;
}

/** What `tokenize` encodes: chat messages as generation renders them, or a text as is. */
export type TokenizeRequest = { messages: ChatMessage[] } | { text: string; addSpecial: boolean; parseSpecial: boolean };

export type LoadOptions = Omit<EngineOptions, 'onProgress' | 'signal'>;

export type HostToWorker =
  | { type: 'load'; id: number; source: string; options: LoadOptions }
  | { type: 'generate'; id: number; request: GenerationRequest }
  | { type: 'cancel'; id: number }
  | { type: 'count'; id: number; request: Pick<GenerationRequest, 'prompt' | 'messages' | 'enableThinking'> }
  /** Token counts of plain texts (no BOS, no template, special tokens as text): document chunks. */
  | { type: 'countEach'; id: number; texts: string[] }
  /** Token ids of a chat (template applied, as `generate` feeds it) or of a text (BOS only with `addSpecial`; special tokens' text parsed only with `parseSpecial`). */
  | { type: 'tokenize'; id: number; request: TokenizeRequest }
  /** The prompt text a chat renders to (chat template, or the transcript without one). */
  | { type: 'renderChat'; id: number; messages: ChatMessage[] }
  /** The text of token ids (special tokens skipped, as the engine's streamed text). */
  | { type: 'detokenize'; id: number; ids: number[] }
  | { type: 'reset'; id: number }
  | { type: 'stats'; id: number }
  /**
   * Stop: the worker cancels what runs, waits until no ONNX Runtime call is in flight (ending a
   * worker thread during a native run aborts the whole process), sends nothing more, and exits
   * with `exitCode`.
   */
  | { type: 'shutdown'; id: number; exitCode: number };

/** Reply to 'stats': the loaded engine's RoPE and KV cache counters right now. */
export interface EngineCacheStats {
  rope: RopeCacheStats;
  kv: KvCacheStats;
}

export type WorkerToHost =
  | ({ type: 'progress'; id: number; phase: string; fraction: number } & LoadProgressDetail)
  | { type: 'loaded'; id: number; info: ModelInfo }
  | { type: 'event'; id: number; event: GenerationEvent }
  | { type: 'result'; id: number; value: unknown }
  | { type: 'error'; id: number; error: SerializedEngineError }
  /** Several messages in one (token events coalesced by the worker, in order); `id` is 0. */
  | { type: 'batch'; id: 0; messages: WorkerToHost[] };
