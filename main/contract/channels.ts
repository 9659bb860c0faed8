/**
 * The IPC contract: every method the window may call, with its zod request schema and response
 * type, and every event the services push. One table, two transports: the Electron preload
 * bridge (`ipcRenderer.invoke('ropewalk:<method>')`) and the `serve` mode WebSocket. Requests are
 * validated with these schemas in main before any handler runs.
 *
 * Platform-free: zod and types only.
 */
import { z } from 'zod';
import { CONTEXT_FULL_POLICIES, DOCUMENT_KINDS, EXECUTION_PROVIDER_PREFERENCES, KV_CACHE_DTYPES, QUANTIZE_OPTIONS } from './types.ts';
import { ORIGIN_RULE, parseOrigin } from './origin.ts';
import { MAX_DOCUMENT_BYTES } from './limits.ts';
import type {
  ContextBudget,
  Conversation,
  LocalServerState,
  DocumentInfo,
  DocumentText,
  ConversationSummary,
  Message,
  NotSavedReason,
  ModelState,
  RemoteModelEntry,
  Settings,
} from './types.ts';
import type { ModelLibrary } from './library.ts';
import type { EventName, MethodName } from './names.ts';

export * from './names.ts';

const id = z.string().min(1).max(64);
const text = z.string().max(1_000_000);
/** Documents attached to a message, in order, each whole or cut to the relevant parts when it does not fit. */
const attachedDocuments = z.array(z.object({ id, fit: z.enum(['whole', 'relevant']), name: z.string().trim().min(1).max(255).optional() }).strict()).max(16);
export { MAX_DOCUMENT_BYTES };
/** Base64 of a file one byte over the limit: it reaches the service and gets the error naming the limit. */
const MAX_ATTACHMENT_BASE64 = Math.ceil((MAX_DOCUMENT_BYTES + 1) / 3) * 4;

const count = z.number().int().min(0).max(1 << 30);
const rate = z.number().min(0).max(1e9);
/** An answer's stats as an exported file carries them. */
const answerStatsSchema = z
  .object({
    finishReason: z.enum(['stop', 'length', 'context-full', 'cancelled', 'error']),
    promptTokens: count,
    generatedTokens: count,
    reasoningTokens: count.optional(),
    reasoningMs: rate.optional(),
    reusedTokens: count,
    ttftMs: rate,
    prefillTokensPerSec: rate,
    decodeTokensPerSec: rate,
    documentParts: z.array(z.string().max(1000)).max(1000).optional(),
    documentRanges: z.array(z.object({ documentId: id, start: count, end: count }).strict()).max(1000).optional(),
    contextShift: z.object({ shifts: count, droppedTokens: count }).strict().optional(),
    // Every answer since they were kept has these: without them a real answer's export did not import back.
    executionProvider: z.enum(['cpu', 'webgpu', 'cuda']).optional(),
    nodesOnCpu: count.nullable().optional(),
    model: z.string().max(500).optional(),
    settings: z
      .object({
        maxContext: count,
        maxTokens: count,
        temperature: rate,
        topK: count,
        topP: rate,
        minP: rate,
        repetitionPenalty: rate,
        seed: z.number().int().min(0).max(2 ** 32 - 1).nullable(),
      })
      .strict()
      .optional(),
  })
  .strict();

export const settingsPatchSchema = z
  .object({
    maxContext: z.number().int().min(16).max(1 << 20),
    maxTokens: z.number().int().min(1).max(1 << 20),
    temperature: z.number().min(0).max(100),
    topK: z.number().int().min(0).max(1 << 20),
    topP: z.number().min(0).max(1), // 0: the most likely token alone (the sampler's rule)
    minP: z.number().min(0).lt(1),
    repetitionPenalty: z.number().gt(0).max(10),
    seed: z.number().int().min(0).max(2 ** 32 - 1).nullable(),
    systemPrompt: z.string().max(100_000),
    /** Named system prompts; names unique case-insensitively (the error quotes the repeated one). */
    systemPromptPresets: z
      .array(z.object({ name: z.string().trim().min(1).max(80), text: z.string().max(100_000) }).strict())
      .max(100)
      .superRefine((presets, ctx) => {
        const seen = new Set<string>();
        for (const p of presets) {
          const key = p.name.toLowerCase();
          if (seen.has(key)) ctx.addIssue({ code: 'custom', message: `two system prompt presets are named ${JSON.stringify(p.name)}; a name must be unique` });
          seen.add(key);
        }
      }),
    contextFullPolicy: z.enum(CONTEXT_FULL_POLICIES),
    kvCacheBudgetMiB: z.number().int().min(0).max(1 << 20),
    executionProvider: z.enum(EXECUTION_PROVIDER_PREFERENCES),
    backend: z.enum(['native', 'js']),
    threads: z.number().int().min(0).max(1024),
    kvCacheDtype: z.enum(KV_CACHE_DTYPES),
    /** Ropewalk's own models folder, listed by the library ('' = the default, ~/.ropewalk/models). */
    modelsFolder: z.string().max(4096),
    localServer: z.boolean(),
    localServerPort: z.number().int().min(0).max(65535),
    /** '' = CORS off; an origin is stored as browsers send it (see origin.ts). */
    localServerCors: z
      .string()
      .max(200)
      .transform((v, ctx) => {
        if (v.trim() === '') return '';
        const origin = parseOrigin(v);
        if (origin === null) ctx.addIssue({ code: 'custom', message: `the allowed origin must be ${ORIGIN_RULE}, or empty for none; got ${JSON.stringify(v)}` });
        return origin ?? v;
      }),
  })
  .partial()
  .strict();

/**
 * A chat's own system prompt and sampler (main/contract/types.ts ChatSettings): the same ranges
 * as the settings; a field left out follows the setting.
 */
export const chatSettingsSchema = settingsPatchSchema.pick({
  systemPrompt: true,
  temperature: true,
  topK: true,
  topP: true,
  minP: true,
  repetitionPenalty: true,
  maxTokens: true,
});

const remoteUrl = z.string().trim().min(1).max(2000);
const apiKey = z.string().max(4096).regex(/^[\x21-\x7e]*$/, 'an API key is printable ASCII without spaces');

/** Request schemas, by method name. */
export const requestSchemas = {
  listConversations: z.object({ search: z.string().max(200).optional() }).strict(),
  createConversation: z.object({ title: z.string().max(200).optional() }).strict(),
  getConversation: z.object({ id }).strict(),
  renameConversation: z.object({ id, title: z.string().trim().min(1).max(200) }).strict(),
  /** This conversation's own context-full policy; null: follow the setting. */
  setConversationPolicy: z.object({ id, policy: z.enum(CONTEXT_FULL_POLICIES).nullable() }).strict(),
  /** A chat's Think toggle: `enable_thinking` for a template that reads it; null: the template's default. */
  setConversationThinking: z.object({ id, thinking: z.boolean().nullable() }).strict(),
  /** A chat's own system prompt and sampler, replacing what it had ({}: none, every setting applies). */
  setConversationSettings: z.object({ id, settings: chatSettingsSchema }).strict(),
  deleteConversation: z.object({ id }).strict(),
  /** Appends a user message and starts the answer; tokens follow as `answerDelta` events. */
  sendMessage: z
    .object({ conversationId: id, content: text.refine((s) => s.trim().length > 0, 'the message is empty'), documents: attachedDocuments.optional() })
    .strict(),
  /** Stops the answer being generated in this conversation (it is kept, marked cancelled). */
  stopGeneration: z.object({ conversationId: id }).strict(),
  /** Replaces the last assistant answer with a new one. */
  regenerate: z.object({ conversationId: id }).strict(),
  /** Replaces a user message's text, drops everything after it, and answers again. */
  editMessage: z.object({ conversationId: id, messageId: id, content: text.refine((s) => s.trim().length > 0, 'the message is empty') }).strict(),
  /** Continues the last answer, which ended at max new tokens, in the same message; tokens follow as `answerDelta` events. */
  continueAnswer: z.object({ conversationId: id, messageId: id }).strict(),
  /** Replaces an answer's text as a new version at its place (the earlier one stays as a branch); returns the conversation. */
  editAnswer: z.object({ conversationId: id, messageId: id, content: text.refine((s) => s.trim().length > 0, 'the answer is empty') }).strict(),
  /** Deletes a message with its answer (a user message takes the answers after it); returns the conversation. */
  deleteMessage: z.object({ conversationId: id, messageId: id }).strict(),
  /** The context budget of a conversation (null: a new one) with this draft. */
  getBudget: z.object({ conversationId: id.nullable(), draft: text, documents: attachedDocuments.optional() }).strict(),
  /** Extracts and stores a file (base64 bytes); its text then goes with a message that carries it. */
  attachDocument: z.object({ name: z.string().trim().min(1).max(255), data: z.string().max(MAX_ATTACHMENT_BASE64).base64() }).strict(),
  stopAttaching: z.object({ name: z.string().trim().min(1).max(255) }).strict(),
  /** A stored document with its extracted text. */
  openDocument: z.object({ id }).strict(),
  getSettings: z.object({}).strict(),
  updateSettings: settingsPatchSchema,
  getModel: z.object({}).strict(),
  /** The desktop app's local API server (the Local server setting). */
  getLocalServer: z.object({}).strict(),
  /**
   * Imports/loads a model from a path on this machine (llama2.c file, HF folder, GGUF file,
   * bundle); `quantize` imports its float Linear weights as 4- or 8-bit blocks (null: as stored;
   * absent: the choice remembered for this model, else as stored).
   */
  openModel: z.object({ path: z.string().min(1).max(4096), quantize: z.enum(QUANTIZE_OPTIONS).nullable().optional() }).strict(),
  /** The models an OpenAI-compatible server lists (`apiKey` omitted: the one saved for that URL). */
  listRemoteModels: z.object({ baseUrl: remoteUrl, apiKey: apiKey.optional() }).strict(),
  /**
   * Makes a remote engine answer: `apiKey` omitted keeps the one saved for that URL, '' means
   * none; `tokenizerPath` counts tokens when the server has no /tokenize. openModel goes back to a local model.
   */
  connectRemote: z.object({ baseUrl: remoteUrl, model: z.string().trim().min(1).max(500), apiKey: apiKey.optional(), tokenizerPath: z.string().max(4096).optional() }).strict(),
  /** Shows another version of a message (regenerated or edited) and what followed it; the conversation after. */
  selectBranch: z.object({ conversationId: id, messageId: id }).strict(),
  /** Creates a conversation from an exported file's messages (their stats kept); the new conversation. */
  importConversation: z
    .object({
      title: z.string().trim().min(1).max(200),
      messages: z
        .array(
          z
            .object({
              role: z.enum(['system', 'user', 'assistant']),
              content: text,
              reasoning: text.optional(),
              status: z.enum(['complete', 'cancelled', 'error']),
              stats: answerStatsSchema.nullable(),
              error: z.string().max(10_000).nullable(),
              /** A user message's documents, as an export carries them: their text comes back, their page labels do not. */
              attachments: z
                .array(z.object({ name: z.string().trim().min(1).max(255), kind: z.enum(DOCUMENT_KINDS), hash: z.string().regex(/^[0-9a-f]{64}$/), text: text.nullable() }).strict())
                .max(16)
                .optional(),
            })
            .strict(),
        )
        .max(100_000),
    })
    .strict(),
  /** The models on this machine (Ropewalk's folder and, read-only, LM Studio's, Ollama's, Jan's, the HF cache's) and the recent ones. */
  listModels: z.object({}).strict(),
  /** A model file chosen in the desktop app's native file dialog (`available` false in serve mode: type the path). */
  chooseModelFile: z.object({}).strict(),
} as const satisfies Record<MethodName, z.ZodType>;

/** Response type of each method. */
export interface ResponseTypes extends Record<MethodName, unknown> {
  listConversations: ConversationSummary[];
  createConversation: Conversation;
  getConversation: Conversation;
  renameConversation: ConversationSummary;
  setConversationPolicy: ConversationSummary;
  setConversationThinking: ConversationSummary;
  setConversationSettings: ConversationSummary;
  deleteConversation: null;
  sendMessage: { userMessage: Message; assistantMessage: Message };
  stopGeneration: null;
  regenerate: { assistantMessage: Message };
  editMessage: { userMessage: Message; assistantMessage: Message };
  continueAnswer: { assistantMessage: Message };
  editAnswer: Conversation;
  deleteMessage: Conversation;
  getBudget: ContextBudget;
  attachDocument: DocumentInfo;
  /** Stops the attaches of files of that name in progress (they fail with DOCUMENT_CANCELLED); null. */
  stopAttaching: null;
  openDocument: DocumentText;
  getSettings: Settings;
  updateSettings: Settings;
  getModel: ModelState;
  getLocalServer: LocalServerState;
  openModel: ModelState;
  listRemoteModels: { models: RemoteModelEntry[] };
  connectRemote: ModelState;
  selectBranch: Conversation;
  importConversation: Conversation;
  listModels: ModelLibrary;
  /** `path` null: cancelled, or no dialog in this transport (`available` false). */
  chooseModelFile: { available: boolean; path: string | null };
}

export type RequestOf<M extends MethodName> = z.input<(typeof requestSchemas)[M]>;
export type ResponseOf<M extends MethodName> = ResponseTypes[M];

/** The handler of every method, with the request already validated (what the services provide). */
export type Handlers = { [M in MethodName]: (request: RequestOf<M>) => Promise<ResponseOf<M>> };

/** Events the services push to every window. */
export interface EventTypes {
  /**
   * New answer text (batched: at most one per ~16 ms per answer). `text`: the answer's new text;
   * `reasoning`: the reasoning's (absent: none in this delta); `generatedTokens`: the answer's so
   * far; `tokensPerSec`: the decode speed so far (answer-stream.ts DecodeRate; absent before two tokens).
   */
  answerDelta: { conversationId: string; messageId: string; text: string; reasoning?: string; generatedTokens: number; tokensPerSec?: number };
  /** The answer waits for the engine (an API request is being answered); `ahead`: requests before it. */
  answerWaiting: { conversationId: string; messageId: string; ahead: number };
  /** Prompt prefill progress of an answer. */
  answerPrefill: { conversationId: string; messageId: string; processed: number; total: number };
  /** The answer ended (complete, cancelled or error); the final message with its stats. */
  answerDone: { conversationId: string; message: Message };
  /** The answer's save state changed: `notSaved` a reason while the disk refuses its writes (kept in memory, retried), null once saved. */
  answerSaveState: { conversationId: string; messageId: string; notSaved: NotSavedReason | null };
  /** The context budget changed (answer grew, settings changed, model reloaded). */
  budgetChanged: ContextBudget;
  modelState: ModelState;
  /** The conversation list changed (created, renamed, deleted, title set). */
  conversationsChanged: { conversations: ConversationSummary[] };
  /** Extraction progress of a large file being attached (per PDF page; 0…1), then of its OCR (phase 'ocr'). */
  documentProgress: { name: string; fraction: number; phase?: 'ocr' };
}

// Every event name has a payload type, and every payload type a name.
type _EventsMatch = [EventName] extends [keyof EventTypes] ? ([keyof EventTypes] extends [EventName] ? true : never) : never;
const _eventsMatch: _EventsMatch = true;
void _eventsMatch;

/**
 * What `window.ropewalk` is, in both transports: one async function per method, and `on` for
 * events (returns an unsubscribe function). Errors reject with an Error whose `code` is set.
 */
export type RopewalkApi = {
  [M in MethodName]: (request: RequestOf<M>) => Promise<ResponseOf<M>>;
} & {
  on<E extends EventName>(event: E, listener: (payload: EventTypes[E]) => void): () => void;
};
