/**
 * Maps `app://ropewalk/<path>` requests to files under the renderer folder (`dist/renderer`).
 * Pure (node:path only) so plain Node tests can check it; app/scheme.ts reads the file. The path
 * rules are `main/common/static-files.ts`'s, shared with `serve` mode.
 *
 * Contract: a request resolves to a file strictly inside `rootDir`, or is refused. Refused: another
 * scheme or host (403), a path that does not decode or holds NUL or a backslash (400), any `..`
 * segment after percent-decoding (403), anything that resolves outside the root (403). `/` is
 * `index.html`. The query and hash are ignored.
 */
import { contentTypeOf, resolveStaticPath, type StaticLookup } from '../main/common/static-files.ts';
import { APP_HOST, APP_SCHEME } from './security.ts';

export type RendererFileLookup = StaticLookup | { ok: false; status: 403 | 400; reason: string };

export { contentTypeOf };

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
  return resolveStaticPath(rootDir, url.pathname);
}
