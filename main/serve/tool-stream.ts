/**
 * Tool calls streamed as OpenAI streams them, token by token: per call its `index`, the `id` and
 * name on the call's first delta, then fragments of its `arguments` text as the model writes them
 * (their concatenation is the arguments' JSON); parallel calls one after the other; the text
 * outside calls as content deltas, held back only while it could be the start of a call's marker.
 *
 * How: each push re-reads the reply so far (`snapshot`: the text that is surely content, and per
 * call its name once its string is closed and the raw text of its arguments so far, per format:
 * tool-formats.ts) and emits what is new since the last snapshot. A reply is a few hundred tokens,
 * so the re-read costs microseconds. `finish` reconciles with the whole reply's parse
 * (`parseToolCalls`): a call only the whole reply shows is sent whole; content that turned out not
 * to be a call (a Llama reply that opened with `{` but was prose) is sent then.
 */
import type { ToolCall } from '../engine/generate/types.ts';
import { LLAMA_PYTHON_TAG, MISTRAL_ARGS, MISTRAL_CALLS } from '../engine/tokenizer/tool-format.ts';
import { parseToolCalls, type ToolMode } from './tool-calls.ts';
import { formatRules } from './tool-formats.ts';

/** What to send next: content text, a call's opening (index, id, name), or an arguments fragment. */
export type ToolStreamDelta =
  | { type: 'content'; text: string }
  | { type: 'call'; index: number; id: string; name: string }
  | { type: 'arguments'; index: number; text: string };

/** A call as far as it is written: its name once whole, its arguments' raw text so far. */
interface PartialCall {
  name: string | null;
  args: string;
}

interface Snapshot {
  /** Text that is content for sure (a possible marker's start held back). */
  content: string;
  calls: PartialCall[];
}

/**
 * The end of the JSON value starting at `text[start]` (exclusive), or null while it is unclosed.
 * Strings, objects and arrays are scanned; a bare scalar ends before `,` `}` `]` `;` or whitespace.
 */
function valueEnd(text: string, start: number): number | null {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') {
        inString = false;
        if (depth === 0) return i + 1;
      }
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (--depth === 0) return i + 1;
      if (depth < 0) return i;
    } else if (depth === 0 && /[\s,;]/.test(c)) return i;
  }
  return null;
}

/** The top-level keys of the object whose `{` is at `text[start]`: per key, where its value starts (and ends, once closed). */
function topLevelFields(text: string, start: number): Map<string, { from: number; to: number | null }> {
  const out = new Map<string, { from: number; to: number | null }>();
  let i = start + 1;
  while (i < text.length) {
    while (i < text.length && /[\s,]/.test(text[i])) i++;
    if (text[i] !== '"') break;
    const keyEnd = valueEnd(text, i);
    if (keyEnd === null) break;
    const key = stringValue(text.slice(i, keyEnd));
    if (key === null) break;
    i = keyEnd;
    while (i < text.length && /[\s:]/.test(text[i])) i++;
    if (i >= text.length) break;
    const to = valueEnd(text, i);
    out.set(key, { from: i, to });
    if (to === null) break;
    i = to;
  }
  return out;
}

/** A call object at `text[start]` (`{`), as far as it is written; `argsKey`: Llama's `parameters` or `arguments`. */
function objectCall(text: string, start: number, argsKey: 'arguments' | 'parameters'): { call: PartialCall; end: number | null } {
  const fields = topLevelFields(text, start);
  const name = fields.get('name');
  const args = fields.get(argsKey) ?? fields.get('arguments');
  const call: PartialCall = {
    name: name && name.to !== null ? stringValue(text.slice(name.from, name.to)) : null,
    args: args && text[args.from] === '{' ? text.slice(args.from, args.to ?? text.length) : '',
  };
  return { call, end: valueEnd(text, start) };
}

function stringValue(json: string): string | null {
  try {
    const v = JSON.parse(json) as unknown;
    return typeof v === 'string' ? v : null;
  } catch {
    return null;
  }
}

/** `text` less an end that could be the start of `marker`. */
function holdBack(text: string, marker: string): string {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) if (marker.startsWith(text.slice(-n))) return text.slice(0, -n);
  return text;
}

/** Objects one after another from `i` (separated by whitespace and `sep`), as far as written. */
function objectCalls(text: string, i: number, sep: RegExp, argsKey: 'arguments' | 'parameters'): PartialCall[] {
  const calls: PartialCall[] = [];
  while (i < text.length) {
    while (i < text.length && sep.test(text[i])) i++;
    if (text[i] !== '{') break;
    const { call, end } = objectCall(text, i, argsKey);
    calls.push(call);
    if (end === null) break;
    i = end;
  }
  return calls;
}

/** The reply so far, read per format. */
function snapshot(text: string, format: ToolMode['format']): Snapshot {
  switch (format) {
    case 'hermes': {
      const blocks = text.split('<tool_call>');
      let content = blocks[0];
      const calls: PartialCall[] = [];
      blocks.slice(1).forEach((b) => {
        const close = b.indexOf('</tool_call>');
        const body = close < 0 ? b : b.slice(0, close);
        const at = body.indexOf('{');
        if (at >= 0) calls.push(objectCall(body, at, 'arguments').call);
        if (close >= 0) content += b.slice(close + '</tool_call>'.length);
      });
      return { content: blocks.length === 1 || text.lastIndexOf('</tool_call>') > text.lastIndexOf('<tool_call>') ? holdBack(content, '<tool_call>') : content, calls };
    }
    case 'llama3-json': {
      const body = text.trimStart();
      const rest = body.startsWith(LLAMA_PYTHON_TAG) ? body.slice(LLAMA_PYTHON_TAG.length).trimStart() : body;
      // A reply that is (or may still be) calls is held whole; anything else is content.
      if (rest.startsWith('{')) return { content: '', calls: objectCalls(rest, 0, /[\s;]/, 'parameters') };
      if (rest === '' || LLAMA_PYTHON_TAG.startsWith(body)) return { content: '', calls: [] };
      return { content: text, calls: [] };
    }
    case 'mistral-v3': {
      const at = text.indexOf(MISTRAL_CALLS);
      if (at < 0) return { content: holdBack(text, MISTRAL_CALLS), calls: [] };
      const rest = text.slice(at + MISTRAL_CALLS.length);
      const open = rest.search(/\S/);
      const calls = open < 0 ? [] : rest[open] === '[' ? objectCalls(rest, open + 1, /[\s,]/, 'arguments') : objectCalls(rest, open, /\s/, 'arguments');
      return { content: text.slice(0, at), calls };
    }
    case 'mistral-args': {
      const [first, ...parts] = text.split(MISTRAL_CALLS);
      const calls = parts.map((p): PartialCall => {
        const sep = p.indexOf(MISTRAL_ARGS);
        if (sep < 0) return { name: null, args: '' };
        const name = p.slice(0, sep).replace(/\[CALL_ID\][\s\S]*$/, '').trim();
        const args = p.slice(sep + MISTRAL_ARGS.length).trimStart();
        return { name, args: args.startsWith('{') ? args.slice(0, valueEnd(args, 0) ?? args.length) : '' };
      });
      return { content: parts.length ? first : holdBack(first, MISTRAL_CALLS), calls };
    }
    case 'harmony': {
      // Content until a message header; per call message its name once `<|message|>` closed the header.
      const at = text.search(/<\|start\|>|<\|channel\|>/);
      const calls: PartialCall[] = [];
      if (at < 0) return { content: holdBack(holdBack(text, '<|start|>'), '<|channel|>'), calls };
      for (const m of text.slice(at).matchAll(HARMONY_PARTIAL)) {
        if (m[3] === undefined) calls.push({ name: null, args: '' });
        else {
          const args = m[3].trimStart();
          calls.push({ name: m[1] ?? m[2] ?? null, args: args.startsWith('{') ? args.slice(0, valueEnd(args, 0) ?? args.length) : '' });
        }
      }
      return { content: text.slice(0, at), calls };
    }
  }
}

/** A harmony call message as far as written (HARMONY_CALL's groups; group 3 once `<|message|>` is there). */
const HARMONY_PARTIAL = /(?:<\|start\|>assistant)?\s*(?:to=functions\.([^\s<]+)\s*)?<\|channel\|>commentary(?:\s*to=functions\.([^\s<]+))?[^<]*(?:<\|constrain\|>[^<]*)?(?:<\|message\|>([\s\S]*?))?(?=<\|call\|>|<\|start\|>|$)/g;

/** One streamed reply's tool calls: `push` each content delta, `finish` at the end. */
export class ToolCallStream {
  private text = '';
  private sentContent = 0;
  /** Per call index sent: its id and how much of its arguments went out. */
  private readonly sent: { id: string; args: number }[] = [];
  private readonly rules: ReturnType<typeof formatRules>;

  constructor(private readonly mode: ToolMode) {
    this.rules = formatRules(mode.format);
  }

  /** The calls sent so far (id, name): what `finish_reason: "tool_calls"` rests on. */
  get callCount(): number {
    return this.sent.length;
  }

  /** Takes the reply's next content text; returns what to send now. */
  push(delta: string): ToolStreamDelta[] {
    this.text += delta;
    return this.diff(snapshot(this.forcedOpen() + this.text, this.mode.format));
  }

  /**
   * The end of the reply: what is still to send, reconciled with the whole reply's parse (a call
   * only it shows goes out whole; held text that is no call goes out as content).
   * @returns the deltas and the reply's calls as `parseToolCalls` reads them (ids: the ones sent).
   */
  finish(): { deltas: ToolStreamDelta[]; calls: ToolCall[] } {
    const whole = parseToolCalls(this.text, this.mode);
    const deltas: ToolStreamDelta[] = [];
    if (whole.calls.length === 0 && this.sent.length === 0) {
      const rest = this.sentContent === 0 ? this.text : this.text.trimStart().slice(this.sentContent);
      if (rest) deltas.push({ type: 'content', text: rest });
      return { deltas, calls: [] };
    }
    const final = snapshot(this.forcedOpen() + this.text + (this.mode.forced ? this.rules.close : ''), this.mode.format);
    deltas.push(...this.diff(final));
    const content = this.mode.forced ? '' : (whole.content ?? '').slice(this.sentContent);
    if (content) deltas.push({ type: 'content', text: content });
    whole.calls.forEach((c, index) => {
      if (index < this.sent.length) return void (c.id = this.sent[index].id);
      deltas.push({ type: 'call', index, id: c.id, name: c.name }, { type: 'arguments', index, text: c.arguments });
      this.sent.push({ id: c.id, args: c.arguments.length });
    });
    return { deltas, calls: whole.calls };
  }

  private forcedOpen(): string {
    return this.mode.forced ? this.rules.open : '';
  }

  private diff(s: Snapshot): ToolStreamDelta[] {
    const out: ToolStreamDelta[] = [];
    // Whitespace around calls is no content (parseToolCalls trims it): leading and trailing held.
    const visible = s.content.trim();
    if (visible.length > this.sentContent && !this.mode.forced) {
      out.push({ type: 'content', text: visible.slice(this.sentContent) });
      this.sentContent = visible.length;
    }
    s.calls.forEach((c, index) => {
      if (!this.mode.parallel && index > 0) return;
      if (index > this.sent.length || (index === this.sent.length && (c.name === null || !this.mode.names.includes(c.name)))) return;
      if (index === this.sent.length) {
        const id = this.rules.newId();
        this.sent.push({ id, args: 0 });
        out.push({ type: 'call', index, id, name: c.name! });
      }
      const sent = this.sent[index];
      if (c.args.length > sent.args) {
        out.push({ type: 'arguments', index, text: c.args.slice(sent.args) });
        sent.args = c.args.length;
      }
    });
    return out;
  }
}
