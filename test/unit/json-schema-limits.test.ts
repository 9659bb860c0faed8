/**
 * What a newcomer pass broke in structured output, as tests: a schema nested thousands deep overflowed
 * the call stack (an untyped 500 on /v1, exit 1 in the CLI) and is now a typed refusal naming the
 * nesting; `stop` beside a JSON response_format cut the JSON and still said `stop`, and is now a 400
 * naming `stop` on /v1 (the engine refuses it too).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidOptionError, UnsupportedSchemaError } from '../../main/engine/errors.ts';
import { compileSchema, MAX_SCHEMA_PATH_SEGMENTS } from '../../main/engine/sampling/json-schema.ts';
import { ApiError, parseChatRequest } from '../../main/serve/openai-request.ts';
import { DEFAULT_SETTINGS } from '../../main/services/settings.ts';
import type { Settings } from '../../main/contract/types.ts';

/** The app's settings at a 512-position model (stories260K's trained context), as the window starts them. */
const SETTINGS: Settings = { ...DEFAULT_SETTINGS, maxContext: 512, maxTokens: 128 };

/** `{ type: array, items: … }` nested `depth` times around a string. */
function nestedArrays(depth: number): unknown {
  let s: unknown = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { type: 'array', items: s };
  return s;
}

describe('JSON Schema limits', () => {
  it('a schema nested 3,000 deep is refused naming the nesting; one at the limit compiles', () => {
    assert.throws(() => compileSchema(nestedArrays(3000)), (e: unknown) => e instanceof UnsupportedSchemaError && e.keyword === 'nesting' && e instanceof InvalidOptionError && e.option === 'response_format');
    assert.ok(compileSchema(nestedArrays(MAX_SCHEMA_PATH_SEGMENTS - 2)));
  });

  it('/v1: stop beside a JSON response_format is a 400 naming stop; a JSON format alone, or stop alone, parses', () => {
    const body = (extra: Record<string, unknown>) => ({ messages: [{ role: 'user', content: 'Once' }], ...extra });
    const format = { response_format: { type: 'json_object' } };
    assert.throws(() => parseChatRequest(body({ ...format, stop: ['"'] }), SETTINGS), (e: unknown) => e instanceof ApiError && e.status === 400 && e.param === 'stop');
    assert.equal(parseChatRequest(body(format), SETTINGS).request.responseFormat?.type, 'json_object');
    assert.deepEqual(parseChatRequest(body({ stop: ['"'] }), SETTINGS).request.stop, ['"']);
  });

  it('/v1: response_format says what is wrong: an unknown type lists all three types; json_schema without its object names it', () => {
    const refusal = (format: unknown): ApiError => {
      try {
        parseChatRequest({ messages: [{ role: 'user', content: 'Once' }], response_format: format }, SETTINGS);
      } catch (e) {
        if (e instanceof ApiError) return e;
        throw e;
      }
      throw new Error('accepted');
    };
    const yaml = refusal({ type: 'yaml' });
    assert.equal(yaml.param, 'response_format.type');
    assert.match(yaml.message, /text.*json_object.*json_schema/);
    const bare = refusal({ type: 'json_schema' });
    assert.equal(bare.param, 'response_format.json_schema');
  });
});
