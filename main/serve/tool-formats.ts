/**
 * The five tool-call formats (main/engine/tokenizer/tool-format.ts says which a model's template
 * writes): per format, how a forced call is opened and constrained, and how a reply's calls are
 * read. Pure: no I/O. Sources of the formats, as each family's official chat template writes a
 * call into the history and as vLLM's parsers for it read one:
 *   - hermes: Qwen2.5 / Qwen3 `tokenizer_config.json` (`<tool_call>` blocks; vLLM `hermes`);
 *   - llama3-json: meta-llama Llama-3.1-8B-Instruct's template (`{"name": …, "parameters": …}`,
 *     optionally after `<|python_tag|>`, several joined by `;`; vLLM `llama3_json`);
 *   - mistral-v3: Mistral-7B-Instruct-v0.3's template (`[TOOL_CALLS] [{"name", "arguments"}, …]`;
 *     vLLM `mistral`), ids of 9 letters or digits;
 *   - mistral-args: Mistral-Small-3.2-24B-Instruct-2506's template (`[TOOL_CALLS]name[ARGS]{…}`
 *     per call, an optional `[CALL_ID]id` before `[ARGS]`);
 *   - harmony: openai/gpt-oss's template (a commentary-channel message to `functions.NAME`, the
 *     recipient before the channel as the template writes it or after it as the model may, an
 *     optional content type `json` / `<|constrain|>json`, the JSON arguments as the message,
 *     ended by `<|call|>` — an end token, so a reply's last call has no end marker).
 */
import { randomUUID } from 'node:crypto';
import type { ResponseFormat } from '../engine/generate/types.ts';
import { HARMONY_RECIPIENT, LLAMA_PYTHON_TAG, MISTRAL_ARGS, MISTRAL_CALLS, type ToolFormat } from '../engine/tokenizer/tool-format.ts';

export type { ToolFormat };

/** A call as the reply wrote it (checked against the declared tools by tool-calls.ts). */
export interface WrittenCall {
  name: unknown;
  arguments: unknown;
}

/** A tool a forced call may name. */
export interface ChosenTool {
  name: string;
  parameters: unknown;
}

interface FormatRules {
  /** What opens a forced call (fed as prompt) and what would close it (for reading it back). */
  open: string;
  close: string;
  /** The constraint of one forced call to one of `chosen`. */
  constrain(chosen: ChosenTool[]): ResponseFormat;
  /** A reply's calls that `accept` takes, in order, and its text outside them (other calls stay text). */
  read(text: string, accept: (c: WrittenCall) => boolean): { content: string; calls: WrittenCall[] };
  /** A fresh call id in the form the format's templates take. */
  newId(): string;
}

const openAiId = (): string => `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
const mistralId = (): string => randomUUID().replace(/-/g, '').slice(0, 9);

/** `{name: const, <key>: parameters}` for each tool (any of them). */
function callSchema(chosen: ChosenTool[], key: 'arguments' | 'parameters'): unknown {
  // The name first, as the templates write a call: a stream can then open the call before its arguments.
  const branches = chosen.map((t) => ({ type: 'object', properties: { name: { const: t.name }, [key]: t.parameters }, required: ['name', key], additionalProperties: false, propertyOrdering: ['name', key] }));
  return branches.length === 1 ? branches[0] : { anyOf: branches };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** An object's name and arguments (`arguments`, or Llama's `parameters`), or null when it is not one. */
function written(v: unknown, key: 'arguments' | 'parameters'): WrittenCall | null {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || !('name' in v)) return null;
  const o = v as Record<string, unknown>;
  return { name: o.name, arguments: o[key] ?? o.arguments };
}

/**
 * The JSON objects `text` is made of, separated by `;` (and whitespace), or null when anything
 * else is there. A bracket scanner that skips strings, then JSON.parse per object.
 */
export function jsonObjects(text: string): unknown[] | null {
  const out: unknown[] = [];
  let i = 0;
  while (i < text.length) {
    while (i < text.length && /[\s;]/.test(text[i])) i++;
    if (i >= text.length) break;
    if (text[i] !== '{') return null;
    let depth = 0;
    let inString = false;
    let j = i;
    for (; j < text.length; j++) {
      const c = text[j];
      if (inString) {
        if (c === '\\') j++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{' || c === '[') depth++;
      else if ((c === '}' || c === ']') && --depth === 0) break;
    }
    const v = parseJson(text.slice(i, j + 1));
    if (v === undefined) return null;
    out.push(v);
    i = j + 1;
  }
  return out.length ? out : null;
}

const HERMES_CALL = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g;

/**
 * A harmony call message: an optional `<|start|>assistant` header, the recipient before (group 1)
 * or after (group 2) `<|channel|>commentary`, an optional content type, `<|message|>`, the
 * arguments (group 3) up to `<|call|>`, the next message, or the end.
 */
export const HARMONY_CALL = /(?:<\|start\|>assistant)?\s*(?:to=functions\.([^\s<]+)\s*)?<\|channel\|>commentary(?:\s*to=functions\.([^\s<]+))?\s*(?:<\|constrain\|>)?\s*(?:\w+)?\s*<\|message\|>([\s\S]*?)(?:<\|call\|>|(?=<\|start\|>)|$)/g;

const RULES: Record<ToolFormat, FormatRules> = {
  hermes: {
    open: '<tool_call>\n',
    close: '\n</tool_call>',
    constrain: (chosen) => ({ type: 'json_schema', schema: callSchema(chosen, 'arguments') }),
    read(text, accept) {
      const calls: WrittenCall[] = [];
      const content = text.replace(HERMES_CALL, (block, json: string) => {
        const c = written(parseJson(json), 'arguments');
        return c && accept(c) ? (calls.push(c), '') : block;
      });
      return { content, calls };
    },
    newId: openAiId,
  },
  'llama3-json': {
    open: '',
    close: '',
    constrain: (chosen) => ({ type: 'json_schema', schema: callSchema(chosen, 'parameters') }),
    // The whole reply is the call(s) or it is content (vLLM's llama3_json reads it so too).
    read(text, accept) {
      const body = text.trim().replace(LLAMA_PYTHON_TAG, '');
      const calls = (jsonObjects(body) ?? []).map((v) => written(v, 'parameters'));
      return calls.length && calls.every((c) => c !== null && accept(c)) ? { content: '', calls: calls as WrittenCall[] } : { content: text, calls: [] };
    },
    newId: openAiId,
  },
  'mistral-v3': {
    open: MISTRAL_CALLS,
    close: '',
    constrain: (chosen) => ({ type: 'json_schema', schema: { type: 'array', items: callSchema(chosen, 'arguments'), minItems: 1, maxItems: 1 } }),
    read(text, accept) {
      const at = text.indexOf(MISTRAL_CALLS);
      if (at < 0) return { content: text, calls: [] };
      const v = parseJson(text.slice(at + MISTRAL_CALLS.length).trim());
      const calls = (Array.isArray(v) ? v : [v]).map((x) => written(x, 'arguments'));
      return calls.length && calls.every((c) => c !== null && accept(c)) ? { content: text.slice(0, at), calls: calls as WrittenCall[] } : { content: text, calls: [] };
    },
    newId: mistralId,
  },
  'mistral-args': {
    open: MISTRAL_CALLS,
    close: '',
    constrain: (chosen) => ({ type: 'tool_call', tools: chosen, separator: MISTRAL_ARGS }),
    read(text, accept) {
      const [first, ...parts] = text.split(MISTRAL_CALLS);
      const calls: WrittenCall[] = [];
      let content = first;
      for (const part of parts) {
        const m = /^\s*([^[{\s]+)\s*(?:\[CALL_ID\][^[]*)?\[ARGS\]([\s\S]*)$/.exec(part);
        const args = m ? parseJson(m[2].trim()) : undefined;
        if (m && args !== undefined && accept({ name: m[1], arguments: args })) calls.push({ name: m[1], arguments: args });
        else content += MISTRAL_CALLS + part;
      }
      return { content, calls };
    },
    newId: mistralId,
  },
  harmony: {
    // A forced call follows the prompt's `<|start|>assistant`: the channel and recipient, then the
    // name and `<|message|>` (one special token) before the arguments, as the constraint writes them.
    open: `<|channel|>commentary ${HARMONY_RECIPIENT}`,
    close: '',
    constrain: (chosen) => ({ type: 'tool_call', tools: chosen, separator: '<|message|>' }),
    read(text, accept) {
      const calls: WrittenCall[] = [];
      const content = text.replace(HARMONY_CALL, (block, before: string | undefined, after: string | undefined, args: string) => {
        const c = { name: before ?? after, arguments: parseJson(args.trim()) };
        return c.name !== undefined && c.arguments !== undefined && accept(c) ? (calls.push(c), '') : block;
      });
      return { content, calls };
    },
    newId: openAiId,
  },
};

/** The rules of `format`. */
export function formatRules(format: ToolFormat): FormatRules {
  return RULES[format];
}
