/**
 * The one caution for a max context above the model's trained context
 * (main/contract/context-caution.ts), shared by `npm run chat -- --max-context N` and the window's
 * Max context field: none at or below the trained context, one sentence above it (what it risks
 * and what keeps full quality), none while the trained context is unknown.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maxContextCaution } from '../../main/contract/context-caution.ts';

test('below and at the trained context: no caution', () => {
  assert.equal(maxContextCaution(256, 512), null);
  assert.equal(maxContextCaution(16, 512), null);
  assert.equal(maxContextCaution(512, 512), null);
});

test('above the trained context: one sentence naming both counts, the risk and the remedy', () => {
  assert.equal(
    maxContextCaution(2048, 512),
    "Max context 2,048 is above the model's trained context (512): answers lose quality past it; 512 or less keeps them at full quality.",
  );
  assert.equal(
    maxContextCaution(513, 512),
    "Max context 513 is above the model's trained context (512): answers lose quality past it; 512 or less keeps them at full quality.",
  );
  assert.equal(
    maxContextCaution(1_048_576, 131_072),
    "Max context 1,048,576 is above the model's trained context (131,072): answers lose quality past it; 131,072 or less keeps them at full quality.",
  );
});

test('unknown trained context (no model yet): no caution', () => {
  assert.equal(maxContextCaution(4096, null), null);
  assert.equal(maxContextCaution(4096, undefined), null);
  assert.equal(maxContextCaution(4096, 0), null);
  assert.equal(maxContextCaution(4096, Number.NaN), null);
});
