/**
 * Hostile chat templates end in a typed error within the time limit, in the sandbox worker, and
 * the sandbox goes on serving: the issue's `range(100000000)` loop (which took 75 s and 4.9 GB
 * before), loops without range, a string grown by doubling, a single library call that runs past
 * the limit (the worker is terminated and a fresh one renders the next template), and
 * syntax/`raise_exception` failures as `TemplateError`s of their kind.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { TemplateError, TemplateLimitError } from '../../main/engine/errors.ts';
import { renderChatTemplate, probeChatTemplate } from '../../main/engine/tokenizer/chat-template.ts';
import { renderInSandbox } from '../../main/engine/tokenizer/template-sandbox.ts';

const HELLO = [{ role: 'user' as const, content: 'Hello' }];
const render = (template: string) => renderChatTemplate(template, HELLO, { addGenerationPrompt: true });

/** Runs `f`, which must throw TemplateLimitError; returns the error and the milliseconds taken. */
function limitError(f: () => unknown): { error: TemplateLimitError; ms: number } {
  const t0 = performance.now();
  try {
    f();
  } catch (error) {
    assert.ok(error instanceof TemplateLimitError, `expected TemplateLimitError, got ${String(error)}`);
    return { error, ms: performance.now() - t0 };
  }
  assert.fail('the template rendered');
}

describe('the template sandbox', () => {
  // The first render boots the worker (tsx and the library: up to a second on a busy machine).
  before(() => assert.equal(render('{{ messages[0].content }}'), 'Hello'));

  it("stops the issue's range(100000000) loop in well under 2 s", () => {
    const { error, ms } = limitError(() => render('{% for i in range(100000000) %}x{% endfor %}'));
    assert.match(error.message, /called range\(\) for 100000000 items/);
    assert.ok(ms < 2000, `took ${ms} ms`);
  });

  it('stops a billion-step loop without range at the time or step limit, under 2 s', () => {
    const loops = 9; // ten items each: 10^9 iterations
    const t = '{% set l = [0,1,2,3,4,5,6,7,8,9] %}' + '{% for i in l %}'.repeat(loops) + 'x' + '{% endfor %}'.repeat(loops);
    const { error, ms } = limitError(() => render(t));
    assert.match(error.message, /ran (longer than 1000 ms|more than \d+ evaluation steps)/);
    assert.ok(ms < 2000, `took ${ms} ms`);
  });

  it('stops a string grown by doubling at the output limit', () => {
    const t = "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
    assert.match(limitError(() => render(t)).error.message, /produced more than \d+ characters/);
    assert.match(limitError(() => render("{{ 'x' * 1000000000 }}")).error.message, /produced more than/);
  });

  it('terminates a worker stuck in one library call and serves the next template from a fresh one', () => {
    const limits = { timeMs: 50, maxSteps: 1e9, maxOutputChars: 1e9 };
    const { ms } = limitError(() => renderInSandbox("{{ range(5000000) | sort | length }}", {}, limits));
    assert.ok(ms >= 50 && ms < 2000, `took ${ms} ms`);
    assert.equal(render('{{ messages[0].role }}'), 'user');
  });

  it('reports syntax errors and raise_exception as TemplateErrors of their kind', () => {
    assert.throws(() => render('{% if %}'), (e: unknown) => e instanceof TemplateError && e.kind === 'syntax');
    assert.throws(() => render("{{ raise_exception('no system role') }}"), (e: unknown) =>
      e instanceof TemplateError && e.kind === 'raised' && /no system role/.test(e.message));
  });

  it('probes at load: names the origin of a hostile template, accepts a template that raises', () => {
    const origin = '/models/evil.gguf (GGUF metadata tokenizer.chat_template)';
    assert.throws(() => probeChatTemplate(() => render('{% for i in range(100000000) %}x{% endfor %}'), origin), (e: unknown) =>
      e instanceof TemplateLimitError && e.message.startsWith(`the chat template in ${origin} called range() for 100000000 items`) &&
      /on a test conversation at load and was stopped/.test(e.message));
    assert.throws(() => probeChatTemplate(() => render('{% for %}'), origin), (e: unknown) =>
      e instanceof TemplateError && e.kind === 'syntax' && e.message.includes(origin));
    probeChatTemplate(() => render("{{ raise_exception('Only user and assistant roles') }}"), origin);
  });
});
