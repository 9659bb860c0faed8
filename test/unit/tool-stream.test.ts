/**
 * Tool calls streamed token by token (main/serve/tool-stream.ts), per format, on replies written
 * here and fed one character at a time (the finest a stream can cut them): the content deltas join
 * to the whole reply's content; per call the first delta has the id and name, the arguments come
 * in fragments while the call is still being written (not once the reply is whole), and join to
 * JSON equal to the whole reply's; parallel calls in order, indexes 0, 1; a forced reply (its
 * opening in the prompt); a reply that only looked like a call goes out as content at the end.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseToolCalls, type ToolMode } from '../../main/serve/tool-calls.ts';
import { ToolCallStream, type ToolStreamDelta } from '../../main/serve/tool-stream.ts';
import type { ToolFormat } from '../../main/serve/tool-formats.ts';

const names = ['get_weather', 'get_time'];
const mode = (format: ToolFormat, forced = false): ToolMode => ({ format, names, forced, parallel: true });

/** Feeds `reply` a character at a time; returns every delta with the character count at which it came, and finish's calls. */
function stream(reply: string, m: ToolMode) {
  const s = new ToolCallStream(m);
  const deltas: (ToolStreamDelta & { at: number })[] = [];
  for (let i = 0; i < reply.length; i++) for (const d of s.push(reply[i])) deltas.push({ ...d, at: i + 1 });
  const end = s.finish();
  for (const d of end.deltas) deltas.push({ ...d, at: reply.length + 1 });
  return { deltas, calls: end.calls };
}

const ARGS_0 = '{"city": "Oslo", "days": 2}';
const ARGS_1 = '{"zone": "CET"}';
const cases: { format: ToolFormat; reply: string; content: string }[] = [
  { format: 'hermes', reply: `Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": ${ARGS_0}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": ${ARGS_1}}\n</tool_call>`, content: 'Let me check.' },
  { format: 'llama3-json', reply: `<|python_tag|>{"name": "get_weather", "parameters": ${ARGS_0}}; {"name": "get_time", "parameters": ${ARGS_1}}`, content: '' },
  { format: 'mistral-v3', reply: `Checking[TOOL_CALLS] [{"name": "get_weather", "arguments": ${ARGS_0}}, {"name": "get_time", "arguments": ${ARGS_1}}]`, content: 'Checking' },
  { format: 'mistral-args', reply: `[TOOL_CALLS]get_weather[ARGS]${ARGS_0}[TOOL_CALLS]get_time[ARGS]${ARGS_1}`, content: '' },
];

describe('ToolCallStream', () => {
  for (const c of cases) {
    it(`${c.format}: content, then per call id and name first, arguments in fragments as written`, () => {
      const { deltas, calls } = stream(c.reply, mode(c.format));
      const whole = parseToolCalls(c.reply, mode(c.format));
      assert.equal(deltas.filter((d) => d.type === 'content').map((d) => (d as { text: string }).text).join(''), whole.content ?? '');
      assert.deepEqual(calls.map((x) => x.name), ['get_weather', 'get_time']);
      for (const index of [0, 1]) {
        const mine = deltas.filter((d) => d.type !== 'content' && d.index === index);
        assert.equal(mine[0].type, 'call', 'the first delta of a call opens it');
        assert.deepEqual(mine.filter((d) => d.type === 'call').map((d) => (d as { id: string }).id), [calls[index].id], 'one opening, with the id finish reports');
        const fragments = mine.filter((d) => d.type === 'arguments') as { text: string; at: number }[];
        assert.ok(fragments.length > 5, `${fragments.length} fragments`);
        assert.deepEqual(JSON.parse(fragments.map((f) => f.text).join('')), JSON.parse(whole.calls[index].arguments));
        // Streamed while written: the call's first fragment came before its last character.
        const argsEnd = c.reply.indexOf(index === 0 ? ARGS_0 : ARGS_1) + (index === 0 ? ARGS_0 : ARGS_1).length;
        assert.ok(fragments[0].at < argsEnd, `first fragment at ${fragments[0].at}, arguments end at ${argsEnd}`);
      }
      const opening1 = deltas.findIndex((d) => d.type === 'call' && d.index === 1);
      assert.ok(deltas.slice(opening1).every((d) => d.type === 'content' || d.index === 1), 'call 0 is done before call 1 opens');
    });
  }
  it('a forced reply is read with the opening the prompt had', () => {
    const { deltas, calls } = stream(`{"name": "get_time", "arguments": ${ARGS_1}}`, mode('hermes', true));
    assert.equal(calls.length, 1);
    assert.ok(deltas.every((d) => d.type !== 'content'));
    assert.equal(deltas.filter((d) => d.type === 'arguments').map((d) => (d as { text: string }).text).join(''), ARGS_1);
    const mistral = stream(`get_weather[ARGS]${ARGS_0}`, mode('mistral-args', true));
    assert.deepEqual(mistral.calls.map((x) => [x.name, JSON.parse(x.arguments)]), [['get_weather', JSON.parse(ARGS_0)]]);
  });
  it('text that only looked like a call, or an undeclared tool, goes out as content', () => {
    for (const [format, reply] of [['llama3-json', '{not a call} at all'], ['hermes', 'Try <tool_call>{"name": "rm", "arguments": {}}</tool_call>'], ['mistral-v3', 'I see [TOOL_CALLS] in the manual']] as const) {
      const { deltas, calls } = stream(reply, mode(format));
      assert.equal(calls.length, 0);
      assert.ok(deltas.every((d) => d.type === 'content'), format);
      assert.equal(deltas.map((d) => (d as { text: string }).text).join(''), format === 'hermes' ? reply : reply, format);
    }
  });
  it('a marker split across deltas is held, not sent as content', () => {
    const { deltas } = stream('Hi <tool_ca', mode('hermes'));
    assert.equal(deltas.filter((d) => d.at <= 11).map((d) => (d as { text: string }).text).join(''), 'Hi');
  });
});
