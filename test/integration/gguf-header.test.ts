/**
 * The header-only GGUF reader (gguf-header.ts) against the loader's `openGguf`
 * (@huggingface/gguf) on the real GGUF files in ../shared/models: the same tensor list (names,
 * types, shapes, absolute offsets, byte lengths), the same scalar metadata, and arrays counted.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { readGgufHeader } from '../../main/engine/model/gguf/gguf-header.ts';
import { GGUF_DIR, STORIES_GGUF } from '../helpers/paths.ts';

const FILES = [STORIES_GGUF, ...['stories260K-q4_0', 'stories260K-q5_1', 'stories260K-q8_0', 'quant-blocks'].map((f) => path.join(GGUF_DIR, `${f}.gguf`))];

test('reads what openGguf reads: tensors and scalar metadata, arrays as their counts', async () => {
  for (const file of FILES) {
    const h = await readGgufHeader(file);
    const g = await openGguf(file);
    try {
      assert.deepEqual([...h.tensors.values()], [...g.tensors.values()], file);
      for (const [k, v] of Object.entries(g.metadata)) {
        if (['version', 'tensor_count', 'kv_count'].includes(k)) continue;
        if (Array.isArray(v)) assert.deepEqual(h.metadata[k], { array: v.length }, `${file} ${k}`);
        else assert.equal(h.metadata[k], typeof v === 'bigint' ? Number(v) : v, `${file} ${k}`);
      }
      assert.equal(h.version, g.version);
    } finally {
      await g.close();
    }
  }
});

test('a file cut inside its header or its data, and a file that is not GGUF, are refused by name', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-gguf-header-'));
  try {
    const bytes = readFileSync(STORIES_GGUF);
    const cut = (n: number) => {
      const f = path.join(dir, `cut-${n}.gguf`);
      writeFileSync(f, bytes.subarray(0, n));
      return f;
    };
    await assert.rejects(readGgufHeader(cut(100)), /the 100-byte file ends inside its GGUF header/);
    await assert.rejects(readGgufHeader(cut(bytes.length - 10)), new RegExp(`past the end of the ${bytes.length - 10}-byte file`));
    const text = path.join(dir, 'notes.gguf');
    writeFileSync(text, 'plain text, long enough to hold a header');
    await assert.rejects(readGgufHeader(text), /not a GGUF file: it does not start with "GGUF"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
