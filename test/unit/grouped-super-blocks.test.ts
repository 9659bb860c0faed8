/**
 * `groupedSuperBlocks`: the native graph's K-quant layout (MatMulQ8K / GatherQ8K `row_groups` 4,
 * native/src/gguf_matmul.h KBlockIndex). The oracle is the layout's definition read from the
 * contract — rows 4g..4g+3 interleaved by super-block, the last N mod 4 rows as stored — checked
 * block by block on labelled blocks; the kernels' agreement with llama.cpp on this layout is
 * gguf-matmulq8.test.ts's. Bad sizes are a typed error naming them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { groupedSuperBlocks, K_ROW_GROUP } from '../../main/engine/model/quantized-matmul.ts';

/** N rows of kb blocks of `bytes`, each block's bytes all (row · kb + block) mod 251 + 1 (a label). */
function labelled(n: number, kb: number, bytes: number): Uint8Array {
  const out = new Uint8Array(n * kb * bytes);
  for (let r = 0; r < n; r++) for (let i = 0; i < kb; i++) out.fill(((r * kb + i) % 251) + 1, (r * kb + i) * bytes, (r * kb + i + 1) * bytes);
  return out;
}

test('groupedSuperBlocks interleaves each group of 4 rows by super-block and leaves the last N mod 4 rows as stored', () => {
  for (const [n, kb, bytes] of [[9, 3, 144], [8, 2, 210], [3, 4, 176], [1, 1, 144]] as const) {
    const stored = labelled(n, kb, bytes);
    const grouped = groupedSuperBlocks(stored, n, kb);
    assert.equal(grouped.length, stored.length);
    const full = n - (n % K_ROW_GROUP);
    for (let r = 0; r < n; r++) {
      for (let i = 0; i < kb; i++) {
        // the contract's position of row r's block i, in blocks
        const at = r < full ? Math.floor(r / 4) * 4 * kb + 4 * i + (r % 4) : r * kb + i;
        const want = ((r * kb + i) % 251) + 1;
        assert.ok(grouped.subarray(at * bytes, (at + 1) * bytes).every((v) => v === want), `n ${n} kb ${kb}: row ${r} block ${i} at block ${at}`);
      }
    }
  }
});

test('groupedSuperBlocks refuses blocks that are not N rows of kb whole blocks, naming the sizes', () => {
  assert.throws(() => groupedSuperBlocks(new Uint8Array(1001), 4, 2), (e: Error) => e instanceof ModelLoadError && /1001 bytes/.test(e.message) && /4 rows of 2/.test(e.message));
  assert.throws(() => groupedSuperBlocks(new Uint8Array(0), 4, 2), ModelLoadError);
});
