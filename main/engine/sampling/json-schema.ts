/**
 * A JSON Schema → the grammar nodes constrained decoding walks (json-machine.ts). Pure.
 *
 * Covered (draft 2020-12 / draft-07 meaning): `type` (object, array, string, number, integer,
 * boolean, null, or a list of them), `properties`, `required`, `additionalProperties` (true /
 * false / absent), `items` (one schema), `minItems` / `maxItems`, `minLength` / `maxLength`
 * (code points), `enum`, `const`, `anyOf`, `propertyOrdering` (keys in that order); annotations (`title`, `description`, `$schema`,
 * `default`, `examples`, …) are ignored. `minimum` / `maximum` are taken only where they bound
 * nothing the grammar can emit (|x| ≥ 1e15, e.g. zod's safe-integer bounds on `int()`): numbers
 * have at most 15 digits before the point and no exponent. Anything else (`pattern`, `format`, `$ref`, `oneOf`, `allOf`, a real
 * `minimum`, …) throws `UnsupportedSchemaError` naming the keyword and where it sits, as do
 * schemas no value satisfies (minLength > maxLength, an empty enum, a required property that
 * `additionalProperties: false` forbids), so the machine can never reach a dead end.
 * `{ type: "json_object" }` is `JSON_OBJECT` (any object, any values).
 */
import { UnsupportedSchemaError } from '../errors.ts';

/** The grammar of one JSON value. `id` tells nodes apart in the machine's state keys. */
export type SchemaNode =
  /** `order`: the keys' order (propertyOrdering), each key only after those before it; null: any order. */
  | { kind: 'object'; id: number; props: Map<string, SchemaNode>; required: ReadonlySet<string>; additional: SchemaNode | null; order: readonly string[] | null }
  | { kind: 'array'; id: number; items: SchemaNode; minItems: number; maxItems: number }
  | { kind: 'string'; id: number; minLength: number; maxLength: number }
  | { kind: 'number'; id: number; integer: boolean }
  /** One of these exact JSON texts (enum, const, boolean, null), as byte strings (latin1 of the UTF-8). */
  | { kind: 'literal'; id: number; values: readonly string[] }
  | { kind: 'anyOf'; id: number; options: readonly SchemaNode[] };

let nextId = 1;
const id = (): number => nextId++;

const ANNOTATIONS = new Set(['title', 'description', '$schema', '$id', '$comment', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'strict']);
const HANDLED = new Set(['type', 'properties', 'required', 'additionalProperties', 'propertyOrdering', 'items', 'minItems', 'maxItems', 'minLength', 'maxLength', 'enum', 'const', 'anyOf', 'minimum', 'maximum']);
const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'] as const;
type TypeName = (typeof TYPES)[number];
/** |x| below this is all a 15-digit integer part can reach. */
const NUMBER_BOUND = 1e15;

/** Any JSON value (json_object's values, `{}`, `additionalProperties: true`). */
const anyOptions: SchemaNode[] = [];
export const ANY: SchemaNode = { kind: 'anyOf', id: id(), options: anyOptions };
const anyObject: SchemaNode = { kind: 'object', id: id(), props: new Map(), required: new Set(), additional: ANY, order: null };
const anyArray: SchemaNode = { kind: 'array', id: id(), items: ANY, minItems: 0, maxItems: Infinity };
anyOptions.push(
  anyObject,
  anyArray,
  { kind: 'string', id: id(), minLength: 0, maxLength: Infinity },
  { kind: 'number', id: id(), integer: false },
  { kind: 'literal', id: id(), values: ['true', 'false', 'null'] },
);
/** `response_format: { type: "json_object" }`: any JSON object. */
export const JSON_OBJECT: SchemaNode = anyObject;

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * Compiles `schema` (a JSON Schema object or boolean) into grammar nodes.
 * @throws UnsupportedSchemaError (an InvalidOptionError for `response_format`) naming the
 *   keyword not covered, or the one that makes the schema unsatisfiable, with its JSON Pointer.
 */
export function compileSchema(schema: unknown): SchemaNode {
  return compile(schema, '');
}

/** Deepest schema path compiled, in JSON Pointer segments (a property costs two, an item one): a schema nested
 *  thousands deep overflowed the call stack (found by a newcomer pass: 3,000 nested `items`). */
export const MAX_SCHEMA_PATH_SEGMENTS = 200;

function compile(s: unknown, path: string): SchemaNode {
  if (path.split('/').length > MAX_SCHEMA_PATH_SEGMENTS) {
    throw new UnsupportedSchemaError('nesting', `${path.slice(0, 60)}…`, `nests deeper than ${MAX_SCHEMA_PATH_SEGMENTS} path segments, more than constrained decoding takes`);
  }
  if (s === true) return ANY;
  if (!isObject(s)) throw new UnsupportedSchemaError(s === false ? 'false' : 'type', path, `must be a schema object, not ${JSON.stringify(s)?.slice(0, 60)}`);
  for (const k of Object.keys(s)) {
    if (!HANDLED.has(k) && !ANNOTATIONS.has(k)) throw new UnsupportedSchemaError(k, path, 'is not supported by constrained decoding');
  }
  checkBounds(s, path);
  if (s.anyOf !== undefined) return compileAnyOf(s, path);
  if (s.enum !== undefined || s.const !== undefined) return compileLiterals(s, path);
  const types = typeList(s, path);
  const nodes = types.map((t) => compileType(t, s, path));
  return nodes.length === 1 ? nodes[0] : { kind: 'anyOf', id: id(), options: nodes };
}

function typeList(s: Record<string, unknown>, path: string): TypeName[] {
  if (s.type === undefined) {
    // No type: what the other keywords imply, or any value.
    if (s.properties !== undefined || s.required !== undefined || s.additionalProperties !== undefined) return ['object'];
    if (s.items !== undefined || s.minItems !== undefined || s.maxItems !== undefined) return ['array'];
    if (s.minLength !== undefined || s.maxLength !== undefined) return ['string'];
    return ['object', 'array', 'string', 'number', 'boolean', 'null'];
  }
  const list = Array.isArray(s.type) ? s.type : [s.type];
  if (list.length === 0) throw new UnsupportedSchemaError('type', path, 'is an empty list: no value matches');
  for (const t of list) if (!TYPES.includes(t as TypeName)) throw new UnsupportedSchemaError('type', path, `names an unknown type ${JSON.stringify(t)}`);
  const unique = [...new Set(list as TypeName[])];
  // "number" already takes every integer.
  return unique.includes('number') ? unique.filter((t) => t !== 'integer') : unique;
}

function compileType(t: TypeName, s: Record<string, unknown>, path: string): SchemaNode {
  switch (t) {
    case 'object':
      return compileObject(s, path);
    case 'array': {
      const minItems = count(s, 'minItems', path, 0);
      const maxItems = count(s, 'maxItems', path, Infinity);
      if (minItems > maxItems) throw new UnsupportedSchemaError('minItems', path, `(${minItems}) is above maxItems (${maxItems}): no array matches`);
      if (Array.isArray(s.items)) throw new UnsupportedSchemaError('items', path, 'as a list (tuple) is not supported; give one schema');
      const items = s.items === undefined ? ANY : compile(s.items, `${path}/items`);
      return { kind: 'array', id: id(), items, minItems, maxItems };
    }
    case 'string': {
      const minLength = count(s, 'minLength', path, 0);
      const maxLength = count(s, 'maxLength', path, Infinity);
      if (minLength > maxLength) throw new UnsupportedSchemaError('minLength', path, `(${minLength}) is above maxLength (${maxLength}): no string matches`);
      return { kind: 'string', id: id(), minLength, maxLength };
    }
    case 'number':
    case 'integer':
      return { kind: 'number', id: id(), integer: t === 'integer' };
    case 'boolean':
      return { kind: 'literal', id: id(), values: ['true', 'false'] };
    case 'null':
      return { kind: 'literal', id: id(), values: ['null'] };
  }
}

function compileObject(s: Record<string, unknown>, path: string): SchemaNode {
  const props = new Map<string, SchemaNode>();
  if (s.properties !== undefined) {
    if (!isObject(s.properties)) throw new UnsupportedSchemaError('properties', path, 'must be an object of schemas');
    for (const [k, v] of Object.entries(s.properties)) props.set(k, compile(v, `${path}/properties/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`));
  }
  const ap = s.additionalProperties;
  if (ap !== undefined && typeof ap !== 'boolean') throw new UnsupportedSchemaError('additionalProperties', path, 'as a schema is not supported; give true or false');
  const additional = ap === false ? null : ANY;
  const required = s.required ?? [];
  if (!Array.isArray(required) || !required.every((r) => typeof r === 'string')) throw new UnsupportedSchemaError('required', path, 'must be a list of property names');
  for (const r of required) {
    if (!props.has(r) && !additional) throw new UnsupportedSchemaError('required', path, `names ${JSON.stringify(r)}, which additionalProperties: false forbids`);
    if (!props.has(r)) props.set(r, ANY);
  }
  return { kind: 'object', id: id(), props, required: new Set(required), additional, order: ordering(s.propertyOrdering, props, additional, path) };
}

/**
 * `propertyOrdering` (as Google's structured output names it): every declared property, in the
 * order the keys must come, with `additionalProperties: false`. Tool calls use it so a forced
 * call writes its name before its arguments, as models do (and a stream can name the call first).
 * @throws UnsupportedSchemaError for a list that is not exactly the properties, or beside other properties.
 */
function ordering(o: unknown, props: Map<string, SchemaNode>, additional: SchemaNode | null, path: string): readonly string[] | null {
  if (o === undefined) return null;
  const ok = Array.isArray(o) && o.length === props.size && new Set(o).size === o.length && o.every((k) => typeof k === 'string' && props.has(k));
  if (!ok || additional) throw new UnsupportedSchemaError('propertyOrdering', path, 'must list every property once, with additionalProperties: false');
  return o as string[];
}

function compileAnyOf(s: Record<string, unknown>, path: string): SchemaNode {
  const others = Object.keys(s).filter((k) => k !== 'anyOf' && !ANNOTATIONS.has(k));
  if (others.length > 0) throw new UnsupportedSchemaError(others[0], path, 'beside anyOf is not supported; move it into each branch');
  if (!Array.isArray(s.anyOf) || s.anyOf.length === 0) throw new UnsupportedSchemaError('anyOf', path, 'must be a non-empty list of schemas');
  const options = s.anyOf.map((b, i) => compile(b, `${path}/anyOf/${i}`));
  return options.length === 1 ? options[0] : { kind: 'anyOf', id: id(), options };
}

/** enum / const: the values (those of the schema's `type` and lengths, when given) as JSON texts. */
function compileLiterals(s: Record<string, unknown>, path: string): SchemaNode {
  const keyword = s.const !== undefined ? 'const' : 'enum';
  if (s.const !== undefined && s.enum !== undefined) throw new UnsupportedSchemaError('const', path, 'together with enum is not supported');
  const values = s.const !== undefined ? [s.const] : s.enum;
  if (!Array.isArray(values)) throw new UnsupportedSchemaError('enum', path, 'must be a list of values');
  const types = s.type === undefined ? null : typeList(s, path);
  const fits = (v: unknown): boolean => {
    if (types && !types.some((t) => typeOf(v, t))) return false;
    if (typeof v !== 'string') return true;
    const n = [...v].length;
    return n >= count(s, 'minLength', path, 0) && n <= count(s, 'maxLength', path, Infinity);
  };
  // As bytes (latin1 of the UTF-8), the unit the machine reads.
  const texts = [...new Set(values.filter(fits).map((v) => Buffer.from(JSON.stringify(v), 'utf8').toString('latin1')))];
  if (texts.length === 0) throw new UnsupportedSchemaError(keyword, path, 'leaves no value that matches the schema');
  return { kind: 'literal', id: id(), values: texts };
}

function typeOf(v: unknown, t: TypeName): boolean {
  switch (t) {
    case 'object':
      return isObject(v);
    case 'array':
      return Array.isArray(v);
    case 'string':
      return typeof v === 'string';
    case 'number':
      return typeof v === 'number';
    case 'integer':
      return Number.isInteger(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
  }
}

/** A non-negative integer keyword, or `fallback` when absent. */
function count(s: Record<string, unknown>, key: string, path: string, fallback: number): number {
  const v = s[key];
  if (v === undefined) return fallback;
  if (!Number.isInteger(v) || (v as number) < 0) throw new UnsupportedSchemaError(key, path, `must be a non-negative integer, not ${JSON.stringify(v)}`);
  return v as number;
}

/** minimum / maximum: taken only where they bound nothing the grammar emits. */
function checkBounds(s: Record<string, unknown>, path: string): void {
  for (const [key, outside] of [['minimum', (v: number) => v <= -NUMBER_BOUND], ['maximum', (v: number) => v >= NUMBER_BOUND]] as const) {
    const v = s[key];
    if (v !== undefined && !(typeof v === 'number' && outside(v))) {
      throw new UnsupportedSchemaError(key, path, `(${JSON.stringify(v)}) is not supported; only bounds at or beyond ±1e15, which 15-digit numbers never reach`);
    }
  }
}
