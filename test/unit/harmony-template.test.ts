/**
 * gpt-oss's harmony chat template (test/fixtures/harmony/openai-gpt-oss-120b.jinja, llama.cpp's
 * copy of the template openai/gpt-oss-120b ships; origin and license in the folder's README.md)
 * renders as Python's jinja2 renders it: every case of test/fixtures/harmony/cases.json (system,
 * developer, multi-turn with earlier reasoning dropped, tools with typed parameters, a pending tool
 * call, a call followed by a final answer, the training form ending <|return|>, model identity and
 * built-in tools, reasoning_effort low/medium/high) against expected/<name>.txt written by
 * generate-expected.py with jinja2 3.1.6 as transformers configures it, the date fixed at
 * 2026-12-02 on both sides; a case jinja2 raises on raises here with the same message.
 * Then Ropewalk's own messages (reasoning, tool calls with JSON-text arguments, a tool turn)
 * through renderChatTemplate reach the template as transformers' messages do (reasoning as the
 * `thinking` field this template reads).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it, mock } from 'node:test';
import { renderChatTemplate, type ChatMessage } from '../../main/engine/tokenizer/chat-template.ts';
import { renderBounded } from '../../main/engine/tokenizer/jinja-compat.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';
import { ApiError } from '../../main/serve/api-error.ts';
import { parseChatRequest } from '../../main/serve/openai-request.ts';
import { DEFAULT_SETTINGS } from '../../main/services/settings.ts';

const DIR = path.join(PROJECT_ROOT, 'test', 'fixtures', 'harmony');
const TEMPLATE = readFileSync(path.join(DIR, 'openai-gpt-oss-120b.jinja'), 'utf8');
const cases: { name: string; vars: Record<string, unknown> }[] = JSON.parse(readFileSync(path.join(DIR, 'cases.json'), 'utf8'));
const expectedFile = (name: string): string => readdirSync(path.join(DIR, 'expected')).find((f) => f.startsWith(`${name}.`))!;

describe("gpt-oss's harmony template against jinja2", () => {
  // strftime_now reads the clock: 2026-12-02, local time, as generate-expected.py fixes it.
  before(() => mock.timers.enable({ apis: ['Date'], now: new Date(2026, 11, 2, 12) }));
  after(() => mock.timers.reset());

  it('has the cases and the jinja2 version that wrote them', () => {
    assert.equal(cases.length, 8);
    assert.equal(readFileSync(path.join(DIR, 'expected', 'JINJA2_VERSION'), 'utf8').trim(), '3.1.6');
  });
  for (const c of cases) {
    it(`renders ${c.name} as jinja2 does`, () => {
      const file = expectedFile(c.name);
      const expected = readFileSync(path.join(DIR, 'expected', file), 'utf8');
      if (file.endsWith('.error')) assert.throws(() => renderBounded(TEMPLATE, c.vars), (e: Error) => e.message.includes(expected));
      else assert.equal(renderBounded(TEMPLATE, c.vars), expected);
    });
  }
});

describe("Ropewalk's messages through the harmony template", () => {
  /** The expected render with today's date (renderChatTemplate renders in a worker, on the real clock). */
  const today = (text: string): string => {
    const d = new Date();
    const ymd = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
    return text.replace('Current date: 2026-12-02', `Current date: ${ymd}`);
  };
  const varsOf = (name: string) => cases.find((c) => c.name === name)!.vars;

  it('a pending tool call: its reasoning as `thinking`, its arguments as an object, the tool turn after it', () => {
    const v = varsOf('tools-call-pending-high');
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Use tools.' },
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: '', reasoning: 'I should call get_weather.', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Oslo", "days": 2}' }] },
      { role: 'tool', content: '{"temp": -3, "sky": "snow"}', toolCallId: 'call_1' },
    ];
    const text = renderChatTemplate(TEMPLATE, messages, { addGenerationPrompt: true, extra: { tools: v.tools, reasoning_effort: 'high' } });
    assert.equal(text, today(readFileSync(path.join(DIR, 'expected', 'tools-call-pending-high.txt'), 'utf8')));
  });

  it("earlier turns' reasoning is dropped by the template itself; reasoningEffort reaches it as reasoning_effort", () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Be terse.\nNo lists.' },
      { role: 'user', content: 'Name a colour.' },
      { role: 'assistant', content: 'Blue.', reasoning: 'Any colour will do.' },
      { role: 'user', content: 'Another one, ünïcödé 日本語?' },
    ];
    const text = renderChatTemplate(TEMPLATE, messages, { addGenerationPrompt: true, reasoningEffort: 'low' });
    assert.equal(text, today(readFileSync(path.join(DIR, 'expected', 'developer-multi-turn-low.txt'), 'utf8')));
    assert.ok(!text.includes('Any colour'));
  });
});

describe('reasoning_effort on /v1/chat/completions', () => {
  const SETTINGS = { ...DEFAULT_SETTINGS, maxContext: 512, maxTokens: 128 };
  const body = (extra: object) => ({ messages: [{ role: 'user', content: 'Hi' }], ...extra });
  it("OpenAI's field and chat_template_kwargs' become the request's reasoningEffort; absent: none", () => {
    assert.equal(parseChatRequest(body({ reasoning_effort: 'high' }), SETTINGS).request.reasoningEffort, 'high');
    assert.equal(parseChatRequest(body({ chat_template_kwargs: { reasoning_effort: 'low' } }), SETTINGS).request.reasoningEffort, 'low');
    assert.equal('reasoningEffort' in parseChatRequest(body({}), SETTINGS).request, false);
  });
  it('a value the template does not take is refused with 400 naming the field', () => {
    assert.throws(() => parseChatRequest(body({ reasoning_effort: 'extreme' }), SETTINGS), (e: unknown) => e instanceof ApiError && e.status === 400 && e.param === 'reasoning_effort');
  });
});
