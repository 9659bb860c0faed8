/**
 * A bounded, Jinja2-faithful renderer over @huggingface/jinja (0.5.11, the newest release: it has
 * no `raw` block, prints booleans and None the JavaScript way and refuses `'x' * 3`).
 *
 * Contract: `renderBounded(source, variables, limits)` returns the text Python's jinja2 renders
 * for a chat template under transformers' settings (trim_blocks, lstrip_blocks), or throws:
 * `TemplateLimitError` when rendering passes a limit (evaluation steps, output characters, wall
 * time, `range()` length), `TemplateError` for a syntax error, a failure or `raise_exception`.
 *
 * What is added around the library, and why each is safe:
 * - `{% raw %}…{% endraw %}` is cut out of the source before the library's lexer sees it; its text
 *   goes in a variable and the block becomes `{% if true %}{{ __ropewalk_raw[i] }}{% endif %}`, so
 *   the surrounding tags keep their whitespace control (`-`, trim_blocks, lstrip_blocks).
 * - An `Interpreter` subclass: printing a boolean gives `True`/`False` and a printed None gives
 *   `None` (Jinja2's `str()`), also through `~`; `str * int` and `int * str` repeat the string.
 * - The same subclass counts every evaluated node and checks each produced string's length, so a
 *   loop, a recursive macro or a growing string ends in a typed error instead of running on.
 * Nothing here is safe against a template that blocks inside one library call; the caller runs
 * this in a worker it can terminate (template-sandbox.ts).
 */

import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import { TemplateError, TemplateLimitError } from '../errors.ts';

/** Bounds of one render. */
export interface RenderLimits {
  /** Evaluated nodes (expressions and statements), e.g. 2,000,000. */
  maxSteps: number;
  /** Characters of any string the template produces, the output included, e.g. 1,000,000. */
  maxOutputChars: number;
  /** Wall-clock milliseconds, checked every 1024 steps. */
  timeMs: number;
}

export const DEFAULT_RENDER_LIMITS: RenderLimits = { maxSteps: 2_000_000, maxOutputChars: 1_000_000, timeMs: 1000 };

const RAW_VAR = '__ropewalk_raw';
const RAW_BLOCK = /\{%(-?)\s*raw\s*(-?)%\}([\s\S]*?)\{%(-?)\s*endraw\s*(-?)%\}/g;

/**
 * Replaces each `{% raw %}` block by a print of its text from a variable (see the file comment).
 * Jinja2: `-` inside the raw tag strips the raw text's leading whitespace, `-` inside endraw its
 * trailing whitespace; the outer `-`s strip around the block. Returns the new source and the texts.
 */
export function extractRawBlocks(source: string): { source: string; raws: string[] } {
  const raws: string[] = [];
  const out = source.replace(RAW_BLOCK, (_m, openL: string, openR: string, body: string, closeL: string, closeR: string) => {
    let text = body;
    if (openR) text = text.replace(/^\s+/, '');
    if (closeL) text = text.replace(/\s+$/, '');
    raws.push(text);
    return `{%${openL} if true %}{{ ${RAW_VAR}[${raws.length - 1}] }}{% endif ${closeR}%}`;
  });
  return { source: out, raws };
}

type Program = ReturnType<typeof parse>;
/** An AST node and a runtime value as the library's interpreter handles them (its d.ts keeps these private). */
type Node = { type: string; [field: string]: unknown };
type Value = { type: string; value: unknown; toString(): string };
type Scope = Environment;
interface OpenInterpreter {
  evaluate(node: Node | undefined, env: Scope): Value;
  evaluateBlock(statements: Node[], env: Scope): Value;
  evaluateBinaryExpression(node: Node, env: Scope): Value;
  run(program: Program): Value;
}
// The methods overridden below exist on the class at run time; only its d.ts calls them private.
const OpenInterpreterClass = Interpreter as unknown as new (env: Environment) => OpenInterpreter;

// The library exports neither its value classes nor its globals; take the string class from a
// literal it evaluates.
const StringValue = new OpenInterpreterClass(new Environment()).evaluate({ type: 'StringLiteral', value: '' }, new Environment())
  .constructor as new (s: string) => Value;

/** Node types that are statements: their result is printed only when it is text. */
const STATEMENTS = new Set(['Program', 'Set', 'If', 'For', 'Macro', 'CallStatement', 'Break', 'Continue', 'FilterStatement', 'Comment']);

/** Jinja2's `str()` of a value for printing: True/False/None as Python writes them. */
function pyString(v: Value): string {
  if (v.type === 'BooleanValue') return v.value ? 'True' : 'False';
  if (v.type === 'NullValue') return 'None';
  return v.toString();
}

class BoundedInterpreter extends OpenInterpreterClass {
  private steps = 0;
  private readonly deadline: number;

  constructor(env: Environment, private readonly limits: RenderLimits) {
    super(env);
    this.deadline = Date.now() + limits.timeMs;
  }

  override evaluate(node: Node | undefined, env: Scope): Value {
    if (++this.steps > this.limits.maxSteps) {
      throw new TemplateLimitError(`ran more than ${this.limits.maxSteps} evaluation steps`);
    }
    if ((this.steps & 1023) === 0 && Date.now() > this.deadline) {
      throw new TemplateLimitError(`ran longer than ${this.limits.timeMs} ms`);
    }
    return this.checked(super.evaluate(node, env));
  }

  override evaluateBlock(statements: Node[], env: Scope): Value {
    let out = '';
    for (const s of statements) {
      const v = this.evaluate(s, env);
      if (v.type === 'UndefinedValue') continue;
      if (v.type === 'NullValue' && STATEMENTS.has(s.type)) continue;
      out += pyString(v);
      this.checkLength(out.length);
    }
    return new StringValue(out);
  }

  override evaluateBinaryExpression(node: Node, env: Scope): Value {
    const op = (node.operator as { value: string }).value;
    if (op !== '*' && op !== '~') return super.evaluateBinaryExpression(node, env);
    const left = this.evaluate(node.left as Node, env);
    const right = this.evaluate(node.right as Node, env);
    if (op === '~') return this.checked(new StringValue(pyString(left) + pyString(right)));
    const rep = repetition(left, right) ?? repetition(right, left);
    if (rep) {
      this.checkLength(rep.text.length * rep.times);
      return new StringValue(rep.text.repeat(rep.times));
    }
    const [a, b] = [literal(left), literal(right)];
    if (!a || !b) throw new TemplateError('render', `failed to render: cannot multiply ${left.type} by ${right.type}`);
    // Numbers: let the library multiply the values already evaluated.
    return super.evaluateBinaryExpression({ ...node, left: a, right: b }, env);
  }

  private checked(v: Value): Value {
    if (v.type === 'StringValue') this.checkLength((v.value as string).length);
    return v;
  }

  private checkLength(chars: number): void {
    if (chars > this.limits.maxOutputChars) {
      throw new TemplateLimitError(`produced more than ${this.limits.maxOutputChars} characters`);
    }
  }
}

/** `'ab' * 3` (Python: a non-positive count gives ""); null when the operands are not str × int. */
function repetition(s: Value, n: Value): { text: string; times: number } | null {
  if (s.type !== 'StringValue' || n.type !== 'IntegerValue') return null;
  return { text: s.value as string, times: Math.max(0, n.value as number) };
}

/** A literal node of an evaluated number (the library's node types), or null for a non-number. */
function literal(v: Value): Node | null {
  const type = v.type === 'FloatValue' ? 'FloatLiteral' : v.type === 'IntegerValue' ? 'IntegerLiteral' : null;
  return type ? { type, value: v.value } : null;
}

/** Python's `range(stop)` / `range(start, stop[, step])`, refused past `maxSteps` items. */
function boundedRange(maxItems: number) {
  return (a: number, b?: number, step = 1): number[] => {
    const [start, stop] = b === undefined ? [0, a] : [a, b];
    if (!Number.isInteger(start) || !Number.isInteger(stop) || !Number.isInteger(step) || step === 0) {
      throw new TemplateError('render', `failed to render: range(${[a, b, step].filter((x) => x !== undefined).join(', ')}) needs integers and a non-zero step`);
    }
    const count = Math.max(0, Math.ceil((stop - start) / step));
    if (count > maxItems) throw new TemplateLimitError(`called range() for ${count} items (at most ${maxItems})`);
    return Array.from({ length: count }, (_, i) => start + i * step);
  };
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** Python's `datetime.now().strftime(format)` for the directives chat templates use (local time). */
export function strftimeNow(format: string, now = new Date()): string {
  const p2 = (n: number) => String(n).padStart(2, '0');
  const map: Record<string, () => string> = {
    Y: () => String(now.getFullYear()), y: () => p2(now.getFullYear() % 100), m: () => p2(now.getMonth() + 1),
    d: () => p2(now.getDate()), B: () => MONTHS[now.getMonth()], b: () => MONTHS[now.getMonth()].slice(0, 3),
    A: () => DAYS[now.getDay()], a: () => DAYS[now.getDay()].slice(0, 3), H: () => p2(now.getHours()),
    M: () => p2(now.getMinutes()), S: () => p2(now.getSeconds()), '%': () => '%',
  };
  return format.replace(/%(.)/g, (m, c: string) => map[c]?.() ?? m);
}

// Parsing costs far more than rendering, and a conversation renders the same template every turn.
let cached: { source: string; program: Program; raws: string[] } | null = null;

/** Parses `source` (after cutting out raw blocks), or throws `TokenizerError` quoting the parser. */
function compile(source: string): { program: Program; raws: string[] } {
  if (cached?.source === source) return cached;
  const { source: cut, raws } = extractRawBlocks(source);
  let program: Program;
  try {
    program = parse(tokenize(cut, { lstrip_blocks: true, trim_blocks: true }));
  } catch (cause) {
    throw new TemplateError('syntax', `has a syntax error: ${messageOf(cause)}`, undefined, { cause });
  }
  cached = { source, program, raws };
  return cached;
}

/**
 * Renders the template `source` with `variables` (plain JSON-like values) within `limits`.
 * Globals as transformers gives them: true/false/none (and Python's spellings), range (bounded),
 * namespace (the library's), raise_exception, strftime_now.
 * @throws TemplateLimitError past a limit; TemplateError for syntax errors, failures, raise_exception.
 */
export function renderBounded(source: string, variables: Record<string, unknown>, limits: RenderLimits = DEFAULT_RENDER_LIMITS): string {
  const { program, raws } = compile(source);
  const env = new Environment();
  for (const [k, v] of [['true', true], ['false', false], ['none', null], ['True', true], ['False', false], ['None', null]] as const) env.set(k, v);
  env.set('raise_exception', (message: unknown) => {
    throw new TemplateError('raised', `raised an error: ${String(message)}`);
  });
  env.set('range', boundedRange(limits.maxSteps));
  env.set('strftime_now', (format: string) => strftimeNow(String(format)));
  env.set(RAW_VAR, raws);
  for (const [k, v] of Object.entries(variables)) env.set(k, v);
  try {
    return new BoundedInterpreter(env, limits).run(program).value as string;
  } catch (cause) {
    if (cause instanceof TemplateError) throw cause;
    throw new TemplateError('render', `failed to render: ${messageOf(cause)}`, undefined, { cause });
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
