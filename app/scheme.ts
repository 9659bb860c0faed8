/**
 * The renderer's origin: the privileged custom scheme `app://ropewalk/`, served from the renderer
 * folder (`dist/renderer`, inside the asar when packaged) with the security headers of security.ts.
 *
 * Contract: `registerAppScheme()` runs before the app's `ready` event (Chromium reads scheme
 * privileges at startup); `serveRenderer(rootDir)` runs after it and answers GET/HEAD only, for
 * files strictly inside `rootDir` (renderer-files.ts), with CSP and nosniff on every response.
 */
import { readFile } from 'node:fs/promises';
import { protocol } from 'electron';
import { toDisposable, type Disposable } from './lifecycle.ts';
import { resolveRendererFile } from './renderer-files.ts';
import { APP_SCHEME, SECURITY_HEADERS } from './security.ts';

/**
 * Registers `app:` as standard (real origin, relative URLs), secure (a secure context, like
 * https), with fetch support. Not `bypassCSP`, not `corsEnabled`: the page gets no exemption.
 */
export function registerAppScheme(): void {
  protocol.registerSchemesAsPrivileged([
    { scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } },
  ]);
}

function plain(status: number, text: string): Response {
  return new Response(text, { status, headers: { ...SECURITY_HEADERS, 'Content-Type': 'text/plain; charset=utf-8' } });
}

/** Serves `rootDir` on `app://ropewalk/` in the default session until disposed. */
export function serveRenderer(rootDir: string): Disposable {
  protocol.handle(APP_SCHEME, async (request) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return plain(405, 'method not allowed');
    const found = resolveRendererFile(rootDir, request.url);
    if (!found.ok) return plain(found.status, found.reason);
    let body: Buffer;
    try {
      body = await readFile(found.path);
    } catch {
      return plain(404, 'not found');
    }
    return new Response(request.method === 'HEAD' ? null : new Uint8Array(body), {
      status: 200,
      headers: { ...SECURITY_HEADERS, 'Content-Type': found.contentType },
    });
  });
  return toDisposable(() => protocol.unhandle(APP_SCHEME));
}
