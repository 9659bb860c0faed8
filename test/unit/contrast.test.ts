/**
 * test/helpers/contrast.ts against WCAG's own numbers: black on white 21:1, #767676 on white is
 * the lightest grey that passes AA (4.54:1), #777777 fails it (4.48:1), and translucent layers
 * composite before the ratio is taken.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { contrastRatio, parseCssColor, textContrast } from '../helpers/contrast.ts';

describe('WCAG contrast', () => {
  it('black on white is 21:1; #767676 passes AA on white, #777777 does not', () => {
    assert.equal(contrastRatio(parseCssColor('rgb(0, 0, 0)'), parseCssColor('rgb(255, 255, 255)')).toFixed(1), '21.0');
    assert.equal(textContrast('rgb(118, 118, 118)', ['rgb(255, 255, 255)']).toFixed(2), '4.54');
    assert.equal(textContrast('rgb(119, 119, 119)', ['rgb(255, 255, 255)']).toFixed(2), '4.48');
  });

  it('composites translucent text and backgrounds over what lies below', () => {
    // 50 % black over white is rgb(127.5…): the same ratio as that grey drawn opaque.
    const half = textContrast('rgba(0, 0, 0, 0.5)', ['rgba(0, 0, 0, 0)', 'rgb(255, 255, 255)']);
    assert.equal(half.toFixed(2), textContrast('rgb(127.5, 127.5, 127.5)', ['rgb(255, 255, 255)']).toFixed(2));
    // A transparent outermost layer counts as white.
    assert.equal(textContrast('rgb(0, 0, 0)', ['rgba(0, 0, 0, 0)']).toFixed(1), '21.0');
  });

  it('quotes a colour it cannot read', () => {
    assert.throws(() => parseCssColor('oklch(0.5 0.1 200)'), /not an rgb\(\)\/rgba\(\) colour: "oklch\(0.5 0.1 200\)"/);
  });
});
