/**
 * The one rule for a CORS origin, shared by `serve --cors`, the settings schema and the window's
 * Local server field: an origin as a browser sends it in `Origin`, `http(s)://host[:port]`, with
 * no path, query, fragment or credentials. Dependency-free, so the renderer imports it as is.
 */

/** What the rule asks for, in words (for error messages). */
export const ORIGIN_RULE = 'one origin such as http://localhost:3000 (scheme, host and port; no path)';

/**
 * The origin `value` names, as browsers write it (lowercase host, default port dropped, one
 * trailing slash tolerated), or null when it is not exactly one http(s) origin.
 * e.g. 'HTTP://LocalHost:3000/' → 'http://localhost:3000'; 'http://a.test/x' → null.
 */
export function parseOrigin(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) return null;
  // `new URL('http://a.test/?')` has an empty search but the text has a '?': refuse anything after the host but one '/'.
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+\/?$/i.test(value.trim())) return null;
  return url.origin;
}
