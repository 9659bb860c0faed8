/**
 * The window's security policy as pure functions (no `electron` import, so plain Node tests can
 * check it). app/window.ts and app/ipc.ts apply it; nothing here has side effects.
 *
 * Contract:
 * - The renderer is served from one origin, `app://ropewalk` (a privileged, standard, secure
 *   custom scheme whose handler serves `dist/renderer`; see renderer-files.ts). Every trust
 *   decision below is "is this URL exactly that origin".
 * - An IPC sender is trusted only when it is the main frame of our window's webContents and that
 *   frame's URL is on our origin. Subframes, other windows and any other origin are refused.
 * - Navigation away from the loaded page is refused; only http(s) links may leave, and only to the
 *   system browser.
 * - The CSP allows nothing but same-origin scripts and styles: no 'unsafe-inline', no
 *   'unsafe-eval', no objects, no frames, no remote connections.
 */

/** The renderer's custom scheme (registered privileged before `ready`). */
export const APP_SCHEME = 'app';
/** The one host the scheme serves. */
export const APP_HOST = 'ropewalk';
/** The renderer's origin, as Chromium spells it. */
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
/** The page the window loads. */
export const RENDERER_ENTRY_URL = `${APP_ORIGIN}/index.html`;

/**
 * Content-Security-Policy of every response the scheme serves (a header; the page's meta tag should
 * say the same). `frame-ancestors` only works as a header, which is one reason to send it.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "media-src 'none'",
  "object-src 'none'",
  "frame-src 'none'",
  "child-src 'none'",
  "worker-src 'self'",
  "manifest-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers sent with every file the scheme serves, besides Content-Type. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Referrer-Policy': 'no-referrer',
});

function parse(url: unknown): URL | null {
  if (typeof url !== 'string' || url.length === 0 || url.length > 8192) return null;
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/**
 * True when `url` is on the renderer's origin: scheme `app:`, host exactly `ropewalk`, no port, no
 * credentials. (Node's URL reports `origin` "null" for non-special schemes, so the parts are
 * compared one by one.)
 */
export function isTrustedRendererUrl(url: unknown): boolean {
  const u = parse(url);
  return u !== null && u.protocol === `${APP_SCHEME}:` && u.host === APP_HOST && u.username === '' && u.password === '';
}

/**
 * True for a download the window itself made: a `blob:` URL of the renderer's origin (a
 * conversation export). Everything else is refused, so a page can never make the app fetch a file.
 */
export function isAllowedDownload(url: unknown): boolean {
  return typeof url === 'string' && url.startsWith('blob:') && isTrustedRendererUrl(url.slice('blob:'.length));
}

/** What main knows about the sender of an IPC message (taken from the Electron event). */
export interface SenderFacts {
  /** `event.sender.id`: the webContents the message came from. */
  webContentsId: number;
  /** `event.senderFrame?.url`; null when the frame is gone (navigated or destroyed). */
  frameUrl: string | null;
  /** The sending frame is the top-level frame of its webContents. */
  isMainFrame: boolean;
}

/**
 * Whether an IPC message may be served: it comes from our window's webContents
 * (`windowWebContentsId`; null = no window, refuse everything), from its main frame, and that
 * frame is on our origin.
 */
export function isTrustedSender(sender: SenderFacts, windowWebContentsId: number | null): boolean {
  if (windowWebContentsId === null || sender.webContentsId !== windowWebContentsId) return false;
  if (!sender.isMainFrame) return false;
  return isTrustedRendererUrl(sender.frameUrl);
}

/**
 * `will-navigate` policy: the page may only "navigate" to itself (same origin and path; the query
 * and hash may differ). Everything else is prevented.
 */
export function isAllowedNavigation(targetUrl: unknown, currentUrl: unknown): boolean {
  if (!isTrustedRendererUrl(targetUrl) || !isTrustedRendererUrl(currentUrl)) return false;
  return new URL(targetUrl as string).pathname === new URL(currentUrl as string).pathname;
}

/** Schemes a link may open in the system browser. */
export const EXTERNAL_SCHEMES: readonly string[] = ['http:', 'https:'];

/**
 * The URL to hand to `shell.openExternal`, or null when the link must not leave the app: only
 * http(s), no embedded credentials, a host, at most 2048 characters. Returns the normalised href,
 * so what is opened is exactly what was checked.
 */
export function externalLinkTarget(url: unknown): string | null {
  if (typeof url !== 'string' || url.length > 2048) return null;
  const u = parse(url);
  if (!u || !EXTERNAL_SCHEMES.includes(u.protocol)) return null;
  if (u.username !== '' || u.password !== '' || u.hostname === '') return null;
  return u.href;
}

/**
 * Permissions the page may have. Everything is denied except writing sanitized text to the
 * clipboard (the "copy answer" button uses `navigator.clipboard.writeText`), and only for our
 * origin. Camera, microphone, geolocation, notifications, HID/serial/USB, clipboard reads: denied.
 */
export function isPermissionAllowed(permission: string, requestingUrl: unknown): boolean {
  return permission === 'clipboard-sanitized-write' && isTrustedRendererUrl(requestingUrl);
}

/** webPreferences of the window (checked against Electron's type where the window is created). */
export interface HardenedWebPreferences {
  readonly preload: string;
  readonly contextIsolation: true;
  readonly sandbox: true;
  readonly nodeIntegration: false;
  readonly nodeIntegrationInWorker: false;
  readonly nodeIntegrationInSubFrames: false;
  readonly webSecurity: true;
  readonly allowRunningInsecureContent: false;
  readonly webviewTag: false;
  readonly experimentalFeatures: false;
  readonly navigateOnDragDrop: false;
  readonly safeDialogs: true;
  readonly spellcheck: false;
  readonly devTools: boolean;
}

/**
 * The window's webPreferences: isolated, sandboxed, no Node anywhere in the renderer, web security
 * on, no <webview>. `devTools` is true only in unpackaged (development) runs.
 */
export function buildWebPreferences(opts: { preload: string; devTools: boolean }): HardenedWebPreferences {
  return Object.freeze({
    preload: opts.preload,
    contextIsolation: true,
    sandbox: true,
    nodeIntegration: false,
    nodeIntegrationInWorker: false,
    nodeIntegrationInSubFrames: false,
    webSecurity: true,
    allowRunningInsecureContent: false,
    webviewTag: false,
    experimentalFeatures: false,
    navigateOnDragDrop: false,
    safeDialogs: true,
    // Off: Chromium fetches spellcheck dictionaries from the network, and this app is offline.
    spellcheck: false,
    devTools: opts.devTools,
  });
}

/**
 * Limits on an IPC request before it reaches the router's zod schemas. The schemas bound every
 * field (a message is at most 1,000,000 characters); this bound is looser and only stops absurd
 * payloads (huge arrays, deep nesting) cheaply, without serialising them.
 */
export const IPC_LIMITS = Object.freeze({ maxChars: 4_000_000, maxDepth: 16, maxEntries: 10_000 });

/**
 * Whether `payload` is within the limits: total string length (keys included) ≤ maxChars, nesting
 * ≤ maxDepth, total object/array entries ≤ maxEntries. Stops walking as soon as a limit is passed.
 */
export function isPayloadWithinLimits(payload: unknown, limits: { maxChars: number; maxDepth: number; maxEntries: number } = IPC_LIMITS): boolean {
  let chars = 0;
  let entries = 0;
  const walk = (v: unknown, depth: number): boolean => {
    if (typeof v === 'string') return (chars += v.length) <= limits.maxChars;
    if (v === null || typeof v !== 'object') return true;
    if (depth >= limits.maxDepth) return false;
    const keys = Object.keys(v);
    if ((entries += keys.length) > limits.maxEntries) return false;
    for (const k of keys) {
      if ((chars += k.length) > limits.maxChars) return false;
      if (!walk((v as Record<string, unknown>)[k], depth + 1)) return false;
    }
    return true;
  };
  return walk(payload, 0);
}
