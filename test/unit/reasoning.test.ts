/**
 * Reasoning apart from the answer (main/engine/generate/reasoning.ts and the engine's stream):
 * the splitter on texts written here, whole and cut at every character (a marker split across
 * deltas); the prompt-opens-the-block rule; the markers found from a model's template and
 * vocabulary; and `Engine.generate` on the real Qwen3 tokenizer with a backend that forces the
 * reply (test/helpers/forced-backend.ts), so the events, the done texts and the reasoning stats are
 * checked against token sequences written here: Qwen3's `<think>…</think>answer`, a template whose
 * prompt already opens `<think>` (the DeepSeek-R1 distills), `enable_thinking: false`, a raw
 * prompt, markers spelled in several tokens, an unclosed block.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HARMONY_MARKERS, promptOpensReasoning, reasoningMarkers, ReasoningSplitter, THINK_MARKERS, type PartDelta } from '../../main/engine/generate/reasoning.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';
import { QWEN3_IM_END, qwen3Engine, qwen3Tokenizer } from '../helpers/forced-backend.ts';

const THINK = THINK_MARKERS;
const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };

/** Feeds `pieces` and flushes; returns the parts joined and every delta. */
function split(pieces: string[], openInPrompt = false, markers: typeof THINK | null = THINK) {
  const s = new ReasoningSplitter(markers, openInPrompt);
  const deltas: PartDelta[] = [];
  for (const p of pieces) deltas.push(...s.push(p));
  deltas.push(...s.flush());
  const joined = (part: string) => deltas.filter((d) => d.part === part).map((d) => d.text).join('');
  assert.equal(joined('reasoning'), s.reasoning, 'reasoning deltas join to .reasoning');
  assert.equal(joined('content'), s.content, 'content deltas join to .content');
  return { reasoning: s.reasoning, content: s.content, deltas };
}

/** Every way of cutting `text` into single characters, and whole. */
function bothWays(text: string, openInPrompt = false) {
  const whole = split([text], openInPrompt);
  const chars = split([...text], openInPrompt);
  assert.deepEqual([chars.reasoning, chars.content], [whole.reasoning, whole.content], 'cut at every character, the same parts');
  for (const d of chars.deltas) assert.ok(!/<\/?think>/.test(d.text), `no marker in a delta: ${JSON.stringify(d.text)}`);
  return whole;
}

describe('ReasoningSplitter', () => {
  it("splits Qwen3's block from the answer, whitespace around the markers dropped", () => {
    const r = bothWays('<think>\nThe user greets me.\n\nI greet back.\n</think>\n\nHello!');
    assert.deepEqual([r.reasoning, r.content], ['The user greets me.\n\nI greet back.', 'Hello!']);
  });

  it('starts inside the block when the prompt opened it (only </think> is written)', () => {
    const r = bothWays('Okay, 2+2.\n</think>\n\n4', true);
    assert.deepEqual([r.reasoning, r.content], ['Okay, 2+2.', '4']);
  });

  it('a reply that does not open with the marker is all content, a later marker included', () => {
    assert.deepEqual(bothWays('Hi <think>x</think> there'), { ...bothWays('Hi <think>x</think> there'), reasoning: '', content: 'Hi <think>x</think> there' });
    const r = split(['<th', 'is is text']);
    assert.deepEqual([r.reasoning, r.content], ['', '<this is text']);
  });

  it('an unclosed block is all reasoning; a reply of only "<" stays content', () => {
    const r = bothWays('<think>\nStill thinking  ');
    assert.deepEqual([r.reasoning, r.content], ['Still thinking', '']);
    assert.deepEqual([split(['<']).reasoning, split(['<']).content], ['', '<']);
    const cut = split(['<think>a </thi']);
    assert.deepEqual([cut.reasoning, cut.content], ['a </thi', '']);
  });

  it('a model without markers: everything is content', () => {
    const r = split(['<think>x</think>y'], false, null);
    assert.deepEqual([r.reasoning, r.content], ['', '<think>x</think>y']);
  });

  it('holds back only what may still become the closing marker', () => {
    const s = new ReasoningSplitter(THINK);
    assert.deepEqual(s.push('<think>abc'), [{ part: 'reasoning', text: 'abc' }]);
    assert.deepEqual(s.push(' </'), []);
    assert.deepEqual(s.push('b>'), [{ part: 'reasoning', text: ' </b>' }]);
    assert.deepEqual(s.push('</think>Answer'), [{ part: 'content', text: 'Answer' }]);
    assert.equal(s.closed, true);
  });
});

describe('promptOpensReasoning and reasoningMarkers', () => {
  it('open at the end of the prompt; closed (Qwen3 enable_thinking false) or absent: not', () => {
    assert.equal(promptOpensReasoning('<｜Assistant｜><think>\n', THINK), true);
    assert.equal(promptOpensReasoning('<|im_start|>assistant\n<think>\n\n</think>\n\n', THINK), false);
    assert.equal(promptOpensReasoning('<|im_start|>assistant\n', THINK), false);
    assert.equal(promptOpensReasoning('<think> is a tag; say more', THINK), false);
  });

  it("Qwen3's template and vocabulary have <think> markers; a template-less tokenizer without the tokens has none", () => {
    assert.deepEqual(reasoningMarkers(qwen3Tokenizer()), THINK);
    assert.deepEqual(reasoningMarkers(qwen3Tokenizer('{{ messages[0].content }}')), THINK, 'from the vocabulary alone');
    assert.equal(reasoningMarkers({ chatTemplate: null, tokenId: () => undefined }), null);
  });
});

/** The forced reply's events: text by part, token ids, and the done event. */
async function run(script: number[], req: Partial<GenerationRequest>, template?: string) {
  const { engine } = qwen3Engine(script, template);
  const events: GenerationEvent[] = [];
  for await (const ev of engine.generate({ messages: [{ role: 'user', content: 'Hi' }], maxTokens: 100, sampler: GREEDY, ...req })) events.push(ev);
  const done = events.at(-1)!;
  assert.equal(done.type, 'done');
  if (done.type !== 'done') throw new Error('unreachable');
  const tokens = events.filter((e) => e.type === 'token');
  const text = (part: string) => tokens.filter((e) => e.type === 'token' && e.part === part).map((e) => (e as { text: string }).text).join('');
  return { done, reasoning: text('reasoning'), content: text('content'), counted: tokens.filter((e) => e.type === 'token' && e.id >= 0).length };
}

describe('Engine.generate separates reasoning (real Qwen3 tokenizer, forced reply)', () => {
  const tk = qwen3Tokenizer();
  const ids = (text: string, special = true) => tk.encode(text, { addBos: false, parseSpecial: special });

  it("Qwen3: <think> … </think> then the answer; stats count the block's tokens", async () => {
    const thinking = ids('<think>\nThe user says hi.\n</think>');
    const answer = ids('\n\nHello! How can I help?');
    const r = await run([...thinking, ...answer, QWEN3_IM_END], {});
    assert.deepEqual([r.reasoning, r.content], ['The user says hi.', 'Hello! How can I help?']);
    assert.deepEqual([r.done.reasoning, r.done.text], [r.reasoning, r.content]);
    assert.equal(r.done.reason, 'stop');
    assert.equal(r.done.stats.generatedTokens, thinking.length + answer.length);
    assert.equal(r.done.stats.reasoningTokens, thinking.length);
    assert.equal(r.counted, r.done.stats.generatedTokens, 'one token event with an id per generated token');
    assert.ok(r.done.stats.reasoningMs >= 0);
  });

  it('markers spelled in several plain tokens, and a token holding both the end of the block and the answer', async () => {
    const reply = ['<th', 'ink>Plan it.</', 'thi', 'nk>\n\nDone.'].flatMap((p) => ids(p));
    assert.equal(tk.decode(reply), '<think>Plan it.</think>\n\nDone.');
    assert.ok(!reply.includes(tk.tokenId('</think>')!), 'the markers are not single tokens here');
    const r = await run([...reply, QWEN3_IM_END], {});
    assert.deepEqual([r.reasoning, r.content], ['Plan it.', 'Done.']);
    assert.equal(r.counted, reply.length);
  });

  it('a template whose prompt already opens <think> (R1 distills): the model writes only </think>', async () => {
    const r1 = "{% for m in messages %}{{ '<｜' + m.role + '｜>' + m.content }}{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}";
    const thinking = ids('Two and two.\n</think>');
    const r = await run([...thinking, ...ids('\n\nFour.'), QWEN3_IM_END], {}, r1);
    assert.deepEqual([r.reasoning, r.content], ['Two and two.', 'Four.']);
    assert.equal(r.done.stats.reasoningTokens, thinking.length);
  });

  it('enable_thinking false: the prompt closes the block itself and the reply is all content', async () => {
    const r = await run([...ids('Hello!'), QWEN3_IM_END], { enableThinking: false });
    assert.deepEqual([r.reasoning, r.content, r.done.stats.reasoningTokens, r.done.stats.reasoningMs], ['', 'Hello!', 0, 0]);
  });

  it('a raw prompt (completions) is all content, markers included; a cut-off block is reasoning', async () => {
    const { engine } = qwen3Engine([...ids('<think>x</think>y'), QWEN3_IM_END]);
    let text = '';
    for await (const ev of engine.generate({ prompt: 'Say', maxTokens: 20, sampler: GREEDY })) {
      if (ev.type === 'token') assert.equal(ev.part, 'content');
      if (ev.type === 'done') text = ev.text;
    }
    assert.equal(text, '<think>x</think>y');
    const cut = await run(ids('<think>\nLong thought that never ends'), { maxTokens: 4 });
    assert.equal(cut.done.reason, 'length');
    assert.deepEqual([cut.done.text, cut.done.stats.reasoningTokens], ['', 4]);
    assert.ok(cut.done.reasoning.length > 0);
  });
});
