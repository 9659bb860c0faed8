/**
 * A byte-level JSON grammar machine driven by schema nodes (json-schema.ts). Pure, persistent:
 * a state is a list of stacks (several while `anyOf` branches or a number-or-longer literal are
 * still open), a stack a linked list of immutable frames, so a trie walk can branch from any
 * state without copying (token-trie.ts).
 *
 * `advance(state, byte)` → the next state, empty when the byte cannot follow. What it emits:
 *   - RFC 8259 JSON, UTF-8 (structurally checked; no surrogate `\u` escapes, no `\uD…`), that
 *     matches the schema: object keys each at most once, `required` ones before `}`, no key
 *     outside `properties` unless additional properties are allowed; arrays within min/max
 *     items; strings within min/max length (code points; an escape is one); integers without a
 *     fraction; numbers without an exponent, at most 15 digits before and after the point;
 *   - whitespace: at most MAX_WS bytes in each gap between tokens of the JSON, none after the
 *     value (so a finished value forces the end); free object keys at most MAX_KEY_BYTES.
 * `canEnd(state)`: the bytes so far are a whole value (EOS may come); `mustEnd(state)`: no byte
 * can follow.
 */
import type { SchemaNode } from './json-schema.ts';

/** Whitespace bytes allowed in one gap (enough for pretty-printing a few levels deep). */
export const MAX_WS = 16;
/** Bytes of an object key outside `properties` (where additional properties are allowed; characters where none are declared). */
export const MAX_KEY_BYTES = 128;
const MAX_DIGITS = 15;
/** A key of an object with no declared properties: a string of at most MAX_KEY_BYTES characters. */
const FREE_KEY: StringNode = { kind: 'string', id: 0, minLength: 0, maxLength: MAX_KEY_BYTES };

type ObjectNode = Extract<SchemaNode, { kind: 'object' }>;
type ArrayNode = Extract<SchemaNode, { kind: 'array' }>;
type StringNode = Extract<SchemaNode, { kind: 'string' }>;
type NumberNode = Extract<SchemaNode, { kind: 'number' }>;

/** UTF-8 progress inside a string: continuation bytes still due ×8 + a range rule for the next one. */
type Utf8 = number;

type Frame =
  /** The root value, before its first byte. */
  | { t: 'root'; node: SchemaNode; ws: number }
  | { t: 'obj'; node: ObjectNode; ph: 'open' | 'key' | 'colon' | 'value' | 'after' | 'next'; used: readonly string[]; key: string; u8: Utf8; child: SchemaNode | null; ws: number }
  | { t: 'arr'; node: ArrayNode; ph: 'open' | 'after' | 'next'; n: number; ws: number }
  | { t: 'str'; node: StringNode; len: number; esc: number; u8: Utf8 }
  | { t: 'num'; node: NumberNode; ph: 'sign' | 'zero' | 'int' | 'dot' | 'frac'; n: number }
  | { t: 'lit'; values: readonly string[]; pos: number };

export interface Stack {
  readonly f: Frame | null;
  readonly up: Stack | null;
}
/** The value is complete; nothing may follow. */
export const DONE: Stack = { f: null, up: null };
export type MachineState = readonly Stack[];

/** The state before the first byte of a value matching `node`. */
export function initialState(node: SchemaNode): MachineState {
  return [{ f: { t: 'root', node, ws: 0 }, up: null }];
}

/** The state after `byte` (0–255); empty when the byte cannot follow. */
export function advance(state: MachineState, byte: number): Stack[] {
  const out: Stack[] = [];
  for (const s of state) step(s, byte, out);
  return out;
}

/** The bytes so far form a whole value: the end (EOS) may come now. */
export function canEnd(state: MachineState): boolean {
  return state.some((s) => s === DONE || (s.up === null && accepting(s.f!)));
}

/** The value is complete and no byte can follow: the generation must end. */
export function mustEnd(state: MachineState): boolean {
  return state.length > 0 && state.every((s) => s === DONE);
}

/**
 * When the state is string content between characters (one stack, a string on top, no escape or
 * UTF-8 sequence open): its characters so far and its maxLength (counted only when bounded);
 * else null. What the string fast path of json-constraint.ts needs.
 */
export function stringContent(state: MachineState): { len: number; maxLength: number } | null {
  if (state.length !== 1) return null;
  const f = state[0].f;
  if (f?.t !== 'str' || f.esc !== 0 || f.u8 !== 0) return null;
  return { len: f.len, maxLength: f.node.maxLength };
}

/** A key for caching masks: equal keys, equal futures. */
export function stateKey(state: MachineState): string {
  let key = '';
  for (const s of state) {
    for (let x: Stack | null = s; x; x = x.up) key += x.f ? frameKey(x.f) : 'D';
    key += '|';
  }
  return key;
}

function frameKey(f: Frame): string {
  switch (f.t) {
    case 'root':
      return `R${f.node.id},${f.ws};`;
    case 'obj':
      return `O${f.node.id},${f.ph},${f.ws},${f.u8},${f.child?.id ?? ''},${JSON.stringify(f.used)},${JSON.stringify(f.key)};`;
    case 'arr':
      return `A${f.node.id},${f.ph},${f.n},${f.ws};`;
    case 'str':
      return `S${f.node.id},${f.len},${f.esc},${f.u8};`;
    case 'num':
      return `N${f.node.id},${f.ph},${f.n};`;
    case 'lit':
      return `L${f.pos},${JSON.stringify(f.values)};`;
  }
}

const isWs = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x09 || b === 0x0d;
const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;
const push = (f: Frame, up: Stack | null): Stack => ({ f, up });
const pop = (up: Stack | null): Stack => up ?? DONE;

function accepting(f: Frame): boolean {
  if (f.t === 'num') return f.ph === 'zero' || f.ph === 'int' || f.ph === 'frac';
  if (f.t === 'lit') return f.values.some((v) => v.length === f.pos);
  return false;
}

function step(s: Stack, b: number, out: Stack[]): void {
  const f = s.f;
  if (f === null) return; // DONE: nothing follows, not even whitespace
  switch (f.t) {
    case 'root':
      if (isWs(b)) {
        if (f.ws < MAX_WS) out.push(push({ ...f, ws: f.ws + 1 }, s.up));
      } else startValue(f.node, b, s.up, out);
      return;
    case 'obj':
      return stepObject(f, s.up, b, out);
    case 'arr':
      return stepArray(f, s.up, b, out);
    case 'str':
      return stepString(f, s.up, b, out);
    case 'num':
      return stepNumber(f, s.up, b, out);
    case 'lit':
      return stepLiteral(f, s.up, b, out);
  }
}

/** The first byte of a value matching `node`, whose parent stack is `up`. */
function startValue(node: SchemaNode, b: number, up: Stack | null, out: Stack[]): void {
  switch (node.kind) {
    case 'anyOf':
      for (const o of node.options) startValue(o, b, up, out);
      return;
    case 'object':
      if (b === 0x7b) out.push(push({ t: 'obj', node, ph: 'open', used: [], key: '', u8: 0, child: null, ws: 0 }, up));
      return;
    case 'array':
      if (b === 0x5b) out.push(push({ t: 'arr', node, ph: 'open', n: 0, ws: 0 }, up));
      return;
    case 'string':
      if (b === 0x22) out.push(push({ t: 'str', node, len: 0, esc: 0, u8: 0 }, up));
      return;
    case 'number':
      if (b === 0x2d) out.push(push({ t: 'num', node, ph: 'sign', n: 0 }, up));
      else if (b === 0x30) out.push(push({ t: 'num', node, ph: 'zero', n: 1 }, up));
      else if (isDigit(b)) out.push(push({ t: 'num', node, ph: 'int', n: 1 }, up));
      return;
    case 'literal':
      return stepLiteral({ t: 'lit', values: node.values, pos: 0 }, up, b, out);
  }
}

/** Whitespace in a gap of a container frame: one more byte, within MAX_WS. */
function gap<F extends { ws: number }>(f: F, up: Stack | null, out: Stack[]): void {
  if (f.ws < MAX_WS) out.push(push({ ...f, ws: f.ws + 1 } as unknown as Frame, up));
}

/** Key texts of `node.props` as they appear between the quotes, as byte strings (latin1 of the UTF-8). */
const keyTexts = new WeakMap<ObjectNode, Map<string, string>>();
function declaredKeys(node: ObjectNode): Map<string, string> {
  let m = keyTexts.get(node);
  if (!m) {
    m = new Map();
    for (const k of node.props.keys()) m.set(Buffer.from(JSON.stringify(k).slice(1, -1), 'utf8').toString('latin1'), k);
    keyTexts.set(node, m);
  }
  return m;
}

function canAddKey(f: Extract<Frame, { t: 'obj' }>): boolean {
  const order = f.node.order;
  if (order) return f.used.length === 0 || order.indexOf(f.used[f.used.length - 1]) < order.length - 1;
  return f.node.additional !== null || f.used.length < f.node.props.size;
}

/**
 * Whether declared key `name` may come next: unused, and with an order, after the last key used
 * and skipping no required key (one skipped could never come, and `}` would never be allowed).
 */
function mayUse(f: Extract<Frame, { t: 'obj' }>, name: string): boolean {
  if (f.used.includes(name)) return false;
  const order = f.node.order;
  if (!order) return true;
  const last = f.used.length ? order.indexOf(f.used[f.used.length - 1]) : -1;
  const at = order.indexOf(name);
  return at > last && order.slice(last + 1, at).every((k) => !f.node.required.has(k));
}

function stepObject(f: Extract<Frame, { t: 'obj' }>, up: Stack | null, b: number, out: Stack[]): void {
  const node = f.node;
  switch (f.ph) {
    case 'open':
    case 'next':
      if (isWs(b)) return gap(f, up, out);
      if (b === 0x22 && node.props.size === 0 && node.additional) {
        // Free keys only (json_object, `{ type: "object" }`): the key is a plain string (a repeated
        // key parses, the last one wins), so string content's fast path covers it.
        out.push(push({ t: 'str', node: FREE_KEY, len: 0, esc: 0, u8: 0 }, push({ ...f, ph: 'colon', child: node.additional, ws: 0 }, up)));
      } else if (b === 0x22 && canAddKey(f)) out.push(push({ ...f, ph: 'key', key: '', u8: 0, ws: 0 }, up));
      else if (b === 0x7d && f.ph === 'open' && node.required.size === 0) out.push(pop(up));
      return;
    case 'key':
      return stepKey(f, up, b, out);
    case 'colon':
      if (isWs(b)) return gap(f, up, out);
      if (b === 0x3a) out.push(push({ ...f, ph: 'value', ws: 0 }, up));
      return;
    case 'value':
      if (isWs(b)) return gap(f, up, out);
      return startValue(f.child!, b, push({ ...f, ph: 'after', child: null, ws: 0 }, up), out);
    case 'after':
      if (isWs(b)) return gap(f, up, out);
      if (b === 0x2c && canAddKey(f)) out.push(push({ ...f, ph: 'next', ws: 0 }, up));
      else if (b === 0x7d && [...node.required].every((r) => f.used.includes(r))) out.push(pop(up));
      return;
  }
}

/** A byte of an object key: a prefix of an unused declared key, or (when allowed) a free key. */
function stepKey(f: Extract<Frame, { t: 'obj' }>, up: Stack | null, b: number, out: Stack[]): void {
  const declared = declaredKeys(f.node);
  if (b === 0x22 && f.u8 === 0) {
    const name = declared.get(f.key) ?? (f.node.additional ? Buffer.from(f.key, 'latin1').toString('utf8') : null);
    if (name === null || !mayUse(f, name)) return;
    const child = f.node.props.get(name) ?? f.node.additional!;
    out.push(push({ ...f, ph: 'colon', used: [...f.used, name], key: '', child, ws: 0 }, up));
    return;
  }
  const key = f.key + String.fromCharCode(b);
  let ok = false;
  for (const [text, name] of declared) if (text.startsWith(key) && mayUse(f, name)) ok = true;
  let u8 = 0;
  if (f.node.additional && key.length <= MAX_KEY_BYTES && b >= 0x20 && b !== 0x5c) {
    const next = utf8Step(f.u8, b);
    if (next >= 0) [ok, u8] = [true, next];
  }
  if (ok) out.push(push({ ...f, key, u8 }, up));
}

function stepArray(f: Extract<Frame, { t: 'arr' }>, up: Stack | null, b: number, out: Stack[]): void {
  const { minItems, maxItems, items } = f.node;
  if (isWs(b)) return gap(f, up, out);
  if (f.ph === 'after') {
    if (b === 0x2c && f.n < maxItems) out.push(push({ ...f, ph: 'next', ws: 0 }, up));
    else if (b === 0x5d && f.n >= minItems) out.push(pop(up));
    return;
  }
  if (b === 0x5d && f.ph === 'open' && minItems === 0) return void out.push(pop(up));
  if (f.n < maxItems) startValue(items, b, push({ ...f, ph: 'after', n: f.n + 1, ws: 0 }, up), out);
}

/**
 * UTF-8 structure: state = continuation bytes due × 8 + a rule for the next one (1: A0–BF after
 * E0, 2: 80–9F after ED, 3: 90–BF after F0, 4: 80–8F after F4; no overlongs, no surrogates,
 * nothing past U+10FFFF). Returns the next state, or −1.
 */
export function utf8Step(u8: Utf8, b: number): number {
  const due = u8 >> 3;
  if (due > 0) {
    const rule = u8 & 7;
    const [lo, hi] = rule === 1 ? [0xa0, 0xbf] : rule === 2 ? [0x80, 0x9f] : rule === 3 ? [0x90, 0xbf] : rule === 4 ? [0x80, 0x8f] : [0x80, 0xbf];
    return b >= lo && b <= hi ? (due - 1) << 3 : -1;
  }
  if (b < 0x80) return 0;
  if (b >= 0xc2 && b <= 0xdf) return 1 << 3;
  if (b >= 0xe0 && b <= 0xef) return (2 << 3) | (b === 0xe0 ? 1 : b === 0xed ? 2 : 0);
  if (b >= 0xf0 && b <= 0xf4) return (3 << 3) | (b === 0xf0 ? 3 : b === 0xf4 ? 4 : 0);
  return -1;
}

const SIMPLE_ESCAPES = new Set([0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74]);
const isHex = (b: number): boolean => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);

/** A byte inside a string: esc 0 none, 1 after `\`, 2–5 the \u digits still due (5 = the first). */
function stepString(f: Extract<Frame, { t: 'str' }>, up: Stack | null, b: number, out: Stack[]): void {
  const { minLength, maxLength } = f.node;
  const counted = minLength > 0 || maxLength < Infinity; // unbounded: no count, so states repeat
  if (f.esc === 1) {
    if (SIMPLE_ESCAPES.has(b)) out.push(push({ ...f, esc: 0 }, up));
    else if (b === 0x75) out.push(push({ ...f, esc: 5 }, up));
    return;
  }
  if (f.esc > 1) {
    // The first \u digit may not be d/D: that would start a surrogate (or U+D000–U+D7FF, left out too).
    if (isHex(b) && !(f.esc === 5 && (b === 0x64 || b === 0x44))) out.push(push({ ...f, esc: f.esc === 2 ? 0 : f.esc - 1 }, up));
    return;
  }
  if (f.u8 === 0 && b === 0x22) {
    if (f.len >= minLength) out.push(pop(up));
    return;
  }
  if (b < 0x20) return;
  const starts = f.u8 === 0; // a new character begins with this byte
  if (starts && counted && f.len >= maxLength) return;
  const len = starts && counted ? f.len + 1 : f.len;
  if (starts && b === 0x5c) return void out.push(push({ ...f, len, esc: 1 }, up));
  const u8 = utf8Step(f.u8, b);
  if (u8 >= 0) out.push(push({ ...f, len, u8 }, up));
}

function stepNumber(f: Extract<Frame, { t: 'num' }>, up: Stack | null, b: number, out: Stack[]): void {
  const digit = isDigit(b);
  switch (f.ph) {
    case 'sign':
      if (b === 0x30) out.push(push({ ...f, ph: 'zero', n: 1 }, up));
      else if (digit) out.push(push({ ...f, ph: 'int', n: 1 }, up));
      return;
    case 'dot':
      if (digit) out.push(push({ ...f, ph: 'frac', n: 1 }, up));
      return;
    case 'zero':
    case 'int':
    case 'frac':
      if (digit && f.ph !== 'zero' && f.n < MAX_DIGITS) out.push(push({ ...f, n: f.n + 1 }, up));
      else if (b === 0x2e && f.ph !== 'frac' && !f.node.integer) out.push(push({ ...f, ph: 'dot', n: 0 }, up));
      else if (!digit && up !== null) step(up, b, out); // the number ended; the byte is its parent's
      return;
  }
}

/** A byte of one of several literal texts; a whole one that nothing longer shares ends at once. */
function stepLiteral(f: Extract<Frame, { t: 'lit' }>, up: Stack | null, b: number, out: Stack[]): void {
  const ch = String.fromCharCode(b);
  const values = f.values.filter((v) => v[f.pos] === ch);
  if (values.length > 0) {
    const pos = f.pos + 1;
    const longer = values.some((v) => v.length > pos);
    if (!longer) out.push(pop(up));
    else out.push(push({ t: 'lit', values, pos }, up));
  }
  // A whole literal that a longer one continued (enum [1, 12]): it may end here, the byte its parent's.
  if (f.pos > 0 && up !== null && f.values.some((v) => v.length === f.pos)) step(up, b, out);
}
