/**
 * The test tiers: `test/unit/` needs no model weights and nothing beside the checkout (`../shared`), so
 * `npm run test:unit` runs on a bare clone; tests that read the real model, its tokenizer or the GGUF
 * fixtures live in `test/integration/`. Checked on the sources: no unit test (or unit helper) imports the
 * shared model paths or names the shared folder.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../helpers/paths.ts';

const SHARED_PATHS = /\b(STORIES_DIR|STORIES_BIN|STORIES_TOKENIZER|STORIES_GGUF|GGUF_DIR)\b|['"`][^'"`]*\.\.\/shared\//;

/** Unit test files (and their local helpers) that reach the shared models, as "file: the match". */
function sharedReaders(files: { file: string; code: string }[]): string[] {
  return files.flatMap(({ file, code }) => {
    const m = code.match(SHARED_PATHS);
    return m ? [`${file}: ${m[0]}`] : [];
  });
}

describe('test tiers', () => {
  it('no test under test/unit reads ../shared (models, tokenizers, fixtures)', () => {
    const dir = path.join(PROJECT_ROOT, 'test', 'unit');
    const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'test-tiers.test.ts').map((f) => ({ file: f, code: readFileSync(path.join(dir, f), 'utf8') }));
    assert.ok(files.length > 20, `scanned ${files.length} files`);
    assert.deepEqual(sharedReaders(files), []);
  });

  it('the check can fail', () => {
    assert.deepEqual(sharedReaders([
      { file: 'a.test.ts', code: "import { STORIES_BIN } from '../helpers/paths.ts';" },
      { file: 'b.test.ts', code: "const f = '../shared/models/x.gguf';" },
      { file: 'c.test.ts', code: "const ok = 'stories are nice';" },
    ]), ['a.test.ts: STORIES_BIN', "b.test.ts: '../shared/"]);
  });
});
