/**
 * How a model writes tool calls, read from what its chat template renders (never from a file
 * name): the five formats people's models use, as their official templates write a call back
 * into the history (and so as the model was trained to write one).
 *   - `hermes`: Qwen2.5 / Qwen3 / Hermes, `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`;
 *   - `llama3-json`: Llama 3.1 / 3.2 / 3.3, a bare `{"name": …, "parameters": {…}}` (optionally
 *     after `<|python_tag|>`; several joined by `;`, as vLLM's llama3_json parser reads them);
 *   - `mistral-v3`: Mistral 7B v0.3 / Nemo / Small 3, `[TOOL_CALLS] [{"name": …, "arguments": {…}}, …]`;
 *   - `mistral-args`: Mistral Small 3.2 / Magistral / Devstral, `[TOOL_CALLS]name[ARGS]{…}` per call;
 *   - `harmony`: gpt-oss, a commentary-channel message to `functions.NAME`:
 *     `<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{…}<|call|>` as its
 *     template writes one (the model may also put the recipient after the channel:
 *     `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}`).
 * `detectToolFormat` says which (null: the template renders no tools). Pure: no I/O.
 * Also `mistralCallId`: Mistral templates refuse call ids that are not 9 letters or digits.
 */
import { createHash } from 'node:crypto';

export type ToolFormat = 'hermes' | 'llama3-json' | 'mistral-v3' | 'mistral-args' | 'harmony';

/** The text that opens a Mistral call (a special token in Mistral's vocabularies). */
export const MISTRAL_CALLS = '[TOOL_CALLS]';
/** Between a call's name and its arguments in the `mistral-args` format. */
export const MISTRAL_ARGS = '[ARGS]';
/** Llama 3.1's code-interpreter tag, which may open a JSON call. */
export const LLAMA_PYTHON_TAG = '<|python_tag|>';
/** What addresses a harmony message to a function (`to=functions.NAME`). */
export const HARMONY_RECIPIENT = 'to=functions.';
/** The channel harmony's calls go to (its template writes `to=` and `functions.` apart). */
export const HARMONY_COMMENTARY = '<|channel|>commentary';

/**
 * The tool-call format of a chat template, by the markup it writes for an assistant's calls:
 * `<|channel|>commentary` → harmony; `[TOOL_CALLS]` with `[ARGS]` → mistral-args, without → mistral-v3; `<tool_call>` → hermes;
 * `<|python_tag|>`, or an `ipython` turn with `"parameters"` (vLLM's JSON-only copy of Llama's
 * template) → llama3-json. A template that mentions no `tools` → null, as does one whose markup
 * is none of these (its replies are then read as content).
 */
export function detectToolFormat(template: string | null): ToolFormat | null {
  if (!template || !template.includes('tools')) return null;
  if (template.includes(HARMONY_COMMENTARY)) return 'harmony';
  if (template.includes(MISTRAL_CALLS)) return template.includes(MISTRAL_ARGS) ? 'mistral-args' : 'mistral-v3';
  if (template.includes('<tool_call>')) return 'hermes';
  if (template.includes(LLAMA_PYTHON_TAG) || (template.includes('ipython') && template.includes('"parameters"'))) return 'llama3-json';
  return null;
}

const MISTRAL_ID = /^[A-Za-z0-9]{9}$/;

/**
 * A call id as Mistral's templates take it (exactly 9 letters or digits, or they raise): kept
 * when it is one, else the first 9 hex digits of its SHA-256, so a call and the tool message
 * answering it still match.
 */
export function mistralCallId(id: string): string {
  return MISTRAL_ID.test(id) ? id : createHash('sha256').update(id).digest('hex').slice(0, 9);
}
