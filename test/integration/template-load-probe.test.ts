/**
 * A GGUF whose tokenizer.chat_template is hostile is refused at load, naming the file, within
 * 2 s of what the same model takes to load with a harmless template: stories260K.gguf (read where
 * it lies) with the issue's `{% for i in range(100000000) %}x{% endfor %}` inserted into its
 * metadata. Before, it loaded and the first message took 75 s and crashed the worker. A template
 * with a `{% raw %}` block (refused by @huggingface/jinja before) loads and renders as jinja2 does.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { TemplateLimitError } from '../../main/engine/errors.ts';
import { Engine } from '../../main/engine/generate/engine.ts';
import { withStringMetadata } from '../helpers/gguf-edit.ts';
import { STORIES_GGUF } from '../helpers/paths.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'ropewalk-template-probe-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** stories260K.gguf with `template` as its chat template, written under the test folder. */
function ggufWithTemplate(name: string, template: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, withStringMetadata(readFileSync(STORIES_GGUF), 'tokenizer.chat_template', template));
  return file;
}

async function timedLoad(file: string): Promise<{ ms: number; engine?: Engine; error?: unknown }> {
  const t0 = performance.now();
  try {
    const engine = await Engine.load(file, { cacheDir: path.join(dir, 'cache', path.basename(file)) });
    return { ms: performance.now() - t0, engine };
  } catch (error) {
    return { ms: performance.now() - t0, error };
  }
}

describe('chat templates checked at load', () => {
  it('loads a template with a raw block and renders it as jinja2 does', async () => {
    const file = ggufWithTemplate('raw.gguf', "{% for m in messages %}{% raw %}{{ role }}{% endraw %}={{ m.role }} {% endfor %}{{ '-' * 3 }}{{ add_generation_prompt }}");
    const { engine, error } = await timedLoad(file);
    assert.equal(error, undefined);
    try {
      // The template pads to the GGUF alignment with trailing spaces (see gguf-edit.ts).
      assert.equal(engine!.tokenizer.renderChat([{ role: 'user', content: 'Hi' }]).trimEnd(), '{{ role }}=user ---True');
    } finally {
      await engine!.dispose();
    }
  });

  it("refuses the issue's hostile template in under 2 s more than a harmless one, naming the file", async () => {
    const harmless = await timedLoad(ggufWithTemplate('harmless.gguf', '{{ messages[0].content }}'));
    assert.equal(harmless.error, undefined);
    await harmless.engine!.dispose();
    const file = ggufWithTemplate('hostile.gguf', '{% for i in range(100000000) %}x{% endfor %}');
    const hostile = await timedLoad(file);
    assert.ok(hostile.error instanceof TemplateLimitError, `expected TemplateLimitError, got ${String(hostile.error)}`);
    assert.ok(hostile.error.message.includes(`${file} (GGUF metadata tokenizer.chat_template)`), hostile.error.message);
    assert.ok(hostile.ms < harmless.ms + 2000, `hostile load ${hostile.ms} ms, harmless ${harmless.ms} ms`);
    console.log(`# load: harmless template ${Math.round(harmless.ms)} ms, hostile refused after ${Math.round(hostile.ms)} ms`);
  });
});
