/**
 * The chat CLI's thinking frame (main/cli/thinking.ts) on the deltas a reasoning reply streams:
 * reasoning framed on stderr ("Thinking..." … "...done thinking."), dimmed only on a terminal, the
 * answer left for stdout; a reply that ends while thinking still closes the frame; a reply with
 * no reasoning writes nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ThinkingPrinter } from '../../main/cli/thinking.ts';
import type { ReplyPart } from '../../main/engine/generate/reasoning.ts';

function print(deltas: [ReplyPart, string][], tty: boolean): { err: string; out: string } {
  let err = '';
  let out = '';
  const p = new ThinkingPrinter((s) => (err += s), tty);
  for (const [part, text] of deltas) if (!p.take(part, text)) out += text;
  p.end();
  return { err, out };
}

test('reasoning framed on stderr, answer on stdout; dimmed on a terminal only', () => {
  const deltas: [ReplyPart, string][] = [['reasoning', 'Let me'], ['reasoning', ' see.'], ['content', ''], ['content', 'Hello'], ['content', '!']];
  assert.deepEqual(print(deltas, false), { err: 'Thinking...\nLet me see.\n...done thinking.\n\n', out: 'Hello!' });
  assert.deepEqual(print(deltas, true), { err: '\x1b[2mThinking...\nLet me see.\n...done thinking.\x1b[22m\n\n', out: 'Hello!' });
});

test('cut off while thinking: the frame is closed; no reasoning: nothing on stderr', () => {
  assert.deepEqual(print([['reasoning', 'Hmm']], false), { err: 'Thinking...\nHmm\n...done thinking.\n\n', out: '' });
  assert.deepEqual(print([['content', 'Just text']], false), { err: '', out: 'Just text' });
});
