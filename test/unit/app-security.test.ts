/**
 * The Electron shell's security policy (app/security.ts), checked under plain Node: the CSP, the
 * IPC sender check, webPreferences, navigation, external links, permissions, payload limits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  APP_ORIGIN,
  buildWebPreferences,
  CONTENT_SECURITY_POLICY,
  externalLinkTarget,
  isAllowedNavigation,
  isPayloadWithinLimits,
  isAllowedDownload,
  isPermissionAllowed,
  isTrustedRendererUrl,
  isTrustedSender,
  RENDERER_ENTRY_URL,
  SECURITY_HEADERS,
  type SenderFacts,
} from '../../app/security.ts';

const directives = new Map(
  CONTENT_SECURITY_POLICY.split(';').map((d) => {
    const [name, ...values] = d.trim().split(/\s+/);
    return [name, values] as const;
  }),
);

describe('content security policy', () => {
  it('has no unsafe-inline, unsafe-eval, wildcard or remote source', () => {
    for (const bad of ["'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "'wasm-unsafe-eval'", '*', 'http:', 'https:', 'ws:', 'blob:']) {
      for (const [name, values] of directives) assert.ok(!values.includes(bad), `${name} allows ${bad}`);
    }
  });
  it("defaults to 'self' and forbids objects, frames, base and forms", () => {
    assert.deepEqual(directives.get('default-src'), ["'self'"]);
    assert.deepEqual(directives.get('script-src'), ["'self'"]);
    assert.deepEqual(directives.get('style-src'), ["'self'"]);
    assert.deepEqual(directives.get('object-src'), ["'none'"]);
    assert.deepEqual(directives.get('frame-src'), ["'none'"]);
    assert.deepEqual(directives.get('frame-ancestors'), ["'none'"]);
    assert.deepEqual(directives.get('base-uri'), ["'none'"]);
    assert.deepEqual(directives.get('form-action'), ["'none'"]);
  });
  it('is sent as a header with nosniff', () => {
    assert.equal(SECURITY_HEADERS['Content-Security-Policy'], CONTENT_SECURITY_POLICY);
    assert.equal(SECURITY_HEADERS['X-Content-Type-Options'], 'nosniff');
  });
});

describe('renderer origin', () => {
  it('is app://ropewalk', () => {
    assert.equal(APP_ORIGIN, 'app://ropewalk');
    assert.equal(RENDERER_ENTRY_URL, 'app://ropewalk/index.html');
  });
  it('accepts only exactly that origin', () => {
    for (const ok of ['app://ropewalk/index.html', 'app://ropewalk/', 'app://ropewalk/index.html?x=1#h']) assert.ok(isTrustedRendererUrl(ok), ok);
    for (const bad of [
      'https://evil.example/',
      'http://ropewalk/',
      'file:///etc/passwd',
      'file:///work/main/dist/renderer/index.html',
      'app://other/',
      'app://ropewalk.evil.example/',
      'app://ropewalk:8080/',
      'app://user:pw@ropewalk/',
      'app://ROPEWALK/',
      'devtools://devtools/bundled/index.html',
      'about:blank',
      'data:text/html,hi',
      'javascript:alert(1)',
      '',
      null,
      undefined,
      42,
    ]) {
      assert.ok(!isTrustedRendererUrl(bad), String(bad));
    }
  });
});

describe('IPC sender check', () => {
  const WINDOW = 7;
  const ours: SenderFacts = { webContentsId: WINDOW, frameUrl: 'app://ropewalk/index.html', isMainFrame: true };
  it("accepts our window's main frame on our origin", () => {
    assert.ok(isTrustedSender(ours, WINDOW));
  });
  it('rejects other origins, subframes, other webContents, gone frames, no window', () => {
    const cases: Array<[string, SenderFacts, number | null]> = [
      ['https://evil.example', { ...ours, frameUrl: 'https://evil.example/' }, WINDOW],
      ['file:///etc/passwd', { ...ours, frameUrl: 'file:///etc/passwd' }, WINDOW],
      ['app://other/', { ...ours, frameUrl: 'app://other/' }, WINDOW],
      ['subframe on our origin', { ...ours, isMainFrame: false }, WINDOW],
      ['subframe elsewhere', { ...ours, isMainFrame: false, frameUrl: 'https://evil.example/' }, WINDOW],
      ['another webContents', { ...ours, webContentsId: 8 }, WINDOW],
      ['frame gone', { ...ours, frameUrl: null }, WINDOW],
      ['no window', ours, null],
    ];
    for (const [what, facts, win] of cases) assert.equal(isTrustedSender(facts, win), false, what);
  });
});

describe('webPreferences', () => {
  it('isolates, sandboxes and keeps Node out', () => {
    const p = buildWebPreferences({ preload: '/x/preload.cjs', devTools: false });
    assert.equal(p.contextIsolation, true);
    assert.equal(p.sandbox, true);
    assert.equal(p.nodeIntegration, false);
    assert.equal(p.nodeIntegrationInWorker, false);
    assert.equal(p.nodeIntegrationInSubFrames, false);
    assert.equal(p.webSecurity, true);
    assert.equal(p.allowRunningInsecureContent, false);
    assert.equal(p.webviewTag, false);
    assert.equal(p.spellcheck, false);
    assert.equal(p.preload, '/x/preload.cjs');
    assert.equal(p.devTools, false);
    assert.equal(buildWebPreferences({ preload: '/x/preload.cjs', devTools: true }).devTools, true);
    assert.ok(Object.isFrozen(p));
  });
});

describe('navigation policy', () => {
  const here = 'app://ropewalk/index.html';
  it('allows only the page itself', () => {
    assert.ok(isAllowedNavigation('app://ropewalk/index.html', here));
    assert.ok(isAllowedNavigation('app://ropewalk/index.html#chat-3', here));
    for (const bad of ['https://evil.example/', 'app://ropewalk/other.html', 'app://other/index.html', 'file:///etc/passwd', 'javascript:alert(1)', 'about:blank']) {
      assert.equal(isAllowedNavigation(bad, here), false, bad);
    }
  });
  it('allows nothing when the current page is not ours', () => {
    assert.equal(isAllowedNavigation('app://ropewalk/index.html', 'https://evil.example/'), false);
    assert.equal(isAllowedNavigation('app://ropewalk/index.html', ''), false);
  });
});

describe('external links', () => {
  it('lets only http and https leave, normalised', () => {
    assert.equal(externalLinkTarget('https://example.com/a b'), 'https://example.com/a%20b');
    assert.equal(externalLinkTarget('http://example.com'), 'http://example.com/');
    assert.equal(externalLinkTarget('HTTPS://Example.COM/x'), 'https://example.com/x');
  });
  it('refuses every other scheme, credentials, and junk', () => {
    for (const bad of [
      'javascript:alert(1)',
      'file:///etc/passwd',
      'app://ropewalk/index.html',
      'data:text/html,<script>1</script>',
      'vbscript:x',
      'ftp://example.com/',
      'smb://host/share',
      'mailto:a@example.com',
      'ms-msdt:/id PCWDiagnostic',
      'https://user:pw@example.com/',
      'https://',
      `https://example.com/${'a'.repeat(3000)}`,
      'not a url',
      '',
      null,
    ]) {
      assert.equal(externalLinkTarget(bad), null, String(bad));
    }
  });
});

describe('permissions', () => {
  it('grants only clipboard writes, only to our origin', () => {
    assert.ok(isPermissionAllowed('clipboard-sanitized-write', 'app://ropewalk/index.html'));
    assert.ok(isPermissionAllowed('clipboard-sanitized-write', 'app://ropewalk'));
    assert.equal(isPermissionAllowed('clipboard-sanitized-write', 'https://evil.example/'), false);
    for (const p of ['media', 'geolocation', 'notifications', 'clipboard-read', 'openExternal', 'hid', 'serial', 'usb', 'fullscreen', 'unknown']) {
      assert.equal(isPermissionAllowed(p, 'app://ropewalk/index.html'), false, p);
    }
  });
});

describe('IPC payload limits', () => {
  const limits = { maxChars: 100, maxDepth: 4, maxEntries: 10 };
  it('accepts ordinary requests', () => {
    assert.ok(isPayloadWithinLimits({ conversationId: 'c1', content: 'hello' }));
    assert.ok(isPayloadWithinLimits(undefined));
    assert.ok(isPayloadWithinLimits({ content: 'x'.repeat(1_000_000) }));
  });
  it('refuses long strings, deep nesting and many entries', () => {
    assert.equal(isPayloadWithinLimits({ a: 'x'.repeat(101) }, limits), false);
    assert.equal(isPayloadWithinLimits({ ['k'.repeat(101)]: 1 }, limits), false);
    assert.equal(isPayloadWithinLimits({ a: { b: { c: { d: { e: 1 } } } } }, limits), false);
    assert.equal(isPayloadWithinLimits(Array.from({ length: 11 }, () => 1), limits), false);
    assert.equal(isPayloadWithinLimits({ content: 'x'.repeat(5_000_000) }), false);
  });
});

describe('downloads', () => {
  it('only the window’s own exports (blob: URLs of app://ropewalk) may download', () => {
    assert.ok(isAllowedDownload('blob:app://ropewalk/3f2c9a4e-1b7d-4c55-9d0a-0a7c1f3e9b21'));
    for (const url of ['https://example.com/a.exe', 'blob:https://example.com/x', 'blob:app://evil/x', 'app://ropewalk/index.html', 'blob:app://ropewalk:1/x', 'data:text/plain,x', 42, null]) {
      assert.equal(isAllowedDownload(url), false, String(url));
    }
  });
});
