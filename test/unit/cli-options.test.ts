/**
 * `npm run chat` option parsing (main/cli/options.ts): `--quantize` takes the contract's choices
 * (q4, q8) and refuses anything else with a usage error quoting the value; `--context-full` takes
 * the contract's policies a single prompt can use (stop, rolling-window) and refuses
 * truncate-middle saying why.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseChatOptions, UsageError } from '../../main/cli/options.ts';

test('--quantize: q4 or q8, absent = as stored; anything else is a usage error quoting it', () => {
  const quantizeOf = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Once upon a time']);
    assert.notEqual(o, 'help');
    return o === 'help' ? undefined : o.quantize;
  };
  assert.equal(quantizeOf([]), null);
  assert.equal(quantizeOf(['--quantize', 'q4']), 'q4');
  assert.equal(quantizeOf(['--quantize=q8']), 'q8');
  for (const bad of ['q3', 'Q4', '']) {
    assert.throws(() => quantizeOf(['--quantize', bad]), (e: unknown) => e instanceof UsageError && e.message === `--quantize must be q4 or q8, got "${bad}"`);
  }
});

test('--context-full: rolling-window (default) shifts, stop does not; truncate-middle is refused with the reason; others quote the value', () => {
  const shiftOf = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Once upon a time']);
    return o === 'help' ? undefined : o.contextShift;
  };
  assert.equal(shiftOf([]), true);
  assert.equal(shiftOf(['--context-full', 'rolling-window']), true);
  assert.equal(shiftOf(['--context-full=stop']), false);
  assert.throws(
    () => shiftOf(['--context-full', 'truncate-middle']),
    (e: unknown) =>
      e instanceof UsageError &&
      e.message ===
        '--context-full truncate-middle keeps the first exchange of a conversation and drops the turns after it, but npm run chat answers a single prompt: there is no first exchange to keep; use rolling-window or stop',
  );
  for (const bad of ['Stop', 'truncate', '']) {
    assert.throws(() => shiftOf(['--context-full', bad]), (e: unknown) => e instanceof UsageError && e.message === `--context-full must be stop or rolling-window, got "${bad}"`);
  }
});

test('--think / --no-think: enable_thinking on or off, absent = the template default; both is a usage error', () => {
  const thinkingOf = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Why?']);
    return o === 'help' ? undefined : o.thinking;
  };
  assert.deepEqual([thinkingOf([]), thinkingOf(['--think']), thinkingOf(['--no-think'])], [null, true, false]);
  assert.throws(() => thinkingOf(['--think', '--no-think']), (e: unknown) => e instanceof UsageError && /one of --think and --no-think/.test(e.message));
});

test('--stop with --json-schema is a usage error (a stop string would cut the JSON short); each alone is fine', () => {
  // Found by a newcomer pass: `--json-schema s.json --stop '"'` printed `{ ` with finish reason stop.
  assert.throws(() => parseChatOptions(['--json-schema', 's.json', '--stop', '"', 'Hi']), (e: unknown) => e instanceof UsageError && /--stop cannot be combined with --json-schema/.test(e.message));
  const alone = [parseChatOptions(['--json-schema', 's.json', 'Hi']), parseChatOptions(['--stop', '"', 'Hi'])];
  assert.deepEqual(alone.map((o) => (o === 'help' ? null : [o.jsonSchema, o.stop])), [['s.json', []], [null, ['"']]]);
});

test('--kv-cache: float16 (default) or float32; anything else is a usage error quoting it', () => {
  const kv = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Once upon a time']);
    return o === 'help' ? undefined : o.kvCacheDtype;
  };
  assert.equal(kv([]), 'float16');
  assert.equal(kv(['--kv-cache', 'float32']), 'float32');
  assert.throws(() => kv(['--kv-cache', 'f16']), (e: unknown) => e instanceof UsageError && e.message === '--kv-cache must be float32 or float16, got "f16"');
});

test('--threads (chat and serve): 0 to 1024, default 0 (ONNX Runtime: one per physical core); anything else is a usage error quoting it', async () => {
  const { parseServeOptions, UsageError: ServeUsageError } = await import('../../main/serve/options.ts');
  const chatThreads = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Once upon a time']);
    return o === 'help' ? undefined : o.threads;
  };
  assert.equal(chatThreads([]), 0);
  assert.equal(chatThreads(['--threads', '3']), 3);
  assert.throws(() => chatThreads(['--threads', '1025']), (e: unknown) => e instanceof UsageError && e.message === '--threads must be between 0 and 1024, got 1025');
  assert.throws(() => chatThreads(['--threads', 'two']), (e: unknown) => e instanceof UsageError && e.message === '--threads must be an integer, got "two"');
  const serveThreads = (argv: string[]) => {
    const o = parseServeOptions([...argv, '--data', process.cwd()]);
    return o === 'help' ? undefined : o.threads;
  };
  assert.equal(serveThreads([]), null);
  assert.equal(serveThreads(['--threads=2']), 2);
  for (const bad of ['-1', '2000', '1.5']) {
    assert.throws(() => serveThreads(['--threads', bad]), (e: unknown) => e instanceof ServeUsageError && e.message === `--threads must be an integer from 0 to 1024 (0: one per physical core), got "${bad}"`);
  }
});
