/**
 * `npm run chat` end to end: the CLI as a subprocess (real ONNX Runtime, real stories260K),
 * each test with its own import cache folder (ROPEWALK_CACHE_DIR).
 *
 * Checks the contract from the README and the issue: greedy output equals llama2.c run.c's
 * reference continuation and ends where run.c ends it; `--json` shape and stats; `context-full`
 * at the max context (the last sampled token is emitted but never fed, as run.c does); seeds;
 * `--max-tokens`; the import cache (reuse, and concurrent first starts); and that every bad
 * option, bad prompt and bad model ends with one line on stderr, the documented exit code
 * (2 usage, 1 model) and no stack trace.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import { makeBadModels, removeBadModels, type BadModels } from '../helpers/bad-models.ts';
import {
  assertOneLineError,
  decodeTok512,
  describeRun,
  freshCacheDir,
  mapLimit,
  parseJsonRun,
  runBatch,
  runChat,
  type ChatJson,
} from '../helpers/cli-run.ts';
import { GGUF_DIR, PROJECT_ROOT, STORIES_BIN, STORIES_GGUF } from '../helpers/paths.ts';
import { FINGERPRINTS_DIR } from '../../main/engine/model/bundle.ts';

/** llama2.c run.c, greedy, prompt "Once upon a time" (from ../shared/models/stories260K/README.md). */
const REFERENCE =
  ', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.';
const PROMPT = 'Once upon a time';
/** stories260K: 5 layers, 4 KV heads, head size 8, trained context 512, float32. */
const LAYERS = 5;
const KV_HEADS = 4;
const HEAD_DIM = 8;
const TRAINED_CONTEXT = 512;

const cacheDirs: string[] = [];
let bad: BadModels | undefined;

async function cache(): Promise<string> {
  const dir = await freshCacheDir();
  cacheDirs.push(dir);
  return dir;
}

before(async () => {
  bad = await makeBadModels();
});

after(async () => {
  await removeBadModels(bad);
  await Promise.all(cacheDirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** A cache folder's entries but its fingerprint records. */
const bundleFolders = async (dir: string) => (await readdir(dir)).filter((e) => e !== FINGERPRINTS_DIR);

const isPow2 = (n: number) => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

/** The JSON object has every documented field, with the documented types. */
function assertJsonShape(j: ChatJson): void {
  assert.equal(typeof j.text, 'string');
  assert.ok(Array.isArray(j.promptTokens) && j.promptTokens.every(Number.isInteger), 'promptTokens: int[]');
  assert.ok(Array.isArray(j.tokens) && j.tokens.every(Number.isInteger), 'tokens: int[]');
  assert.ok(['stop', 'length', 'context-full', 'cancelled'].includes(j.finishReason), `finishReason ${j.finishReason}`);
  assert.ok(j.stats.backend === 'native' || j.stats.backend === 'js', `stats.backend ${j.stats.backend}`);
  for (const k of ['ttftMs', 'prefillTokensPerSec', 'decodeTokensPerSec', 'contextUsed', 'maxContext'] as const) {
    assert.ok(Number.isFinite(j.stats[k]) && j.stats[k] >= 0, `stats.${k} = ${j.stats[k]}`);
  }
  for (const k of ['capacity', 'rowsComputed', 'growths', 'bytes'] as const) {
    assert.ok(Number.isInteger(j.stats.rope[k]) && j.stats.rope[k] >= 0, `stats.rope.${k} = ${j.stats.rope[k]}`);
  }
  for (const k of ['capacity', 'growths', 'bytes'] as const) {
    assert.ok(Number.isInteger(j.stats.kv[k]) && j.stats.kv[k] >= 0, `stats.kv.${k} = ${j.stats.kv[k]}`);
  }
}

/** Cache counters agree with the model's shape: cos+sin rows of headDim/2 float32s; K+V per layer in the KV dtype --json names (float16 by default). */
function assertCacheBytes(j: ChatJson): void {
  assert.equal(j.stats.rope.bytes, j.stats.rope.capacity * 2 * (HEAD_DIM / 2) * 4, 'rope.bytes');
  assert.ok(j.model.kvCacheDtype, '--json names the KV dtype');
  const kvElementBytes = { float16: 2, float32: 4 }[j.model.kvCacheDtype];
  assert.equal(j.stats.kv.bytes, j.stats.kv.capacity * 2 * LAYERS * KV_HEADS * HEAD_DIM * kvElementBytes, 'kv.bytes');
}

test('--json --temperature 0 "Once upon a time": llama2.c reference continuation, token ids, sane stats', async () => {
  const r = await runChat(['--json', '--temperature', '0', PROMPT], await cache());
  const j = parseJsonRun(r);
  assert.equal(r.stderr, '', describeRun(r));
  assertJsonShape(j);

  // Prompt: BOS, then the text with llama2.c's dummy leading space.
  assert.equal(j.promptTokens[0], 1, 'BOS first');
  assert.equal(decodeTok512(j.promptTokens.slice(1)), ` ${PROMPT}`);
  assert.ok(j.text.startsWith(REFERENCE), `greedy text differs from llama2.c run.c:\n${j.text.slice(0, REFERENCE.length + 40)}`);
  assert.equal(decodeTok512(j.tokens), j.text, 'tokens decode to text');

  // Default --max-tokens is 256.
  assert.ok(j.finishReason === 'length' || j.finishReason === 'stop', j.finishReason);
  if (j.finishReason === 'length') assert.equal(j.tokens.length, 256);
  else assert.ok(j.tokens.length < 256);
  assert.ok(!j.tokens.includes(2), 'EOS is never emitted as a token');

  const s = j.stats;
  assert.equal(s.maxContext, TRAINED_CONTEXT, 'default max context = trained context');
  // Every emitted token but a length-ending last one was fed back (EOS ends after its position is fed).
  assert.equal(s.contextUsed, j.promptTokens.length + j.tokens.length - (j.finishReason === 'length' ? 1 : 0));
  assert.ok(s.ttftMs > 0 && s.ttftMs < 60_000, `ttftMs ${s.ttftMs}`);
  assert.ok(s.prefillTokensPerSec > 0, `prefillTokensPerSec ${s.prefillTokensPerSec}`);
  assert.ok(s.decodeTokensPerSec > 0, `decodeTokensPerSec ${s.decodeTokensPerSec}`);
  for (const c of [s.rope, s.kv]) {
    assert.ok(isPow2(c.capacity), `capacity ${c.capacity} is a power of two`);
    assert.ok(c.capacity >= s.contextUsed && c.capacity <= s.maxContext, `capacity ${c.capacity} vs used ${s.contextUsed}`);
    assert.ok(c.growths >= 1, `growths ${c.growths}`);
  }
  assert.equal(s.rope.rowsComputed, s.rope.capacity, 'every RoPE row computed exactly once');
  assertCacheBytes(j);

  // The default backend is the native addon (the test command builds it); --backend js gives
  // the same greedy tokens.
  assert.equal(s.backend, 'native');
  const js = parseJsonRun(await runChat(['--json', '--temperature', '0', '--backend', 'js', PROMPT], await cache()));
  assert.equal(js.stats.backend, 'js');
  assert.deepEqual(js.tokens, j.tokens);
});

test('--context-full stop --ignore-eos --max-context 2048 --max-tokens 3000: ends "context-full" at 2048 positions, no crash', async () => {
  const r = await runChat(
    ['--context-full', 'stop', '--ignore-eos', '--max-context', '2048', '--max-tokens', '3000', '--temperature', '0', '--json', PROMPT],
    await cache(),
  );
  const j = parseJsonRun(r);
  // Allowed past the trained context (512), with the window's caution.
  assert.equal(r.stderr, "note: Max context 2,048 is above the model's trained context (512): answers lose quality past it; 512 or less keeps them at full quality.\n", describeRun(r));
  assertJsonShape(j);
  assert.equal(j.finishReason, 'context-full');
  assert.equal(j.stats.maxContext, 2048);
  // Prompt + generated fill the max context exactly (issue 9: usage never one past it); the last
  // token is printed, never fed.
  assert.equal(j.tokens.length, 2048 - j.promptTokens.length);
  assert.equal(j.stats.contextUsed, 2047);
  assert.equal(j.stats.rope.capacity, 2048);
  assert.equal(j.stats.rope.rowsComputed, 2048);
  assert.equal(j.stats.kv.capacity, 2048);
  assertCacheBytes(j);
  assert.ok(j.text.startsWith(REFERENCE), 'greedy prefix unchanged by a larger max context');
  assert.equal(decodeTok512(j.tokens), j.text);
});

test('greedy story ends where llama2.c run.c ends it: at BOS (id 1), the TinyStories sequence delimiter → "stop"', async () => {
  // run.c: "data-dependent terminating condition: the BOS (=1) token delimits sequences"; the
  // TinyStories data has no EOS (id 2), so without this the default model never stops by itself.
  const r = await runChat(['--json', '--temperature', '0', '--max-tokens', '600', PROMPT], await cache());
  const j = parseJsonRun(r);
  assert.ok(j.text.startsWith(REFERENCE));
  assert.ok(!j.tokens.includes(1), `BOS emitted as generated token #${j.tokens.indexOf(1)} and generation went on into a new story`);
  assert.equal(j.finishReason, 'stop');
  assert.ok(j.tokens.length < 600);
  assert.equal(j.stats.contextUsed, j.promptTokens.length + j.tokens.length);
});

test('prompt longer than --max-context exits 2 naming both numbers; a prompt that exactly fits ends context-full (stop) or shifts (default, with a note)', async () => {
  const dir = await cache();
  const shiftArgs = ['--ignore-eos', '--max-context', '64', '--max-tokens', '150', '--temperature', '0'];
  const [fits, over, overBig, shifts, shiftsText] = await runBatch(
    [
      ['--context-full', 'stop', '--max-context', '5', '--temperature', '0', '--json', PROMPT],
      ['--max-context', '4', '--json', PROMPT], // 5 prompt tokens
      ['--max-context', '8', PROMPT.repeat(4)],
      [...shiftArgs, '--json', PROMPT],
      [...shiftArgs, PROMPT],
    ],
    dir,
  );
  // A 20,000-character prompt on the command line: this once crashed ONNX Runtime's session
  // creation in the engine worker (segfault, exit 139) instead of reporting the overflow.
  const hugeArg = (await runBatch([['a'.repeat(20_000)]], dir))[0];
  // Counted incrementally: refused once the count passes the max context (issue 9), with a lower bound.
  const hugeLine = assertOneLineError(hugeArg, 2, /needs at least \d+ positions but the max context is 512/);
  const atLeast = Number(/at least (\d+)/.exec(hugeLine)![1]);
  assert.ok(atLeast > 512 && atLeast <= 20001, hugeLine);
  assert.ok(hugeLine.length < 200);
  const line = assertOneLineError(over, 2, /\b5\b.*\b4\b|\b4\b.*\b5\b/);
  assert.match(line, /context/i);
  assert.equal(over.stdout, '', 'no JSON printed on error');
  const line2 = assertOneLineError(overBig, 2, /context/i);
  assert.equal(overBig.stdout, '', 'the prompt is not echoed when it is refused');
  assert.match(line2, /\b8\b/, 'names the max context');
  assert.ok((line2.match(/\d+/g) ?? []).length >= 2, `names both numbers: ${line2}`);
  assert.match(line2, /; shorten the prompt or raise --max-context \(up to the model's trained context, 512\)$/, 'says what to do');

  const j = parseJsonRun(fits);
  assert.equal(fits.stderr, '', describeRun(fits));
  assert.equal(j.promptTokens.length, 5);
  assert.equal(j.finishReason, 'context-full');
  assert.equal(j.tokens.length, 0, 'no position is left for a token');
  assert.equal(j.text, '');
  assert.equal(j.stats.contextUsed, 5);
  assert.equal(j.stats.maxContext, 5);

  // The default, rolling-window: the context shifts at the max context and the answer goes on.
  const s = parseJsonRun(shifts);
  assert.equal(s.finishReason, 'length');
  assert.equal(s.tokens.length, 150);
  assert.ok(s.stats.contextShifts >= 2, `shifts: ${s.stats.contextShifts}`);
  assert.ok(s.stats.droppedTokens >= 150 - 64, `dropped ${s.stats.droppedTokens}`);
  assert.equal(s.stats.contextUsed, s.promptTokens.length + 149 - s.stats.droppedTokens, 'all but the last token fed, minus what the shifts dropped');
  assert.ok(s.text.startsWith(REFERENCE.slice(0, 40)), 'greedy text before the first shift is unchanged');
  // Streamed as text, the same answer, and one note that says so in the window's words (main/contract/context-full.ts).
  assert.equal(shiftsText.code, 0, describeRun(shiftsText));
  assert.equal(shiftsText.stdout, `${PROMPT}${s.text}\n`);
  assert.equal(
    shiftsText.stderr,
    `note: The max context was reached; the context was shifted ${s.stats.contextShifts} times and the answer went on (${s.stats.droppedTokens} earlier tokens dropped).\n`,
    describeRun(shiftsText),
  );
});

test('an answer cut at the max context: one note on stderr in text mode saying what to do (raise --max-context below the trained context, the rolling window at it; too small to shift); none with --json', async () => {
  const dir = await cache();
  const [stop32, stop512, tiny, tinyJson] = await runBatch(
    [
      ['--context-full', 'stop', '--max-context', '32', '--max-tokens', '100', '--temperature', '0', PROMPT],
      ['--context-full', 'stop', '--max-context', '512', '--ignore-eos', '--max-tokens', '600', '--temperature', '0', PROMPT],
      ['--max-context', '2', '--max-tokens', '20', 'Once'],
      ['--max-context', '2', '--max-tokens', '20', '--json', 'Once'],
    ],
    dir,
  );
  // Once a cut answer with exit 0 and nothing on stderr: the reason showed only with --json.
  assert.equal(stop32.code, 0, describeRun(stop32));
  assert.ok(stop32.stdout.startsWith(`${PROMPT}${REFERENCE.slice(0, 40)}`), describeRun(stop32));
  assert.equal(
    stop32.stderr,
    "note: The answer stopped at the max context (32 positions); to let it go on, raise --max-context (up to the model's trained context, 512) or use --context-full rolling-window.\n",
    describeRun(stop32),
  );
  // At the trained context, raising it is not the advice.
  assert.equal(stop512.code, 0, describeRun(stop512));
  assert.equal(
    stop512.stderr,
    "note: The answer stopped at the max context (512 positions, the model's trained context); to let it go on, use --context-full rolling-window (a max context past the trained context costs quality).\n",
    describeRun(stop512),
  );
  // The default rolling window with no room to shift: once an empty answer and silence.
  const j = parseJsonRun(tinyJson);
  assert.equal(j.finishReason, 'context-full');
  assert.equal(j.stats.contextShifts, 0);
  assert.equal(tinyJson.stderr, '', 'the JSON carries the reason; no note');
  assert.equal(tiny.code, 0, describeRun(tiny));
  assert.equal(tiny.stdout, 'Once\n');
  assert.equal(
    tiny.stderr,
    "note: The max context (2 positions) was reached and is too small to shift the context: a shift keeps the start (the system prompt, or BOS) and needs at least 2 positions after it to drop; raise --max-context (up to the model's trained context, 512).\n",
    describeRun(tiny),
  );
});

test('a prompt longer than a max context at the trained context: "shorten the prompt", not "raise --max-context"', async () => {
  const [atTrained] = await runBatch([[PROMPT.repeat(200)]], await cache());
  const line = assertOneLineError(atTrained, 2, /but the max context is 512; /);
  assert.match(line, /; shorten the prompt \(the max context is already the model's trained context, 512; past it answers lose quality\)$/);
  assert.doesNotMatch(line, /raise/);
});

test('--seed: same seed → same tokens at temperature 1; different seeds → different tokens', async () => {
  const dir = await cache();
  const base = ['--temperature', '1', '--max-tokens', '40', '--ignore-eos', '--json'];
  const [a, b, c] = (
    await runBatch([['--seed', '42'], ['--seed', '42'], ['--seed', '43']].map((s) => [...base, ...s, PROMPT]), dir)
  ).map(parseJsonRun);
  assert.equal(a.tokens.length, 40);
  assert.deepEqual(b.tokens, a.tokens, 'same seed, same tokens');
  assert.equal(b.text, a.text);
  assert.notDeepEqual(c.tokens, a.tokens, 'seed 43 gave the same 40 tokens as seed 42');
});

test('--max-tokens 5: exactly 5 tokens, "length"; streamed text equals the JSON text; sampling options accepted', async () => {
  const dir = await cache();
  const [json, plain, sampled, nucleus0] = await runBatch(
    [
      ['--max-tokens', '5', '--temperature', '0', '--json', PROMPT],
      ['--max-tokens', '5', '--temperature', '0', PROMPT],
      [
        '--max-tokens', '5', '--ignore-eos', '--temperature', '0.7', '--top-k', '10', '--top-p', '0.9',
        '--min-p', '0.1', '--repeat-penalty', '1.3', '--seed', '7', '--ep', 'cpu', '--json', PROMPT,
      ],
      // --top-p 0, as /v1 takes top_p 0: only the most likely token, whatever the temperature.
      ['--max-tokens', '5', '--temperature', '1.5', '--top-p', '0', '--seed', '3', '--json', PROMPT],
    ],
    dir,
  );
  assert.deepEqual(parseJsonRun(nucleus0).tokens, parseJsonRun(json).tokens, '--top-p 0 decodes greedily');
  const j = parseJsonRun(json);
  assert.equal(j.tokens.length, 5);
  assert.equal(j.finishReason, 'length');
  assert.equal(j.stats.contextUsed, j.promptTokens.length + 4);
  assert.ok(REFERENCE.startsWith(j.text), `"${j.text}" is not a prefix of the reference`);

  assert.equal(plain.code, 0, describeRun(plain));
  assert.equal(plain.stderr, '', describeRun(plain));
  assert.equal(plain.stdout, `${PROMPT}${j.text}\n`, 'plain mode streams the prompt, then the same text');

  const s = parseJsonRun(sampled);
  assert.equal(sampled.stderr, '', describeRun(sampled));
  assert.equal(s.tokens.length, 5);
  assert.equal(s.finishReason, 'length');
});

test('--stop girl (issue 9): stdout never shows the held "gir"; streamed text equals the JSON text', async () => {
  const dir = await cache();
  const args = ['--temperature', '0', '--max-tokens', '30', '--stop', 'girl'];
  const [json, plain] = await runBatch([[...args, '--json', PROMPT], [...args, PROMPT]], dir);
  const j = parseJsonRun(json);
  assert.equal(j.text, ', there was a little ');
  assert.equal(j.finishReason, 'stop');
  assert.equal(plain.stdout, `${PROMPT}${j.text}\n`, describeRun(plain));
});

test('--system on a model without a chat template is in the transcript, as in the window and /v1 (issue 9)', async () => {
  const dir = await cache();
  const [withSystem, without] = await runBatch(
    [
      ['--json', '--max-tokens', '5', '--system', 'You are a pirate.', 'Hi'],
      ['--json', '--max-tokens', '5', 'Hi'],
    ],
    dir,
  );
  const w = parseJsonRun(withSystem);
  const plain = parseJsonRun(without);
  assert.equal(plain.promptTokens.length, 3);
  assert.equal(decodeTok512(w.promptTokens.slice(1)).trimStart(), 'You are a pirate.\nHi', 'BOS, then the system line, then the prompt');
});

test('emoji and CJK prompt: runs, exit 0, BOS + byte-fallback ids that decode back to the prompt', async () => {
  const prompt = 'Hello 🦙 and 世界!';
  const r = await runChat(['--json', '--max-tokens', '3', '--temperature', '0', prompt], await cache());
  const j = parseJsonRun(r);
  assert.equal(r.stderr, '', describeRun(r));
  assert.equal(j.promptTokens[0], 1, 'BOS first');
  assert.equal(decodeTok512(j.promptTokens.slice(1)), ` ${prompt}`, 'prompt tokens decode back (with the dummy space)');
  // 🦙 = F0 9F A6 99 → byte-fallback ids byte + 3, in order; 世界 too.
  const ids = j.promptTokens.join(',');
  assert.ok(ids.includes([0xf0, 0x9f, 0xa6, 0x99].map((b) => b + 3).join(',')), `emoji bytes as ids 3..258: ${ids}`);
  assert.ok(ids.includes([...Buffer.from('世界')].map((b) => b + 3).join(',')), `CJK bytes as ids 3..258: ${ids}`);
  assert.ok(j.tokens.length >= 1 && j.tokens.length <= 3);
});

test('bad options and prompts: one-line error, exit 2, no stack trace, nothing on stdout', async () => {
  const dir = await cache();
  const cases: Array<[string[], RegExp]> = [
    [['--max-tokens', '0'], /--max-tokens/],
    [['--max-tokens', 'abc'], /--max-tokens/],
    [['--max-tokens', '1.5'], /--max-tokens/],
    [['--temperature', '-1'], /--temperature/],
    [['--temperature=-1'], /--temperature/],
    [['--temperature', 'nan'], /--temperature/],
    [['--temperature', '0x10'], /--temperature/], // Number('0x10') is 16: decimal only
    [['--top-p', 'Infinity'], /--top-p/],
    [['--top-k', 'abc'], /--top-k/],
    [['--top-p', '-0.5'], /--top-p/],
    [['--top-p', '1.5'], /--top-p/],
    [['--min-p', '1'], /--min-p/],
    [['--repeat-penalty', '0'], /--repeat-penalty/],
    [['--seed', '-3'], /--seed/],
    [['--seed=-3'], /--seed/],
    [['--seed', 'x'], /--seed/],
    [['--ep', 'tpu'], /--ep/],
    [['--backend', 'gpu'], /--backend/],
    [['--max-context', '0'], /--max-context/],
    [['--max-context', 'many'], /--max-context/],
    [['--frobnicate'], /--frobnicate/],
    [['--model', ''], /--model/],
    [['--context-full', 'middle'], /^error: --context-full must be stop or rolling-window, got "middle"$/],
    // A policy of the window's (main/contract/types.ts) that a single prompt cannot use, and why.
    [['--context-full', 'truncate-middle'], /^error: --context-full truncate-middle keeps the first exchange of a conversation and drops the turns after it, but npm run chat answers a single prompt: there is no first exchange to keep; use rolling-window or stop$/],
  ];
  const prompts: Array<[string[], RegExp]> = [
    [[''], /prompt/],
    [['   '], /prompt/],
    [[], /prompt/],
    [[PROMPT, '--max-tokens'], /--max-tokens/], // option without its value
    [['Once upon', 'a time'], /prompt/], // two positionals
  ];
  const runs = await mapLimit([...cases.map(([a]) => [...a, PROMPT]), ...prompts.map(([a]) => a)], 3, (a) => runChat(a, dir));
  [...cases, ...prompts].forEach(([, re], i) => {
    assertOneLineError(runs[i], 2, re);
    assert.equal(runs[i].stdout, '', describeRun(runs[i]));
  });
  assert.deepEqual(await readdir(dir), [], 'a usage error imports nothing');

  const help = await runChat(['--help'], dir);
  assert.equal(help.code, 0, describeRun(help));
  assert.match(help.stdout, /usage:/);
  for (const o of ['--model', '--max-tokens', '--max-context', '--temperature', '--top-k', '--top-p', '--min-p', '--repeat-penalty', '--seed', '--ignore-eos', '--ep', '--backend', '--json']) {
    assert.ok(help.stdout.includes(o), `--help lists ${o}`);
  }
});

test('bad models: one-line error naming the problem, exit 1, no stack trace, nothing cached', async () => {
  const m = bad!;
  const dir = await cache();
  const cases: Array<[string, RegExp, string | null]> = [
    [m.nonExistent, /does not exist/, m.nonExistent],
    [m.notAModel, /not a model/, m.notAModel],
    [m.gguf, /past the end of the 20000-byte file \(truncated\?\)/, m.gguf],
    [m.truncated, /truncated|size mismatch/, m.truncated],
    [m.absurdParams, /parameters|out of range/, m.absurdParams],
    [m.absurdField, /out of range|n_heads|nHeads/, m.absurdField],
    // Random bytes are a corrupt checkpoint: the header is the problem, not a missing tokenizer.
    [m.random, /header|size mismatch/, m.random],
    // Not regular files: a device (once reported with a raw ENOTDIR "scandir" message) and a
    // /proc file that fails to read with EIO (once a raw "EIO: i/o error" without context).
    ['/dev/zero', /not a model.*device/, '/dev/zero'],
    ['/proc/self/mem', /cannot read the model/, '/proc/self/mem'],
    [m.mismatchedTokenizer, /300.*512|512.*300/, null],
  ];
  const runs = await mapLimit(cases, 3, ([model]) => runChat(['--model', model, '--max-tokens', '3', PROMPT], dir));
  const failures: string[] = [];
  cases.forEach(([, re, file], i) => {
    try {
      const line = assertOneLineError(runs[i], 1, re);
      if (file) assert.ok(line.includes(file), `message names the file ${file}: ${line}`);
      assert.equal(runs[i].stdout, '', describeRun(runs[i]));
    } catch (e) {
      failures.push((e as Error).message.split('\n').slice(0, 3).join(' | '));
    }
  });
  assert.match(runs[cases.length - 1].stderr, /tokenizer/i);
  assert.deepEqual(await readdir(dir), [], 'a failed import leaves nothing in the cache');
  assert.deepEqual(failures, [], failures.join('\n'));
});

test('second start with the same cache folder is served from the cache', async () => {
  const dir = await cache();
  const first = parseJsonRun(await runChat(['--json', '--max-tokens', '8', '--temperature', '0', PROMPT], dir));
  const bundles = await bundleFolders(dir);
  assert.equal(bundles.length, 1, `one bundle folder after the first start: ${bundles}`);
  const manifest = path.join(dir, bundles[0], 'manifest.json');
  const before1 = await stat(manifest);
  const data = await stat(path.join(dir, bundles[0], 'model.onnx.data'));

  // Same model, named explicitly this time.
  const second = parseJsonRun(await runChat(['--json', '--model', STORIES_BIN, '--max-tokens', '8', '--temperature', '0', PROMPT], dir));
  assert.deepEqual(await bundleFolders(dir), bundles, 'still exactly one bundle folder, no leftovers');
  assert.equal((await stat(manifest)).mtimeMs, before1.mtimeMs, 'manifest.json not rewritten');
  assert.equal((await stat(path.join(dir, bundles[0], 'model.onnx.data'))).mtimeMs, data.mtimeMs, 'weights not rewritten');
  assert.deepEqual(second.tokens, first.tokens);
});

test('--quantize q4 on a Q4_0 GGUF: one note line on stderr, its blocks as stored (no second bundle); on the F32 GGUF it applies, no note', async () => {
  const dir = await cache();
  const q4File = path.join(GGUF_DIR, 'stories260K-q4_0.gguf');
  const args = ['--json', '--max-tokens', '8', '--temperature', '0', '--model', q4File];
  const plainRun = await runChat([...args, PROMPT], dir);
  const plain = parseJsonRun(plainRun);
  assert.equal(plainRun.stderr, '', describeRun(plainRun));
  const askedRun = await runChat([...args, '--quantize', 'q4', PROMPT], dir);
  const asked = parseJsonRun(askedRun);
  assert.deepEqual(askedRun.stderr.split('\n').filter((l) => l !== ''), [
    'note: q4 quantization ignored: stories260K-q4_0.gguf is already quantized (Q4_0); its blocks are used as stored',
  ], describeRun(askedRun));
  assert.equal(asked.model.weights.formats, plain.model.weights.formats);
  assert.deepEqual(asked.tokens, plain.tokens);
  assert.equal((await bundleFolders(dir)).length, 1, 'the bundle as stored serves both runs');

  // A float GGUF is dequantized to float32 at import, so --quantize does apply to it.
  const floatRun = await runChat(['--json', '--max-tokens', '8', '--quantize', 'q8', '--model', STORIES_GGUF, PROMPT], dir);
  assert.equal(parseJsonRun(floatRun).model.weights.formats, 'float32 ×16, q8 (rtn) ×32');
  assert.equal(parseJsonRun(floatRun).model.kvCacheDtype, 'float16', 'the default KV cache');
  assert.equal(floatRun.stderr, '', describeRun(floatRun));
});

test('--kv-cache float32 against the default float16: the same greedy answer from the same bundle, half the KV bytes at the same capacity, said in --json', async () => {
  const dir = await cache();
  const args = ['--json', '--max-tokens', '20', '--temperature', '0', PROMPT];
  const f32 = parseJsonRun(await runChat(['--kv-cache', 'float32', ...args], dir));
  const bundles = (await bundleFolders(dir)).length;
  const f16Run = await runChat(args, dir);
  const f16 = parseJsonRun(f16Run);
  assert.equal(f16Run.stderr.split('\n').filter((l) => l.startsWith('note:') && /KV cache/.test(l)).length, 0, describeRun(f16Run));
  assert.deepEqual([f32.model.kvCacheDtype, f16.model.kvCacheDtype], ['float32', 'float16']);
  assert.equal(f16.stats.kv.capacity, f32.stats.kv.capacity);
  assert.equal(f16.stats.kv.bytes * 2, f32.stats.kv.bytes);
  assert.deepEqual(f16.tokens, f32.tokens, 'stories260K greedy: float16 KV moves its log-probs by ≤ 1.4e-2 (kv-float16-cpu.test.ts), not these 20 tokens');
  assert.equal((await bundleFolders(dir)).length, bundles, 'no second bundle: the float16-KV graph is in the first');
});

test('concurrent first starts on an empty cache all succeed and leave one bundle (in-process form)', async () => {
  // Two chats started at once on a fresh machine (or the app and the CLI) import the same model
  // into the same cache folder at the same time; neither may fail because of the other. Between
  // processes the race is hit only now and then; four Engine.load calls in this process hit it
  // every time, so the check runs here, in library form.
  const { Engine } = await import('../../main/engine/generate/engine.ts');
  const raceDir = await cache();
  const results = await Promise.allSettled([1, 2, 3, 4].map(() => Engine.load(STORIES_BIN, { cacheDir: raceDir })));
  await Promise.all(results.map((r) => (r.status === 'fulfilled' ? r.value.dispose() : undefined)));
  const errors = results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error).message)] : []));
  assert.deepEqual(errors, [], `concurrent imports failed:\n${errors.join('\n')}`);
  const entries = await bundleFolders(raceDir);
  assert.equal(entries.length, 1, `one bundle folder, no temp leftovers: ${entries.join(', ')}`);
  assert.deepEqual((await readdir(path.join(raceDir, entries[0]))).sort(), [
    'manifest.json',
    'model.kv-float16.onnx', // the float16-KV graph over the same data (bundle.ts KV_FLOAT16_MODEL_FILE)
    'model.onnx',
    'model.onnx.data',
    'tokenizer.json',
    'tokenizer_config.json',
  ]);
});

test('--ep cuda: runs (on CUDA, or on CPU after a note), exit 0, no stack trace', async () => {
  const r = await runChat(['--ep', 'cuda', '--max-tokens', '5', '--temperature', '0', '--json', PROMPT], await cache());
  const j = parseJsonRun(r);
  assert.equal(j.tokens.length, 5);
  assert.ok(REFERENCE.startsWith(j.text), j.text);
  assert.doesNotMatch(r.stderr, /^\s+at /m, describeRun(r));
  if (r.stderr.trim() !== '') assert.match(r.stderr, /^note: .*CPU/im, describeRun(r));
});

test('Ctrl-C mid-answer: the partial answer is printed, exit 130, no stack trace', async () => {
  const dir = await cache();
  await runBatch([['--max-tokens', '1', PROMPT]], dir); // import first, so the run below starts fast
  const env: NodeJS.ProcessEnv = { ...process.env, ROPEWALK_CACHE_DIR: dir };
  delete env.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, ['--import', 'tsx', 'main/cli/chat.ts', '--ep', 'cpu', '--ignore-eos', '--max-context', '8192', '--max-tokens', '8000', '--temperature', '0', PROMPT], {
    cwd: PROJECT_ROOT,
    env,
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  // Interrupt once the answer streams (the prompt is echoed, then tokens): not after a fixed
  // delay, which under load could land while the CLI is still starting.
  const streaming = new Promise<void>((resolve) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      if (stdout.length > PROMPT.length + 20) resolve();
    });
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  await Promise.race([streaming, exited]);
  child.kill('SIGINT');
  const code = await exited;
  assert.equal(code, 130, `stderr: ${stderr}`);
  assert.equal(stderr, "note: Max context 8,192 is above the model's trained context (512): answers lose quality past it; 512 or less keeps them at full quality.\n", 'no error, no stack trace');
  assert.ok(stdout.startsWith(PROMPT), 'the prompt is echoed first');
  const answer = stdout.slice(PROMPT.length).trim();
  assert.ok(answer.length > 20, `a partial answer was printed: ${answer.slice(0, 80)}`);
  const n = Math.min(answer.length, 60);
  assert.equal(stdout.slice(PROMPT.length, PROMPT.length + n), REFERENCE.slice(0, n), 'greedy: the answer as llama2.c writes it');
});

test('--json-schema FILE: the answer parses and validates (stories260K, sampled); a keyword not covered exits 2 naming it', async () => {
  const dir = await cache();
  const schemaDir = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-cli-schema-'));
  cacheDirs.push(schemaDir);
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' }, pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 3 } }, required: ['name', 'age', 'pets'], additionalProperties: false };
  const good = path.join(schemaDir, 'person.json');
  const bad = path.join(schemaDir, 'pattern.json');
  await writeFile(good, JSON.stringify(schema));
  await writeFile(bad, JSON.stringify({ type: 'string', pattern: 'x' }));
  const [a, b, c] = await runBatch([
    ['--json', '--temperature', '1', '--seed', '3', '--max-tokens', '300', '--json-schema', good, PROMPT],
    ['--temperature', '1', '--seed', '4', '--max-tokens', '300', '--json-schema', good, PROMPT],
    ['--json-schema', bad, PROMPT],
  ], dir);
  const j = parseJsonRun(a);
  assert.equal(j.finishReason, 'stop');
  const ajv = new Ajv({ strict: false });
  assert.ok(ajv.validate(schema, JSON.parse(j.text)), `${j.text}: ${ajv.errorsText()}`);
  assert.equal(b.code, 0, describeRun(b));
  // A completion echoes the prompt first; the JSON follows it.
  assert.ok(b.stdout.startsWith(PROMPT), describeRun(b));
  assert.ok(ajv.validate(schema, JSON.parse(b.stdout.slice(PROMPT.length))), `${b.stdout}: ${ajv.errorsText()}`);
  assertOneLineError(c, 2, /--json-schema .*"pattern"/);
});
