/**
 * How a remote engine's prompts are counted for the context meter, best first:
 *   1. 'server': the server's own `POST /tokenize` (beside `/v1`), probed once at connect:
 *      vLLM's shape `{ model, prompt | messages } → { tokens, count, max_model_len }` (Ropewalk's
 *      serve answers it too), else llama.cpp's `{ content } → { tokens }` with its
 *      `POST /apply-template { messages } → { prompt }` for chats. Exact.
 *   2. 'tokenizer': a `tokenizer.json` the user points to (with `tokenizer_config.json` beside it
 *      for the chat template and BOS), through the engine's TextTokenizer (@huggingface/tokenizers).
 *      Exact when it is the served model's tokenizer and template.
 *   3. 'estimate': about 4 characters per token plus a few per message. The meter marks it "≈".
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { ChatMessage } from '../engine/generate/types.ts';
import { TextTokenizer } from '../engine/tokenizer/tokenizer.ts';
import { RemoteEngineError } from './errors.ts';
import type { RemoteServer } from './http.ts';

export type CountMethod = 'server' | 'tokenizer' | 'estimate';

/** What is counted: a raw prompt or chat messages (the engine's GenerationRequest forms). */
export type CountRequest = { prompt?: string; messages?: ChatMessage[]; enableThinking?: boolean };

/** Counts a remote engine's tokens. */
export interface TokenCounter {
  readonly method: CountMethod;
  /** The server's max context as its tokenize endpoint reports it (vLLM `max_model_len`), if known. */
  readonly maxModelLen: number | null;
  /** Tokens of a prompt as the model will see it (chat template and BOS included). */
  count(request: CountRequest, signal?: AbortSignal): Promise<number>;
  /** Tokens of plain texts (no BOS, no template), in order. */
  countEach(texts: string[]): Promise<number[]>;
}

/** Requests at once when counting many texts on the server. */
const COUNT_CONCURRENCY = 4;
/** The estimate's characters per token (English prose with BPE vocabularies of 32K–150K). */
const CHARS_PER_TOKEN = 4;
/** The estimate's tokens per chat message for role markers and separators. */
const TOKENS_PER_MESSAGE = 4;

/**
 * Picks the best counter: the server's tokenize endpoint if it answers, else `tokenizerPath`,
 * else the estimate.
 * @throws RemoteEngineError 'auth' / 'unreachable' from the probe (they would fail chats too);
 *   'config' for a tokenizer file that cannot be read.
 */
export async function chooseCounter(server: RemoteServer, model: string, tokenizerPath: string | null): Promise<TokenCounter> {
  const fromServer = await probeServer(server, model);
  if (fromServer) return fromServer;
  if (tokenizerPath) return tokenizerCounter(tokenizerPath);
  return estimateCounter();
}

/** Whether a probe's failure means "no such endpoint here" (try the next way) rather than a real fault. */
function isAbsent(e: unknown): boolean {
  return e instanceof RemoteEngineError && e.kind !== 'auth' && e.kind !== 'unreachable';
}

async function probeServer(server: RemoteServer, model: string): Promise<TokenCounter | null> {
  try {
    const r = (await server.json('/tokenize', 'counting tokens', { model, prompt: 'Hello' }, { model })) as { tokens?: unknown; count?: unknown; max_model_len?: unknown };
    if (Array.isArray(r.tokens) && typeof r.count === 'number') return vllmCounter(server, model, typeof r.max_model_len === 'number' ? r.max_model_len : null);
  } catch (e) {
    if (!isAbsent(e)) throw e;
  }
  try {
    const r = (await server.json('/tokenize', 'counting tokens', { content: 'Hello' })) as { tokens?: unknown };
    const t = (await server.json('/apply-template', 'applying the chat template', { messages: [{ role: 'user', content: 'Hello' }] })) as { prompt?: unknown };
    if (Array.isArray(r.tokens) && typeof t.prompt === 'string') return llamaCppCounter(server);
  } catch (e) {
    if (!isAbsent(e)) throw e;
  }
  return null;
}

/** vLLM's shape (and Ropewalk's): the server renders chats itself. */
export function vllmCounter(server: RemoteServer, model: string, maxModelLen: number | null): TokenCounter {
  const tokenize = async (body: Record<string, unknown>, signal?: AbortSignal) => {
    const r = (await server.json('/tokenize', 'counting tokens', { model, ...body }, { model, signal })) as { count?: unknown };
    if (typeof r.count !== 'number') throw new RemoteEngineError('bad-response', `the remote engine at ${server.baseUrl} answered /tokenize without a count`);
    return r.count;
  };
  return {
    method: 'server',
    maxModelLen,
    count: (req, signal) => tokenize(req.messages ? { messages: req.messages, add_generation_prompt: true } : { prompt: req.prompt ?? '' }, signal),
    countEach: (texts) => mapLimited(texts, (prompt) => tokenize({ prompt, add_special_tokens: false })),
  };
}

/** llama.cpp's shape; a rendered chat or prompt is tokenized as its server feeds it (BOS, special tokens parsed), plain texts as text. */
export function llamaCppCounter(server: RemoteServer): TokenCounter {
  const tokenize = async (content: string, addSpecial: boolean, signal?: AbortSignal) => {
    const r = (await server.json('/tokenize', 'counting tokens', { content, add_special: addSpecial, parse_special: addSpecial }, { signal })) as { tokens?: unknown };
    if (!Array.isArray(r.tokens)) throw new RemoteEngineError('bad-response', `the remote engine at ${server.baseUrl} answered /tokenize without tokens`);
    return r.tokens.length;
  };
  return {
    method: 'server',
    maxModelLen: null,
    async count(req, signal) {
      if (!req.messages) return tokenize(req.prompt ?? '', true, signal);
      // The Think toggle as the server's template gets it when answering (llama.cpp reads chat_template_kwargs here too).
      const kwargs = req.enableThinking !== undefined ? { chat_template_kwargs: { enable_thinking: req.enableThinking } } : {};
      const t = (await server.json('/apply-template', 'applying the chat template', { messages: req.messages, ...kwargs }, { signal })) as { prompt?: unknown };
      if (typeof t.prompt !== 'string') throw new RemoteEngineError('bad-response', `the remote engine at ${server.baseUrl} answered /apply-template without a prompt`);
      return tokenize(t.prompt, true, signal);
    },
    countEach: (texts) => mapLimited(texts, (t) => tokenize(t, false)),
  };
}

/**
 * A counter over a `tokenizer.json` (a file, or a folder holding one).
 * @throws RemoteEngineError 'config' naming the file when it cannot be read or is not a tokenizer.
 */
export function tokenizerCounter(tokenizerPath: string): TokenCounter {
  const file = existsSync(tokenizerPath) && statSync(tokenizerPath).isDirectory() ? path.join(tokenizerPath, 'tokenizer.json') : tokenizerPath;
  let tokenizer: TextTokenizer;
  try {
    const json: unknown = JSON.parse(readFileSync(file, 'utf8'));
    const configFile = path.join(path.dirname(file), 'tokenizer_config.json');
    const config = existsSync(configFile) ? (JSON.parse(readFileSync(configFile, 'utf8')) as Record<string, unknown>) : null;
    // BOS as tokenizer_config.json says (`add_bos_token`, `bos_token`), as transformers adds it.
    const bos = config?.add_bos_token === true ? tokenId(json, config.bos_token) : null;
    tokenizer = TextTokenizer.fromJson(json, config, { bos, eos: [], addBos: bos !== null, modelVocabSize: 1 << 30, file });
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : e instanceof Error ? e.message.split('\n')[0] : String(e);
    throw new RemoteEngineError('config', `the tokenizer ${JSON.stringify(tokenizerPath)} cannot be used to count tokens (${why}); point to the served model's tokenizer.json, or leave the field empty for an estimate`, null, { cause: e });
  }
  return {
    method: 'tokenizer',
    maxModelLen: null,
    count: async (req) => (req.messages ? tokenizer.encodeChat(req.messages, { enableThinking: req.enableThinking }) : tokenizer.encode(req.prompt ?? '', { parseSpecial: false })).length,
    countEach: async (texts) => texts.map((t) => tokenizer.encode(t, { addBos: false, parseSpecial: false }).length),
  };
}

/** The id of a token given as text (or as `{ content }`, as tokenizer_config.json may write it), or null. */
function tokenId(tokenizerJson: unknown, token: unknown): number | null {
  const text = typeof token === 'string' ? token : (token as { content?: unknown } | null)?.content;
  if (typeof text !== 'string') return null;
  const j = tokenizerJson as { added_tokens?: { id?: unknown; content?: unknown }[]; model?: { vocab?: unknown } };
  const added = j.added_tokens?.find((t) => t.content === text);
  if (typeof added?.id === 'number') return added.id;
  const vocab = j.model?.vocab;
  if (vocab && !Array.isArray(vocab) && typeof (vocab as Record<string, unknown>)[text] === 'number') return (vocab as Record<string, number>)[text];
  return null;
}

/** The estimate: ⌈characters / 4⌉, plus 4 per chat message and 3 for the answer's opening. */
export function estimateCounter(): TokenCounter {
  const ofText = (t: string) => Math.ceil([...t].length / CHARS_PER_TOKEN);
  return {
    method: 'estimate',
    maxModelLen: null,
    count: async (req) => (req.messages ? req.messages.reduce((n, m) => n + ofText(m.content) + TOKENS_PER_MESSAGE, 3) : ofText(req.prompt ?? '') + 1),
    countEach: async (texts) => texts.map(ofText),
  };
}

/** `fn` over `items` with at most COUNT_CONCURRENCY in flight, results in order. */
async function mapLimited<T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(COUNT_CONCURRENCY, items.length) }, worker));
  return out;
}
