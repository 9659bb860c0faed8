/**
 * Context meter arithmetic (renderer/lib/meter.ts): the amber boundary at exactly 80 %, red when
 * the next message will not fit, segment widths, the refusal sentence, and number and byte
 * formatting.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  formatBytes,
  formatTokens,
  meterInputFor,
  meterLevel,
  meterSegments,
  meterText,
  percentUsed,
  refusalReason,
  type MeterInput,
} from '../../renderer/lib/meter.ts';

/** A budget with used = system + documents + history + draft and total = used + reserve, as the contract says. */
function budget(maxContext: number, system: number, history: number, draft: number, reserve: number, documents = 0): MeterInput {
  const used = system + documents + history + draft;
  const total = used + reserve;
  return { maxContext, system, documents, history, draft, reserve, used, total, fits: total <= maxContext };
}

describe('meterLevel', () => {
  it('is ok below 80 % and amber from exactly 80 %, counting the reply reserve', () => {
    assert.equal(meterLevel(budget(1000, 0, 799, 0, 0)), 'ok');
    assert.equal(meterLevel(budget(1000, 0, 800, 0, 0)), 'amber');
    assert.equal(meterLevel(budget(1000, 100, 600, 100, 100)), 'amber'); // used 800, total 900
    // 80 % of 2048 is 1638.4: 1638 is below it, 1639 is past it.
    assert.equal(meterLevel(budget(2048, 0, 1638, 0, 0)), 'ok');
    assert.equal(meterLevel(budget(2048, 0, 1639, 0, 0)), 'amber');
  });

  it('is red when the total with the reply reserve passes the max, even at low use', () => {
    assert.equal(meterLevel(budget(512, 0, 100, 0, 412)), 'amber'); // total 512 = max: fits, and past 80 %
    assert.equal(meterLevel(budget(512, 0, 100, 1, 412)), 'red'); // total 513
    assert.equal(meterLevel(budget(512, 0, 0, 88, 512)), 'red'); // used 17 %, but 600 > 512
  });

  it('shows amber before red at default settings (issue 8: amber never showed; max 512, reserve 128)', () => {
    assert.equal(meterLevel(budget(512, 0, 281, 0, 128)), 'ok'); // total 409 < 409.6
    assert.equal(meterLevel(budget(512, 0, 282, 0, 128)), 'amber'); // total 410, used only 55 %
    assert.equal(meterLevel(budget(512, 0, 385, 0, 128)), 'red');
  });

  it('trusts fits=false from the services', () => {
    assert.equal(meterLevel({ ...budget(1000, 0, 10, 0, 10), fits: false }), 'red');
    // Rolling window: the prompt fits, the reply reserve passes the max (the answer will shift):
    // Send works, so amber, not red.
    assert.equal(meterLevel({ ...budget(512, 0, 450, 20, 128), fits: true }), 'amber');
  });
});

describe('meterSegments', () => {
  it('gives each part its share of the max context, in order', () => {
    const s = meterSegments(budget(1000, 100, 250, 50, 200, 150));
    assert.deepEqual(
      s.map((x) => [x.key, x.tokens, x.percent]),
      [
        ['system', 100, 10],
        ['documents', 150, 15],
        ['history', 250, 25],
        ['draft', 50, 5],
        ['reserve', 200, 20],
      ],
    );
  });

  it('spans the total when it passes the max, so the bar never overflows', () => {
    const s = meterSegments(budget(512, 0, 88, 0, 512));
    const sum = s.reduce((a, x) => a + x.percent, 0);
    assert.ok(Math.abs(sum - 100) < 0.05, `segments sum to ${sum}`);
    assert.equal(s.find((x) => x.key === 'reserve')?.percent, Math.round((512 / 600) * 10_000) / 100);
  });

  it('survives an empty budget', () => {
    assert.deepEqual(meterSegments(budget(0, 0, 0, 0, 0)).map((x) => x.percent), [0, 0, 0, 0, 0]);
  });
});

describe('formatting', () => {
  it('writes tokens with thousands separators', () => {
    assert.equal(meterText(1234, 2048), '1,234 / 2,048');
    assert.equal(meterText(0, 512), '0 / 512');
    assert.equal(meterText(1234, 2048, true), '≈1,234 / 2,048', 'an estimate is marked');
    assert.equal(formatTokens(1_048_576), '1,048,576');
  });

  it('rounds the percentage and clamps it to 0–100', () => {
    assert.equal(percentUsed(1234, 2048), 60.3);
    assert.equal(percentUsed(3000, 2048), 100);
    assert.equal(percentUsed(0, 0), 0);
  });

  it('writes bytes in B, KiB, MiB, GiB', () => {
    assert.equal(formatBytes(0), '0 B');
    assert.equal(formatBytes(1023), '1023 B');
    assert.equal(formatBytes(1024), '1 KiB');
    assert.equal(formatBytes(1536), '1.5 KiB');
    assert.equal(formatBytes(64 * 1024 * 1024), '64 MiB');
    assert.equal(formatBytes(3.25 * 1024 ** 3), '3.3 GiB');
  });
});

describe('refusalReason', () => {
  it('is null when the next message fits', () => {
    assert.equal(refusalReason(budget(512, 0, 0, 10, 256)), null);
  });

  it('says how many tokens the message needs with the reserve, and the max', () => {
    assert.equal(
      refusalReason(budget(512, 0, 0, 88, 512)),
      'This message needs 600 tokens with the reply reserve, but the max context is 512.',
    );
    assert.equal(
      refusalReason(budget(2048, 0, 2000, 0, 256)),
      'The conversation needs 2,256 tokens with the reply reserve, but the max context is 2,048.',
    );
  });
});

describe('meterInputFor (what the meter shows right after switching chats)', () => {
  const previous = { conversationId: 'a', maxContext: 512, system: 5, documents: 0, history: 61, draft: 0, reserve: 128, used: 66, total: 194, fits: true };
  it('shows the budget of the conversation it was asked for as is', () => {
    assert.deepEqual(meterInputFor(previous, 'a', false), previous);
  });
  it('shows only the system prompt for a new, empty chat before its own budget arrives', () => {
    const b = meterInputFor(previous, 'b', true);
    assert.equal(b.used, 5);
    assert.equal(b.history, 0);
    assert.equal(b.total, 5 + 128);
    assert.equal(b.fits, true);
  });
  it('keeps the previous figures when switching to a non-empty chat until its budget arrives', () => {
    assert.deepEqual(meterInputFor(previous, 'c', false), previous);
  });
});
