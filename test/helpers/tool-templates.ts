/**
 * Synthetic tool-calling bundles for the formats beyond Qwen's: the real Qwen3 tokenizer with
 * the special tokens Llama 3.1 and Mistral write calls with (`<|python_tag|>`, `[TOOL_CALLS]`,
 * `[ARGS]`, …) added as special tokens after its last id, and a chat template from
 * test/fixtures/tool-templates/ (each names the official template whose tool sections it keeps).
 * No Llama or Mistral tokenizer is installed here; what the tests need from one is only that these
 * markers are single special tokens, as they are there.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { QWEN3_ENDOFTEXT, QWEN3_IM_END } from './forced-backend.ts';
import { PROJECT_ROOT } from './paths.ts';
import { QWEN3_TOKENIZER_CONFIG, QWEN3_TOKENIZER_JSON, QWEN3_TOKENIZER_VOCAB } from './synthetic-hf.ts';

/** The markers added, ids from QWEN3_TOKENIZER_VOCAB on, in this order. */
export const TOOL_MARKERS = [
  '<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>', '<|eom_id|>', '<|python_tag|>',
  '[INST]', '[/INST]', '[AVAILABLE_TOOLS]', '[/AVAILABLE_TOOLS]', '[TOOL_CALLS]', '[ARGS]', '[CALL_ID]', '[TOOL_RESULTS]', '[/TOOL_RESULTS]',
  '[SYSTEM_PROMPT]', '[/SYSTEM_PROMPT]',
];

export type TemplateName = 'llama3.1' | 'mistral-v3' | 'mistral-args';

/** The text of a fixture template. */
export function toolTemplate(name: TemplateName): string {
  return readFileSync(path.join(PROJECT_ROOT, 'test', 'fixtures', 'tool-templates', `${name}.jinja`), 'utf8');
}

const built = new Map<string, TextTokenizer>();

/** The Qwen3 tokenizer plus TOOL_MARKERS (special), with `template` as its chat template; EOS `<|im_end|>`. */
export function markerTokenizer(template: string): TextTokenizer {
  let tk = built.get(template);
  if (tk) return tk;
  const json = JSON.parse(readFileSync(QWEN3_TOKENIZER_JSON, 'utf8')) as { added_tokens: unknown[] };
  TOOL_MARKERS.forEach((content, i) => json.added_tokens.push({ id: QWEN3_TOKENIZER_VOCAB + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  const config = JSON.parse(readFileSync(QWEN3_TOKENIZER_CONFIG, 'utf8')) as Record<string, unknown>;
  tk = TextTokenizer.fromJson(json, config, {
    bos: null,
    eos: [QWEN3_IM_END, QWEN3_ENDOFTEXT],
    addBos: false,
    modelVocabSize: QWEN3_TOKENIZER_VOCAB + TOOL_MARKERS.length,
    file: 'qwen3-tokenizer+tool-markers',
    chatTemplate: template,
  });
  built.set(template, tk);
  return tk;
}
