/**
 * Maps `app://ropewalk/<path>` requests to files under the renderer folder (`dist/renderer`).
 * Pure (node:path only) so plain Node tests can check it; app/scheme.ts reads the file.
 *
 * Contract: a request resolves to a file strictly inside `rootDir`, or is refused. Refused: another
 * scheme or host (403), a path that does not decode or holds NUL or a backslash (400), any `..`
 * segment after percent-decoding (403), anything that resolves outside the root (403). `/` is
 * `index.html`. The query and hash are ignored.
 */
import path from 'node:path';
import { APP_HOST, APP_SCHEME } from './security.ts';

export type RendererFileLookup =
  | { ok: true; path: string; contentType: string }
  | { ok: false; status: 400 | 403 | 404; reason: string };

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.txt': 'text/plain; charset=utf-8',
};

/** Content-Type for a file name (octet-stream when unknown; nosniff is always sent). */
export function contentTypeOf(file: string): string {
  return CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * Resolves a request URL to a file under `rootDir` (absolute), or says why not. Does not touch the
 * disk: a missing file is found when it is read.
 */
export function resolveRendererFile(rootDir: string, requestUrl: string): RendererFileLookup {
  let url: URL;
  try {
    url = new URL(requestUrl);
  } catch {
    return { ok: false, status: 400, reason: 'not a URL' };
  }
  if (url.protocol !== `${APP_SCHEME}:` || url.host !== APP_HOST || url.username || url.password) {
    return { ok: false, status: 403, reason: 'not the renderer origin' };
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(url.pathname);
  } catch {
    return { ok: false, status: 400, reason: 'bad percent-encoding' };
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return { ok: false, status: 400, reason: 'bad character in path' };
  const segments = decoded.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '..' || s === '.')) return { ok: false, status: 403, reason: 'path traversal' };
  // A drive letter or UNC-looking first segment must not turn the join into an absolute path.
  if (segments.some((s) => s.includes(':'))) return { ok: false, status: 403, reason: 'bad path segment' };
  const root = path.resolve(rootDir);
  const file = path.resolve(root, ...(segments.length ? segments : ['index.html']));
  if (!file.startsWith(root + path.sep)) return { ok: false, status: 403, reason: 'outside the renderer folder' };
  return { ok: true, path: file, contentType: contentTypeOf(file) };
}
