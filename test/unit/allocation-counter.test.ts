/** The allocation counter the "without allocating" tests rely on sees each kind of allocation (so their checks can fail). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { countAllocations } from '../helpers/allocation-counter.ts';

describe('countAllocations', () => {
  it('sees typed arrays, ArrayBuffers and Buffer.alloc*, by bytes; views over a buffer cost nothing', async () => {
    const { result, largestBytes, totalBytes } = await countAllocations(async () => {
      const f = new Float32Array(1 << 20); // 4 MiB
      const view = new Uint8Array(f.buffer); // a view: 0
      const b = Buffer.allocUnsafe(1000);
      const ab = new ArrayBuffer(24);
      const copy = new Float64Array([1, 2, 3]); // 24
      return f instanceof Float32Array && view.length === 4 << 20 && b.length === 1000 && ab.byteLength === 24 && copy.length === 3;
    });
    assert.equal(result, true, 'instanceof and the values work through the wrappers');
    assert.equal(largestBytes, 4 << 20);
    assert.equal(totalBytes, (4 << 20) + 1000 + 24 + 24);
  });

  it('restores the globals after a throw', async () => {
    const F32 = Float32Array;
    await assert.rejects(countAllocations(async () => { throw new RangeError('boom'); }), /boom/);
    assert.equal(globalThis.Float32Array, F32);
    assert.equal(new Float32Array(2).length, 2);
  });
});
