/**
 * Where a request for the built renderer maps on disk, shared by `serve` mode (HTTP) and the
 * desktop app's `app://ropewalk/` scheme. Pure (node:path only): it never touches the disk.
 *
 * Contract: a URL path resolves to a file strictly inside `rootDir`, or is refused — a path that
 * does not percent-decode or holds NUL or a backslash (400), any `.`/`..` segment after decoding,
 * or a segment with `:` (a drive letter or stream name) (403), anything that resolves outside
 * the root (403). `/` and paths ending in `/` mean `index.html`.
 */
import path from 'node:path';

export type StaticLookup = { ok: true; path: string; contentType: string } | { ok: false; status: 400 | 403; reason: string };

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.txt': 'text/plain; charset=utf-8',
};

/** Content-Type for a file name (octet-stream when unknown; callers always send nosniff). */
export function contentTypeOf(file: string): string {
  return CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * Resolves a URL path (still percent-encoded, without query or hash) to a file under `rootDir`.
 * @returns the absolute file path and its content type, or the status and reason of a refusal.
 */
export function resolveStaticPath(rootDir: string, encodedPath: string): StaticLookup {
  let decoded: string;
  try {
    decoded = decodeURIComponent(encodedPath);
  } catch {
    return { ok: false, status: 400, reason: 'bad percent-encoding' };
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return { ok: false, status: 400, reason: 'bad character in path' };
  const segments = decoded.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '..' || s === '.')) return { ok: false, status: 403, reason: 'path traversal' };
  if (segments.some((s) => s.includes(':'))) return { ok: false, status: 403, reason: 'bad path segment' };
  if (segments.length === 0 || decoded.endsWith('/')) segments.push('index.html');
  const root = path.resolve(rootDir);
  const file = path.resolve(root, ...segments);
  if (!file.startsWith(root + path.sep)) return { ok: false, status: 403, reason: 'outside the renderer folder' };
  return { ok: true, path: file, contentType: contentTypeOf(file) };
}
