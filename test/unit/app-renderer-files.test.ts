/**
 * The `app://ropewalk/` protocol handler's path resolution (app/renderer-files.ts): files inside
 * the renderer folder only; every traversal spelling refused.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { contentTypeOf, resolveRendererFile } from '../../app/renderer-files.ts';

const ROOT = path.resolve('/srv/ropewalk/dist/renderer');

function inside(file: string): boolean {
  return file.startsWith(ROOT + path.sep);
}

describe('renderer file resolution', () => {
  it('maps our URLs to files under the root', () => {
    const cases: Array<[string, string]> = [
      ['app://ropewalk/', 'index.html'],
      ['app://ropewalk', 'index.html'],
      ['app://ropewalk/index.html', 'index.html'],
      ['app://ropewalk/app.js?v=3#top', 'app.js'],
      ['app://ropewalk/assets/font%20one.woff2', path.join('assets', 'font one.woff2')],
    ];
    for (const [url, rel] of cases) {
      const r = resolveRendererFile(ROOT, url);
      assert.ok(r.ok, url);
      assert.equal(r.path, path.join(ROOT, rel), url);
    }
  });

  it('refuses traversal in every spelling', () => {
    const urls = [
      'app://ropewalk/../../etc/passwd',
      'app://ropewalk/%2e%2e/%2e%2e/etc/passwd',
      'app://ropewalk/%2E%2E/%2E%2E/etc/passwd',
      'app://ropewalk/..%2f..%2fetc%2fpasswd',
      'app://ropewalk/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
      'app://ropewalk/assets/..%2f..%2f..%2fetc/passwd',
      'app://ropewalk/.%2e/.%2e/etc/passwd',
      'app://ropewalk/%252e%252e/etc/passwd',
      'app://ropewalk/..%5c..%5cetc%5cpasswd',
      'app://ropewalk/%5c%5cserver%5cshare',
      'app://ropewalk/C:%2fWindows%2fwin.ini',
      'app://ropewalk/C:/Windows/win.ini',
      'app://ropewalk/index.html%00.js',
      'app://ropewalk/%ff%fe',
    ];
    for (const url of urls) {
      const r = resolveRendererFile(ROOT, url);
      // Either refused, or (after the URL parser removed the dot segments itself) still inside.
      if (r.ok) assert.ok(inside(r.path), `${url} escaped to ${r.path}`);
      else assert.ok([400, 403].includes(r.status), `${url}: ${r.status}`);
    }
    // The encoded-slash forms cannot be normalised away by the URL parser: they must be refused.
    for (const url of ['app://ropewalk/..%2f..%2fetc%2fpasswd', 'app://ropewalk/%2e%2e%2f%2e%2e%2fetc%2fpasswd', 'app://ropewalk/..%5c..%5cetc%5cpasswd']) {
      assert.equal(resolveRendererFile(ROOT, url).ok, false, url);
    }
    // The plain form is normalised by the URL parser to /etc/passwd *under the root*.
    const plain = resolveRendererFile(ROOT, 'app://ropewalk/../../etc/passwd');
    assert.ok(plain.ok && plain.path === path.join(ROOT, 'etc', 'passwd'));
  });

  it('refuses other origins', () => {
    for (const url of ['app://other/index.html', 'https://ropewalk/index.html', 'file:///etc/passwd', 'app://u:p@ropewalk/index.html', 'app://ropewalk:81/index.html', 'nonsense']) {
      const r = resolveRendererFile(ROOT, url);
      assert.equal(r.ok, false, url);
    }
  });

  it('names content types, octet-stream when unknown', () => {
    assert.equal(contentTypeOf('index.html'), 'text/html; charset=utf-8');
    assert.equal(contentTypeOf('app.js'), 'text/javascript; charset=utf-8');
    assert.equal(contentTypeOf('app.css'), 'text/css; charset=utf-8');
    assert.equal(contentTypeOf('APP.CSS'), 'text/css; charset=utf-8');
    assert.equal(contentTypeOf('model.bin'), 'application/octet-stream');
  });
});
