/**
 * The one CORS origin rule (main/contract/origin.ts) and its three users: `serve --cors`, the
 * settings schema (`localServerCors`), and the window's Local server field. Each bad value is
 * refused quoting it; a good one is stored as browsers send it in `Origin`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { settingsPatchSchema } from '../../main/contract/channels.ts';
import { parseOrigin } from '../../main/contract/origin.ts';
import { parseServeOptions, UsageError } from '../../main/serve/options.ts';
import { corsFieldError } from '../../renderer/lib/cors-field.ts';

const GOOD: [string, string][] = [
  ['http://localhost:3000', 'http://localhost:3000'],
  ['HTTP://LocalHost:3000/', 'http://localhost:3000'],
  ['https://app.example', 'https://app.example'],
  ['https://app.example:443', 'https://app.example'],
  ['http://[::1]:8080', 'http://[::1]:8080'],
  ['  http://127.0.0.1:5173 ', 'http://127.0.0.1:5173'],
];
const BAD = ['localhost:3000', 'http://localhost:3000/app', 'http://localhost:3000/?', 'http://localhost:3000#x', 'ftp://files.example', 'http://user:pw@a.example', '*', 'null', 'http://', 'http://a.example http://b.example'];

test('parseOrigin: one http(s) origin, normalized; anything else is null', () => {
  for (const [value, origin] of GOOD) assert.equal(parseOrigin(value), origin, value);
  for (const value of BAD) assert.equal(parseOrigin(value), null, value);
});

test('the settings schema stores the normalized origin, takes empty as off, refuses the rest quoting it', () => {
  for (const [value, origin] of GOOD) assert.deepEqual(settingsPatchSchema.parse({ localServerCors: value }), { localServerCors: origin });
  assert.deepEqual(settingsPatchSchema.parse({ localServerCors: '' }), { localServerCors: '' });
  for (const value of BAD) {
    const r = settingsPatchSchema.safeParse({ localServerCors: value });
    assert.equal(r.success, false, value);
    assert.ok(r.error!.issues[0].message.includes(JSON.stringify(value)), r.error!.issues[0].message);
  }
});

test('serve --cors and the window field follow the same rule', () => {
  for (const [value, origin] of GOOD) {
    const opts = parseServeOptions(['--cors', value, '--data', process.cwd()]);
    assert.ok(opts !== 'help');
    assert.equal(opts.cors, origin);
    assert.equal(corsFieldError(value), null);
  }
  assert.equal(corsFieldError(''), null, 'empty: CORS off');
  for (const value of BAD) {
    assert.throws(() => parseServeOptions(['--cors', value]), (e) => e instanceof UsageError && e.message.includes(JSON.stringify(value)));
    assert.match(corsFieldError(value) ?? '', /one origin such as http:\/\/localhost:3000/);
  }
});
