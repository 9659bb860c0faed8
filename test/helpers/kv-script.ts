/**
 * A scripted conversation that exercises every way the KV cache moves, for comparing two engines
 * (a backend or provider against a reference): a long answer past the max context (KV growths,
 * context shifts), a follow-up that reuses the first answer's prefix, and a return to it after
 * another prompt (its KV rows saved and restored). Greedy, EOS ignored.
 */
import assert from 'node:assert/strict';
import type { Engine } from '../../main/engine/generate/engine.ts';
import type { GenerationEvent, GenerationRequest } from '../../main/engine/generate/types.ts';

const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 };
const PROMPT = 'Once upon a time, there was a little girl named Lily.';
const OTHER = 'Tom had a big red truck. He liked to drive it around the house and make loud noises.';

/** One greedy answer that must end by length. @returns its done event. */
export async function greedyAnswer(engine: Engine, prompt: string, maxTokens: number, extra: Partial<GenerationRequest> = {}) {
  let last: GenerationEvent | undefined;
  for await (const ev of engine.generate({ prompt, maxTokens, sampler: GREEDY, ignoreEos: true, ...extra })) last = ev;
  assert.ok(last?.type === 'done' && last.reason === 'length', JSON.stringify(last));
  return last;
}

/** The script's answers: `long` (100 tokens, contextShift), `first`, `reuse` (follow-up), `back` (after another prompt). */
export async function kvScript(engine: Engine) {
  const long = await greedyAnswer(engine, PROMPT, 100, { contextShift: true });
  engine.reset();
  const first = await greedyAnswer(engine, PROMPT, 20);
  const followUp = `${PROMPT}${first.text} The`;
  const reuse = await greedyAnswer(engine, followUp, 20);
  await greedyAnswer(engine, OTHER, 8);
  const back = await greedyAnswer(engine, followUp, 20);
  return { long, first, reuse, back };
}

/**
 * Asserts that `b` (the engine under test) gave `a`'s (the reference's) tokens in every part of
 * the script, that the long answer shifted, and that the follow-up and the return reused the
 * cached prefix (the return: all of the prompt but its last token, restored from the saved copy).
 * @returns the number of tokens compared.
 */
export function assertSameScript(a: Awaited<ReturnType<typeof kvScript>>, b: Awaited<ReturnType<typeof kvScript>>): number {
  assert.ok(a.long.stats.contextShifts >= 1 && a.long.tokens.length === 100, `the long answer shifted ${a.long.stats.contextShifts} times`);
  assert.equal(b.long.stats.contextShifts, a.long.stats.contextShifts);
  assert.deepEqual(b.long.tokens, a.long.tokens, `under test ${b.long.text}\nreference  ${a.long.text}`);
  assert.deepEqual(b.first.tokens, a.first.tokens);
  assert.ok(b.reuse.stats.reusedTokens >= b.first.stats.promptTokens, `the follow-up reused ${b.reuse.stats.reusedTokens} tokens`);
  assert.deepEqual(b.reuse.tokens, a.reuse.tokens);
  assert.equal(b.back.stats.reusedTokens, b.reuse.stats.promptTokens - 1, 'back after another prompt: all but the last prompt token reused (the last is run for its logits)');
  assert.deepEqual(b.back.tokens, a.reuse.tokens, 'the KV rows saved and restored changed the answer');
  return b.long.tokens.length + b.first.tokens.length + 2 * b.reuse.tokens.length;
}
