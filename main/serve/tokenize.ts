/**
 * `POST /tokenize`, `POST /detokenize` and `POST /apply-template` beside `/v1`, in the shapes
 * clients already speak, so another Ropewalk (or any tool) can count tokens exactly with the
 * loaded model's tokenizer:
 *   llama.cpp: { content, add_special = false, parse_special = true } → { tokens }
 *              /apply-template { messages } → { prompt } (the chat as generation renders it)
 *   vLLM:      { model?, prompt, add_special_tokens = true }  → { tokens, count, max_model_len }
 *              { model?, messages, add_generation_prompt = true } → the same, for the chat as
 *              generation renders it (template and BOS)
 *   detokenize: { tokens, model? } → { content } (llama.cpp) with `prompt` (vLLM) beside it
 * Special tokens' text in `prompt` stays text, as in a completion's prompt; in `content` it is
 * parsed unless `parse_special: false`, as llama.cpp does. Errors are
 * OpenAI-style JSON (`param` names the field); a `model` that is not the loaded one is a 404 (openai.ts loadedModel, as under /v1).
 */
import type http from 'node:http';
import { z } from 'zod';
import type { CompletionBackend } from '../services/index.ts';
import { answerError, json, loadedModel, readJson } from './openai.ts';
import { ApiError, chatMessages, invalidField, messageSchema, parseBody } from './openai-request.ts';

/** Ids accepted by /detokenize at once. */
const MAX_IDS = 1 << 20;

const tokenizeSchema = z
  .object({
    model: z.string().optional(),
    content: z.string().optional(),
    add_special: z.boolean().optional(),
    parse_special: z.boolean().optional(),
    prompt: z.string().optional(),
    add_special_tokens: z.boolean().optional(),
    messages: z.array(messageSchema).min(1).optional(),
    add_generation_prompt: z.literal(true).optional(),
    with_pieces: z.literal(false).optional(),
  })
  .strict();

const applyTemplateSchema = z.object({ model: z.string().optional(), messages: z.array(messageSchema).min(1) }).passthrough();

const detokenizeSchema = z.object({ model: z.string().optional(), tokens: z.array(z.number().int().min(0)).max(MAX_IDS) }).strict();

/** The paths this module answers. */
export const TOKENIZE_PATHS: readonly string[] = ['/tokenize', '/detokenize', '/apply-template'];

/** Handles `/tokenize`, `/detokenize` and `/apply-template`; returns false for any other path. Never throws. */
export function routeTokenize(pathname: string, req: http.IncomingMessage, res: http.ServerResponse, backend: CompletionBackend): boolean {
  if (!TOKENIZE_PATHS.includes(pathname)) return false;
  void (async () => {
    try {
      if (req.method !== 'POST') throw new ApiError(405, 'method_not_allowed', 'use POST');
      const body = await readJson(req);
      if (pathname === '/tokenize') await tokenize(body, res, backend);
      else if (pathname === '/detokenize') await detokenize(body, res, backend);
      else await applyTemplate(body, res, backend);
    } catch (e) {
      answerError(res, e, pathname === '/tokenize' ? 'content' : pathname === '/detokenize' ? 'tokens' : 'messages');
    }
  })();
  return true;
}

async function tokenize(body: unknown, res: http.ServerResponse, backend: CompletionBackend): Promise<void> {
  const b = parseBody(tokenizeSchema, body);
  const given = [b.content, b.prompt, b.messages].filter((x) => x !== undefined).length;
  if (given !== 1) throw new ApiError(400, 'invalid_request', 'give exactly one of content (llama.cpp), prompt or messages (vLLM)', 'content');
  const { maxContext } = loadedModel(backend, b.model);
  if (b.content !== undefined) return json(res, 200, { tokens: await backend.tokenize({ text: b.content, addSpecial: b.add_special ?? false, parseSpecial: b.parse_special ?? true }) });
  const tokens = b.prompt !== undefined ? await backend.tokenize({ text: b.prompt, addSpecial: b.add_special_tokens ?? true, parseSpecial: false }) : await backend.tokenize({ messages: chatMessages(b.messages!) });
  json(res, 200, { tokens, count: tokens.length, max_model_len: maxContext });
}

async function detokenize(body: unknown, res: http.ServerResponse, backend: CompletionBackend): Promise<void> {
  const b = parseBody(detokenizeSchema, body);
  // The caller's ids, checked here so the refusal names the field (the tokenizer would too, but
  // as a model-side error).
  const { vocabSize } = loadedModel(backend, b.model);
  const bad = b.tokens.findIndex((id) => id >= vocabSize);
  if (bad >= 0) throw invalidField(['tokens', bad], `${b.tokens[bad]} is not a token id of this model (0 to ${vocabSize - 1})`);
  const content = await backend.detokenize(b.tokens);
  json(res, 200, { content, prompt: content });
}

async function applyTemplate(body: unknown, res: http.ServerResponse, backend: CompletionBackend): Promise<void> {
  const b = parseBody(applyTemplateSchema, body);
  loadedModel(backend, b.model);
  json(res, 200, { prompt: await backend.renderChat(chatMessages(b.messages)) });
}
