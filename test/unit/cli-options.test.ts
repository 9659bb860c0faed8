/**
 * `npm run chat` option parsing (main/cli/options.ts): `--quantize` takes the contract's choices
 * (q4, q8) and refuses anything else with a usage error quoting the value.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseChatOptions, UsageError } from '../../main/cli/options.ts';

test('--quantize: q4 or q8, absent = as stored; anything else is a usage error quoting it', () => {
  const quantizeOf = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Once upon a time']);
    assert.notEqual(o, 'help');
    return o === 'help' ? undefined : o.quantize;
  };
  assert.equal(quantizeOf([]), null);
  assert.equal(quantizeOf(['--quantize', 'q4']), 'q4');
  assert.equal(quantizeOf(['--quantize=q8']), 'q8');
  for (const bad of ['q3', 'Q4', '']) {
    assert.throws(() => quantizeOf(['--quantize', bad]), (e: unknown) => e instanceof UsageError && e.message === `--quantize must be q4 or q8, got "${bad}"`);
  }
});
