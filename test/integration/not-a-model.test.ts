/**
 * A text file opened as a model (issue 19: a `.txt` got "llama2.c header field dim = 1701015119 is out
 * of range (1 … 1048576)", its first four letters read as an int32): it is refused as not a model, saying it is text,
 * with no llama2.c words; a real checkpoint and a checkpoint cut inside its header still reach
 * the llama2.c reader.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { detectSource, resolveModel } from '../../main/engine/model/bundle.ts';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { withLoadAdvice } from '../../main/engine/load-advice.ts';
import { STORIES_BIN } from '../helpers/paths.ts';

test('a .txt opened as a model is "not a model: … this file is text", not a llama2.c error', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-not-a-model-'));
  try {
    const txt = path.join(dir, 'notes.txt');
    writeFileSync(txt, 'Once upon a time there was a list of things to buy.\n');
    const err = await resolveModel(txt, path.join(dir, 'cache')).then(
      () => assert.fail('a text file loaded as a model'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ModelLoadError);
    assert.match(err.message, /^not a model: expected a \.gguf file, a llama2\.c \.bin checkpoint.*; this file is text/);
    assert.doesNotMatch(err.message.replace('a llama2.c .bin checkpoint', ''), /llama2\.c|header|dim/);
    assert.equal(withLoadAdvice(err.message), err.message, 'it already says what to do: no advice appended');

    // What still goes to the llama2.c reader: the real checkpoint, and one cut inside its header.
    assert.equal((await detectSource(STORIES_BIN)).kind, 'llama2c');
    const cut = path.join(dir, 'cut.bin');
    writeFileSync(cut, readFileSync(STORIES_BIN).subarray(0, 10));
    assert.equal((await detectSource(cut)).kind, 'llama2c');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
