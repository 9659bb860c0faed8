/**
 * Stop strings never take text back (main/engine/generate/stop-strings.ts). Property test over
 * random texts (ASCII words, CJK, emoji) cut into random chunks at character boundaries, with
 * random stop strings taken from the text itself (several at once, spanning chunks, one a prefix
 * of another, some absent), against an independent oracle: the stream stops at the first chunk
 * end where some stop string is complete, and the text ends where the earliest one starts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StopStrings } from '../../main/engine/generate/stop-strings.ts';
import { mulberry32 } from '../helpers/prng.ts';

const PIECES = [' there', ' was', ' a', ' little', ' girl', ' gir', 'l', ' named', ' Lily', '.', ',', ' 世界', '你好', '🦙', '👩‍👩‍👧', ' é', 'ab', 'aab', 'a', 'b'];

/** What the stream must produce: the oracle, computed without the class under test. */
function expected(chunks: string[], stops: string[]): { text: string; stopped: boolean } {
  let soFar = '';
  for (const c of chunks) {
    soFar += c;
    const starts = stops.filter((s) => s.length > 0).map((s) => soFar.indexOf(s)).filter((i) => i >= 0);
    if (starts.length) return { text: soFar.slice(0, Math.min(...starts)), stopped: true };
  }
  return { text: soFar, stopped: false };
}

function run(chunks: string[], stops: string[]): { deltas: string[]; stopped: boolean; emitted: string } {
  const s = new StopStrings(stops);
  const deltas: string[] = [];
  let stopped = false;
  for (const c of chunks) {
    const step = s.push(c);
    deltas.push(step.text);
    if (step.stopped) {
      stopped = true;
      break;
    }
  }
  deltas.push(s.flush());
  return { deltas, stopped, emitted: s.emitted };
}

test('the failing input of issue 9: "girl" spanning " g", "ir", "l" never streams "gir"', () => {
  const chunks = [',', ' there', ' was', ' a', ' little', ' g', 'ir', 'l', ' named'];
  const r = run(chunks, ['girl']);
  assert.equal(r.deltas.join(''), ', there was a little ');
  assert.equal(r.emitted, ', there was a little ');
  assert.ok(r.stopped);
  assert.ok(!r.deltas.some((d) => d.includes('g')), `a delta showed the start of the stop string: ${JSON.stringify(r.deltas)}`);
});

test('held text that turns out not to be a stop string comes out, in order, once ruled out or at the end', () => {
  assert.deepEqual(run(['a g', 'ir', 'affe'], ['girl']).deltas, ['a ', '', 'giraffe', '']);
  assert.deepEqual(run(['a g', 'ir'], ['girl']).deltas, ['a ', '', 'gir']);
  assert.deepEqual(run(['x', 'y'], []).deltas, ['x', 'y', '']);
});

test('property: concatenated deltas equal the final text and the oracle, for random texts, chunkings and stop strings', () => {
  const rand = mulberry32(9);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)];
  for (let trial = 0; trial < 3000; trial++) {
    const chars = Array.from(Array.from({ length: 1 + Math.floor(rand() * 25) }, () => pick(PIECES)).join(''));
    // Chunks at character boundaries, as the stream decoder emits them (1–4 characters, sometimes empty).
    const chunks: string[] = [];
    for (let i = 0; i < chars.length; ) {
      const n = rand() < 0.1 ? 0 : 1 + Math.floor(rand() * 4);
      chunks.push(chars.slice(i, i + n).join(''));
      i += n;
    }
    const text = chars.join('');
    const stops: string[] = [];
    for (let k = 1 + Math.floor(rand() * 3); k > 0; k--) {
      const start = Math.floor(rand() * chars.length);
      const stop = chars.slice(start, start + 1 + Math.floor(rand() * 6)).join('');
      stops.push(stop);
      if (rand() < 0.3 && stop.length > 1) stops.push(Array.from(stop).slice(0, -1).join('')); // a prefix of another
      if (rand() < 0.2) stops.push(`${stop}🦙zz`); // absent, starts like a present one
    }
    const want = expected(chunks, stops);
    const got = run(chunks, stops);
    const why = JSON.stringify({ chunks, stops, deltas: got.deltas });
    assert.equal(got.deltas.join(''), got.emitted, why);
    assert.equal(got.emitted, want.text, why);
    assert.equal(got.stopped, want.stopped, why);
    assert.ok(text.startsWith(got.emitted), why);
    for (const s of stops.filter(Boolean)) assert.ok(!got.emitted.includes(s), `final text contains stop ${JSON.stringify(s)}: ${why}`);
  }
});
