/**
 * A remote engine: a model served by an OpenAI-compatible server (vLLM, llama.cpp's server,
 * Ollama, TGI, another Ropewalk's `serve`), behind the same `ChatEngine` interface as the local
 * worker, so the services stream, count and stop its answers the same way.
 *
 * - `connect` lists the server's models (`GET /v1/models`), checks the chosen id is there, and
 *   picks how to count tokens (token-counter.ts: the server's `/tokenize`, a tokenizer.json, or an
 *   estimate).
 * - `generate` POSTs `/v1/chat/completions` (messages) or `/v1/completions` (prompt) with
 *   `stream: true` and `stream_options.include_usage`, and turns the Server-Sent Events into the
 *   engine's events: one `token` per content chunk (id 0: a server sends text, not ids), its
 *   `reasoning_content` (vLLM, llama.cpp's server; `reasoning` in newer vLLM and Ollama) as
 *   reasoning deltas before the chunk's content, then
 *   `done` (a server that ignores `stream` and answers with one JSON body gives one chunk). Aborting the signal aborts the HTTP request (the server sees the connection close
 *   and stops) and ends with done{reason:'cancelled'} and the text so far. A stream that ends
 *   before the answer did (no finish_reason, no `[DONE]`), or carries an error object, ends with
 *   done{reason:'error'} and the partial text, saying why.
 * - Tools, tool choice, tool history, log-probabilities and response_format are relayed to the
 *   server; its tool_calls come back in done.toolCalls, its log-probabilities on the token events
 *   (relay.ts).
 * - Stats come from the server's `usage` when it sends one (else the counter and the chunks);
 *   TTFT and tokens/s are measured here, so they include the network.
 * Failures before the first event are thrown as RemoteEngineError (errors.ts).
 */
import { performance } from 'node:perf_hooks';
import type { ChatEngine, CountAccuracy } from '../engine-host/chat-engine.ts';
import type { EngineCacheStats } from '../engine-host/protocol.ts';
import type { ModelInfo } from '../engine/generate/engine.ts';
import type { PartDelta } from '../engine/generate/reasoning.ts';
import type { FinishReason, GenerationEvent, GenerationRequest, GenerationStats, ToolCallDelta } from '../engine/generate/types.ts';
import type { TokenLogprob } from '../engine/sampling/logprobs.ts';
import { InvalidOptionError } from '../engine/errors.ts';
import { RemoteEngineError } from './errors.ts';
import { normalizeBaseUrl, RemoteServer, serverSentData, wholeBody } from './http.ts';
import { relayedLogprobs, RelayedToolCalls, relayFields, wireMessage } from './relay.ts';
import { chooseCounter, type CountMethod, type TokenCounter } from './token-counter.ts';

/** What a remote engine is made from (the key is kept by the caller; see services/secrets.ts). */
export interface RemoteConfig {
  baseUrl: string;
  apiKey: string | null;
  /** The model id, one of the server's `/v1/models`. */
  model: string;
  /** A tokenizer.json (or its folder) to count with when the server has no tokenize endpoint. */
  tokenizerPath: string | null;
}

/** A model the server lists, with its max context when the server says it (vLLM `max_model_len`, llama.cpp `meta.n_ctx_train`). */
export interface RemoteModel {
  id: string;
  maxContext: number | null;
}

/** The max context assumed when neither `/v1/models` nor `/tokenize` says it, tokens. */
export const UNKNOWN_CONTEXT = 4096;

/** A remote engine's caches are the server's: none here. */
function noCaches(maxContext: number): EngineCacheStats {
  return {
    rope: { capacity: 0, rowsComputed: 0, growths: 0, bytes: 0, maxContext },
    kv: { capacity: 0, length: 0, growths: 0, bytes: 0, maxContext, windowCapacity: 0, windowBytes: 0, windowRowsDropped: 0 },
  };
}

/**
 * The server's models (`GET {baseUrl}/models`).
 * @throws RemoteEngineError: 'config' (bad URL), 'unreachable', 'auth', 'endpoint', 'bad-response'.
 */
export async function listRemoteModels(baseUrl: string, apiKey: string | null): Promise<RemoteModel[]> {
  const server = new RemoteServer(normalizeBaseUrl(baseUrl), apiKey);
  return listModels(server);
}

async function listModels(server: RemoteServer): Promise<RemoteModel[]> {
  const r = (await server.json('models', 'listing its models')) as { data?: unknown };
  if (!Array.isArray(r.data)) throw new RemoteEngineError('bad-response', `the remote engine at ${server.baseUrl} answered /models without a "data" list; is this an OpenAI-compatible server?`);
  return r.data
    .filter((m): m is { id: string } & Record<string, unknown> => typeof (m as { id?: unknown })?.id === 'string')
    .map((m) => {
      const n = m.max_model_len ?? (m.meta as { n_ctx_train?: unknown } | undefined)?.n_ctx_train;
      return { id: m.id, maxContext: typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : null };
    });
}

export class RemoteEngine implements ChatEngine {
  readonly model: ModelInfo;
  readonly countAccuracy: CountAccuracy;

  private constructor(
    private readonly server: RemoteServer,
    readonly modelId: string,
    private readonly counter: TokenCounter,
    maxContext: number | null,
  ) {
    const context = maxContext ?? UNKNOWN_CONTEXT;
    this.countAccuracy = counter.method === 'estimate' ? 'estimate' : 'exact';
    // The fields about local weights and backends have no meaning here; the window shows the
    // remote card instead (ModelInfo.remote in the contract).
    this.model = {
      name: modelId,
      architecture: 'remote',
      trainedContext: context,
      maxContext: context,
      vocabSize: 0,
      backend: 'js',
      executionProvider: 'cpu',
      nodesOnCpu: null,
      adapter: null,
      fallbackReason: maxContext === null ? `the server does not say its max context; ${UNKNOWN_CONTEXT} is assumed` : null,
      hasChatTemplate: true,
      toolFormat: null,
      // Identifies what counts were made with (BudgetService caches them by it).
      bundleDir: `remote:${server.baseUrl}#${modelId}#${counter.method}`,
      weights: { formats: 'on the server', bundleBytes: 0, residentBytes: 0 },
    };
  }

  /** The base URL (normalized). */
  get baseUrl(): string {
    return this.server.baseUrl;
  }

  /** How prompts are counted. */
  get countMethod(): CountMethod {
    return this.counter.method;
  }

  /**
   * Connects: lists the models, checks `config.model` is one, picks the token counter. `self`:
   * this Ropewalk's instance id (a server answering with it is this Ropewalk itself).
   * @throws RemoteEngineError: 'config' (bad URL, itself), 'unreachable', 'auth', 'endpoint', 'model' (listing the ids it has), 'bad-response'.
   */
  static async connect(config: RemoteConfig, self: string | null = null): Promise<RemoteEngine> {
    const server = new RemoteServer(normalizeBaseUrl(config.baseUrl), config.apiKey || null);
    const models = await listModels(server);
    // Its own API as its engine would wait on itself forever (each answer queued behind itself).
    if (self !== null && server.instance === self) {
      throw new RemoteEngineError('config', `${server.baseUrl} is this Ropewalk's own API; a remote engine must be another server`);
    }
    const listed = models.find((m) => m.id === config.model);
    if (!listed) {
      const ids = models.map((m) => JSON.stringify(m.id)).slice(0, 10).join(', ');
      throw new RemoteEngineError('model', `the remote engine at ${server.baseUrl} has no model ${JSON.stringify(config.model)}${ids ? ` (it has ${ids})` : ' (it lists none)'}; pick one of its models`);
    }
    const counter = await chooseCounter(server, config.model, config.tokenizerPath);
    return new RemoteEngine(server, config.model, counter, listed.maxContext ?? counter.maxModelLen);
  }

  countTokens(request: Pick<GenerationRequest, 'prompt' | 'messages' | 'enableThinking'>): Promise<number> {
    return this.counter.count(request);
  }

  countEach(texts: string[]): Promise<number[]> {
    return texts.length === 0 ? Promise.resolve([]) : this.counter.countEach(texts);
  }

  async stats(): Promise<EngineCacheStats> {
    return noCaches(this.model.maxContext);
  }

  /** @throws RemoteEngineError 'config': token ids belong to the server; ask it. */
  async tokenize(): Promise<number[]> {
    throw this.idsElsewhere();
  }

  /** @throws RemoteEngineError 'config': token ids belong to the server; ask it. */
  async detokenize(): Promise<string> {
    throw this.idsElsewhere();
  }

  /** @throws RemoteEngineError 'config': the template is the server's; ask it. */
  async renderChat(): Promise<string> {
    throw this.idsElsewhere();
  }

  private idsElsewhere(): RemoteEngineError {
    return new RemoteEngineError('config', `this Ropewalk's engine is remote (${this.server.baseUrl}); ask that server for token ids and its chat template`);
  }

  /**
   * Tools, tool choice and log-probabilities go to the server (relay.ts); a local reply prefix
   * cannot (it is this engine's way of forcing a call: a caller must pass `toolChoice`).
   * @throws InvalidOptionError before any event for `replyPrefix`.
   */
  async *generate(request: GenerationRequest, opts: { signal?: AbortSignal } = {}): AsyncGenerator<GenerationEvent> {
    if (request.replyPrefix) throw new InvalidOptionError('request', 'a reply prefix is not relayed to a remote engine; pass toolChoice to force a tool call');
    const started = performance.now();
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.signal?.aborted) ac.abort();
    const chat = request.messages !== undefined;
    const run: Run = { text: '', reasoning: '', chunks: 0, reasoningChunks: 0, firstAt: null, reasoningEndAt: null, finish: null, usage: null, calls: new RelayedToolCalls(), toolDeltas: [], logprobs: [] };
    try {
      let res: Response;
      try {
        res = await this.server.stream(chat ? 'chat/completions' : 'completions', 'answering', this.body(request), ac.signal, this.modelId);
      } catch (e) {
        if (ac.signal.aborted) return yield await this.done(request, run, started, 'cancelled');
        throw e;
      }
      let ended: 'done' | 'cut' = 'cut';
      let failure: string | null = null;
      // A server that ignores `stream: true` answers with one JSON body: the same fields, whole.
      const whole = !/text\/event-stream/i.test(res.headers.get('content-type') ?? '');
      try {
        for await (const data of whole ? wholeBody(res) : serverSentData(res.body!)) {
          if (data === '[DONE]') {
            ended = 'done';
            break;
          }
          // One chunk ≈ one token: a chunk with reasoning and content counts once (id −1 on the second).
          const got = run.logprobs.length;
          const deltas = this.takeChunk(data, chat, run);
          for (const toolCall of run.toolDeltas.splice(0)) yield { type: 'token', id: -1, text: '', part: 'content', toolCall };
          // A chunk's log-probabilities ride on its token events; more entries than deltas on text-less ones (id −1).
          const lps = run.logprobs.slice(got);
          for (let i = 0; i < Math.max(deltas.length, lps.length); i++) {
            const logprob = lps[i];
            yield { type: 'token', id: i === 0 ? 0 : -1, text: deltas[i]?.text ?? '', part: deltas[i]?.part ?? 'content', ...(logprob ? { logprob } : {}) };
          }
        }
      } catch (e) {
        if (ac.signal.aborted) return yield await this.done(request, run, started, 'cancelled');
        failure = e instanceof RemoteEngineError ? e.message : `the remote engine's stream was cut after ${run.chunks} chunks (${describeCut(e)}); the partial answer is kept, send again to retry`;
      }
      if (failure === null && ended === 'cut' && run.finish === null) {
        failure = `the remote engine's stream ended before the answer did, after ${run.chunks} chunks; the partial answer is kept, send again to retry`;
      }
      yield await this.done(request, run, started, failure === null ? finishOf(run.finish) : 'error', failure);
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      ac.abort(); // a consumer that stopped early closes the connection
    }
  }

  /** The request body: the engine's request in OpenAI's (and llama.cpp's / vLLM's) fields. */
  private body(r: GenerationRequest): Record<string, unknown> {
    const s = r.sampler;
    return {
      model: this.modelId,
      ...(r.messages !== undefined ? { messages: r.messages.map(wireMessage) } : { prompt: r.prompt }),
      // vLLM's and llama.cpp's servers pass these to the chat template.
      ...(r.enableThinking !== undefined ? { chat_template_kwargs: { enable_thinking: r.enableThinking } } : {}),
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: r.maxTokens,
      ...(s.temperature !== undefined ? { temperature: s.temperature } : {}),
      ...(s.topP !== undefined ? { top_p: s.topP } : {}),
      ...(s.topK ? { top_k: s.topK } : {}),
      ...(s.minP ? { min_p: s.minP } : {}),
      ...(s.repetitionPenalty !== undefined && s.repetitionPenalty !== 1 ? { repeat_penalty: s.repetitionPenalty, repetition_penalty: s.repetitionPenalty } : {}),
      ...(s.presencePenalty ? { presence_penalty: s.presencePenalty } : {}),
      ...(s.frequencyPenalty ? { frequency_penalty: s.frequencyPenalty } : {}),
      ...(s.seed !== undefined ? { seed: s.seed } : {}),
      ...(r.stop?.length ? { stop: r.stop } : {}),
      ...(r.ignoreEos ? { ignore_eos: true } : {}),
      // Constrained output is the remote server's to enforce (OpenAI's own field and shape).
      ...relayFields(r, r.messages !== undefined),
      ...(r.responseFormat?.type === 'json_object' ? { response_format: r.responseFormat } : {}),
      ...(r.responseFormat?.type === 'json_schema' ? { response_format: { type: 'json_schema', json_schema: { name: 'response', schema: r.responseFormat.schema, strict: true } } } : {}),
    };
  }

  /** Reads one event's JSON into `run`; returns its reasoning and content text. @throws RemoteEngineError for an error event or bad JSON. */
  private takeChunk(data: string, chat: boolean, run: Run): PartDelta[] {
    let j: {
      choices?: { delta?: WireParts; message?: WireParts; text?: unknown; finish_reason?: unknown; logprobs?: unknown }[];
      usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; completion_tokens_details?: { reasoning_tokens?: unknown } | null } | null;
      error?: { message?: unknown };
    };
    try {
      j = JSON.parse(data);
    } catch {
      throw new RemoteEngineError('bad-response', `the remote engine sent a stream event that is not JSON (${JSON.stringify(data.slice(0, 80))}); the partial answer is kept`);
    }
    if (j.error) {
      const said = typeof j.error.message === 'string' ? j.error.message.split('\n')[0].slice(0, 200) : 'no reason given';
      throw new RemoteEngineError('server', `the remote engine failed mid-answer (${said}); the partial answer is kept, send again to retry`);
    }
    const usage = j.usage;
    if (usage && typeof usage.prompt_tokens === 'number' && typeof usage.completion_tokens === 'number') {
      const r = usage.completion_tokens_details?.reasoning_tokens;
      run.usage = { prompt: usage.prompt_tokens, completion: usage.completion_tokens, reasoning: typeof r === 'number' ? r : null };
    }
    const c = j.choices?.[0];
    if (typeof c?.finish_reason === 'string') run.finish = c.finish_reason;
    const parts = chat ? (c?.delta ?? c?.message) : undefined;
    run.toolDeltas.push(...run.calls.take(parts?.tool_calls));
    run.logprobs.push(...relayedLogprobs(c?.logprobs));
    const out: PartDelta[] = [];
    const thought = parts?.reasoning_content ?? parts?.reasoning;
    if (typeof thought === 'string' && thought !== '') {
      out.push({ part: 'reasoning', text: thought });
      run.reasoning += thought;
      run.reasoningChunks++;
      run.reasoningEndAt = performance.now();
    }
    const piece = chat ? parts?.content : c?.text;
    if (typeof piece === 'string' && piece !== '') {
      out.push({ part: 'content', text: piece });
      run.text += piece;
    }
    if (out.length) {
      run.firstAt ??= performance.now();
      run.chunks++;
    }
    return out;
  }

  private async done(request: GenerationRequest, run: Run, started: number, reason: FinishReason, failure: string | null = null): Promise<GenerationEvent> {
    const end = performance.now();
    const promptTokens = run.usage?.prompt ?? (await this.countTokens(request).catch(() => 0));
    const generated = run.usage?.completion ?? run.chunks;
    const ttftMs = run.firstAt === null ? 0 : run.firstAt - started;
    const decodeSeconds = run.firstAt === null ? 0 : (end - run.firstAt) / 1000;
    const stats: GenerationStats = {
      backend: 'remote',
      executionProvider: 'remote',
      nodesOnCpu: null,
      promptTokens,
      generatedTokens: generated,
      reasoningTokens: run.usage?.reasoning ?? run.reasoningChunks,
      reasoningMs: run.reasoningEndAt !== null && run.firstAt !== null ? run.reasoningEndAt - run.firstAt : 0,
      reusedTokens: 0,
      prefilledTokens: run.firstAt === null ? 0 : promptTokens,
      ttftMs,
      prefillTokensPerSec: ttftMs > 0 ? promptTokens / (ttftMs / 1000) : 0,
      decodeTokensPerSec: generated > 1 && decodeSeconds > 0 ? (generated - 1) / decodeSeconds : 0,
      contextUsed: promptTokens + generated,
      maxContext: this.model.maxContext,
      contextShifts: 0, // the server manages its own context
      droppedTokens: 0,
      rope: { capacity: 0, growths: 0, bytes: 0, rowsComputed: 0 },
      kv: { capacity: 0, growths: 0, bytes: 0 },
    };
    const calls = run.calls.all;
    return {
      type: 'done', reason, text: run.text, reasoning: run.reasoning, promptTokens: [], tokens: [], stats,
      ...(calls.length ? { toolCalls: calls } : {}),
      ...(request.logprobs !== undefined ? { logprobs: run.logprobs } : {}),
      ...(failure ? { error: { code: 'REMOTE', message: failure } } : {}),
    };
  }
}

/** What a streamed answer has brought so far. */
interface Run {
  text: string;
  reasoning: string;
  /** Chunks with text (≈ tokens: servers send one token per chunk, held-back stop text aside). */
  chunks: number;
  /** Chunks with reasoning text (the reasoning tokens when the usage does not say). */
  reasoningChunks: number;
  firstAt: number | null;
  /** When the last reasoning chunk came, ms (performance.now()). */
  reasoningEndAt: number | null;
  finish: string | null;
  usage: { prompt: number; completion: number; reasoning: number | null } | null;
  calls: RelayedToolCalls;
  /** The last chunk's tool_calls deltas, to stream on. */
  toolDeltas: ToolCallDelta[];
  logprobs: TokenLogprob[];
}

/** A chunk's delta (or a whole answer's message) as servers send it. */
interface WireParts {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: unknown;
}

/** OpenAI's finish_reason → the engine's ('length' is the only one that is not a stop). */
function finishOf(reason: string | null): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}

/** Why a body read failed, in words (undici: "terminated" with "other side closed"). */
function describeCut(e: unknown): string {
  const cause = (e as { cause?: { message?: string; code?: string } }).cause;
  return cause?.code === 'UND_ERR_SOCKET' || /other side closed/.test(cause?.message ?? '') ? 'the server closed the connection' : (cause?.message ?? (e instanceof Error ? e.message : String(e)));
}
