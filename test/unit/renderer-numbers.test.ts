/**
 * renderer/lib/numbers.ts: settings fields take plain decimals only — "1e3", "0x100", "Infinity",
 * "1_000" and "12abc" are refused with the text quoted (JavaScript's Number() accepts several),
 * ranges and whole numbers are checked, and an empty nullable field means null.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDecimal } from '../../renderer/lib/numbers.ts';

describe('settings numbers', () => {
  it('accepts plain decimals', () => {
    for (const [text, value] of [['42', 42], [' 0.5 ', 0.5], ['.25', 0.25], ['3.', 3], ['+7', 7], ['0', 0]] as const) {
      assert.deepEqual(parseDecimal(text, 0, 100), { ok: true, value }, text);
    }
  });

  it('refuses exponents, hex, Infinity, separators and junk, quoting the text', () => {
    for (const text of ['1e3', '0x100', 'Infinity', '1_000', '12abc', '1,5', '--1']) {
      assert.deepEqual(parseDecimal(text, 0, 1e9), { ok: false, error: `"${text}" is not a decimal number.` }, text);
    }
  });

  it('checks ranges, open bounds and whole numbers; empty is null only where allowed', () => {
    assert.deepEqual(parseDecimal('0', 0, 1, { minOpen: true }), { ok: false, error: 'Enter a number above 0 to 1.' });
    assert.deepEqual(parseDecimal('1', 0, 1, { maxOpen: true }), { ok: false, error: 'Enter a number from 0 and below 1.' });
    assert.deepEqual(parseDecimal('2.5', 0, 10, { integer: true }), { ok: false, error: 'Enter a whole number.' });
    assert.deepEqual(parseDecimal('', 0, 10, { nullable: true }), { ok: true, value: null });
    assert.deepEqual(parseDecimal(' ', 0, 10), { ok: false, error: 'Enter a number.' });
  });
});
