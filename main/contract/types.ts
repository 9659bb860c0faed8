/**
 * The data that crosses between the window and the services (IPC or `serve` mode WebSocket).
 * Plain JSON-safe data only. Platform-free: imports nothing from Node, Electron or the DOM, so the
 * renderer can import it (as types) and so can the preload bundle.
 */
import type { MemoryFacts } from './memory-fit.ts';

export type Role = 'system' | 'user' | 'assistant';

/** How an answer ended; `streaming` while it is being generated. */
export type MessageStatus = 'complete' | 'streaming' | 'cancelled' | 'error';

/** Why an answer's latest text is not in the database yet (the window shows "not saved yet: <reason>"). */
export type NotSavedReason = 'disk full' | 'read-only' | 'disk error';

export type FinishReason = 'stop' | 'length' | 'context-full' | 'cancelled' | 'error';

/** Per-answer stats, shown under each assistant message. */
export interface AnswerStats {
  finishReason: FinishReason;
  promptTokens: number;
  generatedTokens: number;
  /** Of `generatedTokens`, those of the reasoning; absent: no reasoning. */
  reasoningTokens?: number;
  /** How long the model reasoned (first decode step to the end of the reasoning), ms; absent: no reasoning. */
  reasoningMs?: number;
  reusedTokens: number;
  /** Time to first token, ms. */
  ttftMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** Where ONNX Runtime ran it (absent for a remote engine, and in answers saved before it was kept). */
  executionProvider?: ExecutionProvider;
  /** Compute nodes ONNX Runtime placed on its CPU provider, measured once at load; null if unknown. */
  nodesOnCpu?: number | null;
  /**
   * With "use the relevant parts": the parts of each document the prompt held, e.g.
   * "rope.pdf: page 3 (chunk 5)"; absent when whole documents were used.
   */
  documentParts?: string[];
  /** For each of `documentParts`: its document and UTF-16 range in the document's text (the reader opens there). */
  documentRanges?: { documentId: string; start: number; end: number }[];
  /**
   * Set when the answer reached the max context and the context was shifted (rolling window):
   * how many times, and how many of the oldest tokens left the KV cache in all.
   */
  contextShift?: { shifts: number; droppedTokens: number };
  /** The model that wrote it (its name as the model card shows it); absent in answers saved before it was kept. */
  model?: string;
  /** The settings it was generated under (the chat's own, where it has them); absent in answers saved before they were kept. */
  settings?: AnswerSettings;
}

/** The generation settings an answer was written under, as its stats keep them (exports stamp each answer with its own). */
export type AnswerSettings = Pick<Settings, 'maxContext' | 'maxTokens' | 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty' | 'seed'>;

/** How a document goes into the prompt: its whole text, or the chunks most relevant to the question. */
export type DocumentFit = 'whole' | 'relevant';

/**
 * A stored document as a message (or the draft) carries it: how it is fitted into the prompt, and
 * the name of the file attached (absent: the stored document's). The store keeps one copy per
 * content, so two files with the same bytes share a document but each keeps its own name.
 */
export interface AttachedDocument {
  id: string;
  fit: DocumentFit;
  name?: string;
}

/** The kinds of file a document is extracted from. */
export const DOCUMENT_KINDS = ['text', 'markdown', 'code', 'pdf', 'docx', 'html', 'image'] as const;
export type DocumentKind = (typeof DOCUMENT_KINDS)[number];

/** A document as an exported conversation carries it, and an import brings it back (its text, not its file). */
export interface ExportedAttachment {
  name: string;
  kind: DocumentKind;
  /** SHA-256 of the file, hex. */
  hash: string;
  /** Its extracted text; null when it could not be read for the export (an import then leaves it out). */
  text: string | null;
}

/** What the window knows of an attached document (its text comes from `openDocument`). */
export interface DocumentInfo {
  id: string;
  name: string;
  kind: DocumentKind;
  /** File size, bytes. */
  size: number;
  /** SHA-256 of the file, hex. */
  hash: string;
  /** Tokens of the text alone for the loaded model (null: not counted yet). */
  tokens: number | null;
  /** True when `tokens` is measured, not counted: a text over 256 Ki characters, at the characters per token of its first 16 Ki. */
  tokensEstimated?: boolean;
  fit: DocumentFit;
  /** 1-based pages (an image: 1) whose text was read by OCR; absent when none. */
  ocrPages?: number[];
  /** 1-based PDF pages without any text (no text layer, OCR finding none): not in the text; absent when none. */
  pagesWithoutText?: number[];
}

/** A document with its extracted text and its parts (PDF pages, Markdown sections). */
export interface DocumentText extends DocumentInfo {
  text: string;
  parts: { label: string; start: number }[];
}

export interface Message {
  id: string;
  conversationId: string;
  role: Role;
  /** The answer (an assistant message's reasoning is apart, in `reasoning`). */
  content: string;
  /** An assistant message's reasoning (a reasoning model's thinking before the answer); absent: none. */
  reasoning?: string;
  status: MessageStatus;
  /** Assistant messages that finished (or were stopped): their stats. */
  stats: AnswerStats | null;
  /** Set when status is 'error': one readable sentence. */
  error: string | null;
  /** ms since the epoch. */
  createdAt: number;
  /** Documents this (user) message carries, in order (absent or empty: none). */
  documents?: DocumentInfo[];
  /**
   * Set when regenerate or edit left other versions at this message's place: their ids, oldest
   * first, this one included (the window shows ‹ i/n › and `selectBranch` switches).
   */
  branches?: string[];
  /**
   * Set while the answer's latest state is only in memory because the disk refused the write; the
   * services retry and clear it once it is saved (event `answerSaveState`). Absent: saved.
   */
  notSaved?: NotSavedReason;
}

export interface ConversationSummary {
  id: string;
  title: string;
  createdAt: number;
  updatedAt: number;
  /** In search results: the text around the first message that matched (absent when only the title did). */
  match?: string;
  /** This conversation's own context-full policy; absent: the `contextFullPolicy` setting applies. */
  contextFullPolicy?: ContextFullPolicy;
  /** This conversation's Think toggle (`enable_thinking` for a template that reads it); absent: the template's default. */
  thinking?: boolean;
  /** This conversation's own system prompt and sampler (each field absent: the setting applies); absent: none of its own. */
  chatSettings?: ChatSettings;
}

/**
 * A chat's own system prompt and sampler, stored with the conversation: each field present
 * overrides the setting of the same name for this chat (its prompt, its meter, its exports).
 */
export interface ChatSettings {
  systemPrompt?: string;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  /** Most tokens an answer may have (the reserve); below the max context. */
  maxTokens?: number;
}

/** A named system prompt the user saved (Settings → System prompt → Presets). */
export interface SystemPromptPreset {
  /** 1–80 characters, unique (case-insensitively) among the presets. */
  name: string;
  text: string;
}

export interface Conversation extends ConversationSummary {
  messages: Message[];
}

/**
 * What to do when the conversation no longer fits the max context: 'stop' (Send refuses),
 * 'truncate-middle' (keep the first exchange with its documents, leave out the oldest after it),
 * 'rolling-window' (leave out the oldest exchanges). The system prompt always stays.
 */
export type ContextFullPolicy = 'stop' | 'truncate-middle' | 'rolling-window';
export const CONTEXT_FULL_POLICIES = ['stop', 'truncate-middle', 'rolling-window'] as const satisfies readonly ContextFullPolicy[];

/** Where ONNX Runtime runs the model (main/engine/model/backend.ts has the same union). */
export type ExecutionProvider = 'cpu' | 'webgpu' | 'cuda';
/** The setting: a provider, or 'auto' (CUDA when it loads, else WebGPU on a GPU adapter, else CPU; each step down says why). */
export type ExecutionProviderPreference = 'auto' | ExecutionProvider;
export const EXECUTION_PROVIDER_PREFERENCES = ['auto', 'cpu', 'webgpu', 'cuda'] as const satisfies readonly ExecutionProviderPreference[];
/**
 * Quantization of a float model's Linear weights (and embedding) at import, as the CLI's
 * `--quantize`: 4- or 8-bit round-to-nearest blocks run as MatMulNBits, cached as a bundle of
 * their own. Weights already quantized (GGUF blocks) stay as stored.
 */
export type QuantizeOption = 'q4' | 'q8';
export const QUANTIZE_OPTIONS = ['q4', 'q8'] as const satisfies readonly QuantizeOption[];
/** The KV cache's element type (Settings.kvCacheDtype). */
export type KvCacheDtype = 'float32' | 'float16';
export const KV_CACHE_DTYPES = ['float32', 'float16'] as const satisfies readonly KvCacheDtype[];
/** The decoder backend: the native/ addon (falls back to js with a note when it cannot load) or onnxruntime-node's JS API. */
export type BackendPreference = 'native' | 'js';

export interface Settings {
  /** Bound on positions (prompt + answer); 0 < maxContext. */
  maxContext: number;
  /** Most tokens an answer may have (the reserve). */
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repetitionPenalty: number;
  /** null: a fresh random seed per answer. */
  seed: number | null;
  systemPrompt: string;
  /** Saved system prompts, chosen by name in the settings or a chat's settings (at most 100). */
  systemPromptPresets: SystemPromptPreset[];
  contextFullPolicy: ContextFullPolicy;
  /**
   * Memory for the KV caches of recently left conversations, MiB (0: none kept); the least
   * recently used is dropped first. Coming back to one reuses its cache instead of prefilling.
   */
  kvCacheBudgetMiB: number;
  executionProvider: ExecutionProviderPreference;
  backend: BackendPreference;
  /** ONNX Runtime's intra-op threads for the CPU work, 0–1024 (0: its default, one per physical core); a change reloads the model. */
  threads: number;
  /**
   * The KV cache's element type on the CPU (float16: half the bytes per position, so twice the
   * max context in the same memory, at some decode speed; the GPU graphs keep their own); a change
   * reloads the model.
   */
  kvCacheDtype: KvCacheDtype;
  /** Serve the OpenAI-compatible API of the loaded model on 127.0.0.1 (desktop app; off by default). */
  /** Ropewalk's own models folder ('' = the default, ~/.ropewalk/models). */
  modelsFolder: string;
  localServer: boolean;
  /** Its TCP port (0: any free one). */
  localServerPort: number;
  /** The one browser origin allowed to call it ('' = CORS off). */
  localServerCors: string;
}

/** The desktop app's local API server: where it answers, or why it does not. */
export interface LocalServerState {
  /** 'unavailable': this transport serves no separate API server (serve mode has /v1 at its own address). */
  status: 'unavailable' | 'off' | 'running' | 'error';
  /** e.g. `http://127.0.0.1:8756/v1` while running. */
  baseUrl: string | null;
  error: string | null;
}

export interface ModelInfo {
  name: string;
  architecture: string;
  trainedContext: number;
  maxContext: number;
  vocabSize: number;
  backend: BackendPreference;
  executionProvider: ExecutionProvider;
  /** Compute nodes ONNX Runtime placed on its CPU provider (0: the whole graph on the GPU), measured at load; null if unknown. */
  nodesOnCpu: number | null;
  /** The GPU's name where it can be had (CUDA: nvidia-smi; WebGPU on Linux: the Vulkan device); null otherwise. */
  adapter: string | null;
  /**
   * What differs from what was asked, one line (shown under the model facts): why the preferred
   * backend or execution provider is not the one in use, why a chosen quantization does not
   * apply (an already-quantized GGUF keeps its blocks); or null.
   */
  fallbackReason: string | null;
  hasChatTemplate: boolean;
  /** The chat template reads `enable_thinking` (Qwen3): the window offers a chat's Think toggle. Absent: false. */
  thinkingToggle?: boolean;
  /**
   * How the chat template writes tool calls (main/engine/tokenizer/tool-format.ts: `hermes`,
   * `llama3-json`, `mistral-v3`, `mistral-args`, `harmony`); absent: it takes no tools, or a remote engine.
   */
  toolFormat?: 'hermes' | 'llama3-json' | 'mistral-v3' | 'mistral-args' | 'harmony';
  /** Weight storage: formats with counts ("q4 (Q4_0) ×35, float32 ×13"), bundle size on disk, resident weight bytes. */
  weights: { formats: string; bundleBytes: number; residentBytes: number };
  /** The KV cache's element type; absent: a remote engine. */
  kvCacheDtype?: KvCacheDtype;
  /** Set when a remote engine answers (then backend, execution provider and weights mean nothing). */
  remote?: RemoteEngineInfo;
  /** The load's memory estimate in parts (memory-fit.ts judges another max context with it); absent: unknown (a remote engine). */
  memory?: MemoryFacts;
}

/** A remote engine (an OpenAI-compatible server) as the window sees it; never its API key. */
export interface RemoteEngineInfo {
  /** e.g. `http://127.0.0.1:8000/v1`. */
  baseUrl: string;
  model: string;
  /** How the meter counts: the server's /tokenize, a tokenizer.json, or an estimate (shown "≈"). */
  counting: 'server' | 'tokenizer' | 'estimate';
  /** Whether a key is kept, and how: encrypted on disk (desktop app) or in memory until the app stops (serve mode). */
  apiKey: 'none' | 'encrypted' | 'memory';
}

/** A model a remote server lists; its max context when the server says it. */
export interface RemoteModelEntry {
  id: string;
  maxContext: number | null;
}

export interface ModelState {
  status: 'loading' | 'ready' | 'error';
  /** The model answering now (kept while another one loads, and after a failed load). */
  info: ModelInfo | null;
  /** Import/load progress while loading. */
  progress: { phase: string; fraction: number } | null;
  /** Why the last load failed (the previous model, if any, is still loaded). */
  error: string | null;
}

export interface CacheUsage {
  capacity: number;
  bytes: number;
}

/**
 * The context budget of one conversation, in tokens, as the model will see it:
 *   used = system + documents + history + draft; total = used + reserve; fits = total ≤ maxContext,
 *   or, under the rolling-window policy, used < maxContext (the answer shifts the context when it
 *   reaches the max context, so the reserve need not fit).
 * `history` and `draft` exclude the documents their messages carry; `documents` counts them.
 * The meter's value is `used`; `fits` false means the next message will not fit.
 */
export interface ContextBudget {
  conversationId: string | null;
  maxContext: number;
  system: number;
  /** Documents in the history and attached to the draft, as counted in the prompt. */
  documents: number;
  history: number;
  draft: number;
  /** Reserved for the reply: the max new tokens setting. */
  reserve: number;
  used: number;
  total: number;
  fits: boolean;
  /** The engine's RoPE and KV caches right now. */
  rope: CacheUsage;
  kv: CacheUsage;
  /** Messages the context-full policy leaves out of the prompt ("not in context"), oldest first. */
  outOfContext: string[];
  /**
   * Tokens left out: of `outOfContext` (the prompt with them − the prompt as fed), and while an
   * answer shifts the context, of what the shifts dropped; 0 when nothing is left out.
   */
  droppedTokens: number;
  /**
   * Set when the next message does not fit (`fits` false): what would make it fit.
   * `rollingWindow`: the system prompt and this message (with its documents) fit without any of
   * the history, so a rolling window for this chat works; `shorterReply`: the largest reply
   * reserve (max new tokens) with which it fits, or null when no shorter reply does.
   */
  remedies?: { rollingWindow: boolean; shorterReply: number | null };
  /** The counts are an estimate (a remote engine with no tokenize endpoint and no tokenizer.json): the meter shows "≈". */
  estimated: boolean;
}

/** An error as it crosses the boundary: a stable code and one readable sentence. */
export interface WireError {
  code: string;
  message: string;
}
