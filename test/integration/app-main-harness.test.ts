/**
 * The bundled main process (dist/app/main.js as app/build.ts makes it) run under plain Node in a
 * child process, with `electron` resolved to a recording fake by a module hook: real services,
 * real SQLite, the real engine worker on stories260K. It checks the wiring Electron would see:
 * scheme registration, one invoke handler per method with the sender check, a full chat turn with
 * events forwarded to the window, the protocol handler's files and headers, navigation, window
 * opening, webview and permission rules, the menu, the Local server setting (the /v1 API on
 * 127.0.0.1), and a clean quit that disposes everything.
 *
 * What it cannot check: Chromium itself (CSP enforcement, contextIsolation, the sandbox).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { bundleOptions } from '../../app/build.ts';
import { channelOf, METHOD_NAMES } from '../../main/contract/names.ts';
import { PROJECT_ROOT, STORIES_BIN } from '../helpers/paths.ts';

const ROOT = path.join(PROJECT_ROOT, 'test', 'artifacts', `app-main-${process.pid}`);
const OUT = path.join(ROOT, 'app');
const TMP = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-main-harness-'));

// The fake `electron`: records what main does; its objects expose just what main calls.
const FAKE_ELECTRON = String.raw`
import { fork } from 'node:child_process';
import { EventEmitter } from 'node:events';
const log = (globalThis.__fake = { encrypted: [], handlers: new Map(), schemes: new Map(), privileged: [], windows: [], sent: [], opened: [], errors: [], quitted: false });
let nextId = 1;
const event = () => ({ defaultPrevented: false, preventDefault() { this.defaultPrevented = true; } });
class App extends EventEmitter {
  isPackaged = false; ready = false;
  whenReady() { return new Promise((r) => setTimeout(() => { this.ready = true; r(); }, 10)); }
  isReady() { return this.ready; }
  requestSingleInstanceLock() { return true; }
  enableSandbox() { log.sandbox = true; }
  getPath(name) { log.pathAsked = name; return process.env.FAKE_USER_DATA; }
  getVersion() { return '0.0.0'; }
  setAboutPanelOptions() {}
  showAboutPanel() {}
  quit() { const e = event(); this.emit('before-quit', e); if (!e.defaultPrevented) log.quitted = true; }
}
export const app = (log.app = new App());
class WebContents extends EventEmitter {
  id = nextId++; url = ''; mainFrame = { url: '', parent: null };
  setWindowOpenHandler(h) { this.windowOpenHandler = h; }
  getURL() { return this.url; }
  isDestroyed() { return false; }
  send(channel, msg) { log.sent.push({ channel, msg: structuredClone(msg) }); }
}
export class BrowserWindow extends EventEmitter {
  static all = [];
  constructor(opts) { super(); this.opts = opts; this.webContents = new WebContents(); app.emit('web-contents-created', {}, this.webContents); log.windows.push(this); BrowserWindow.all.push(this); }
  loadURL(url) { this.webContents.url = url; this.webContents.mainFrame.url = url; return Promise.resolve(); }
  isDestroyed() { return false; } isMinimized() { return false; } restore() {} focus() {} show() {}
  static getAllWindows() { return BrowserWindow.all; }
}
export const ipcMain = {
  handle(ch, fn) { if (log.handlers.has(ch)) throw new Error('second handler for ' + ch); log.handlers.set(ch, fn); },
  removeHandler(ch) { log.handlers.delete(ch); },
};
export const protocol = {
  registerSchemesAsPrivileged(s) { if (app.ready) throw new Error('registered after ready'); log.privileged.push(...s); },
  handle(scheme, fn) { log.schemes.set(scheme, fn); },
  unhandle(scheme) { log.schemes.delete(scheme); },
};
export const session = { defaultSession: {
  setPermissionRequestHandler(h) { log.permissionRequest = h; },
  setPermissionCheckHandler(h) { log.permissionCheck = h; },
  setDevicePermissionHandler(h) { log.devicePermission = h; },
  on(name, h) { if (name === 'will-download') log.willDownload = h; },
} };
export const shell = { openExternal(url) { log.opened.push(url); return Promise.resolve(); } };
export const dialog = { showErrorBox(_t, m) { log.errors.push(m); }, showOpenDialog: async () => ({ canceled: true, filePaths: [] }), showMessageBox: async () => ({}) };
export const Menu = { buildFromTemplate(t) { return { template: t }; }, setApplicationMenu(m) { log.menu = m; } };
// Electron's utilityProcess.fork stood in by a forked Node child with the utility-process shim
// (process.parentPort, no process.send), so the engine worker takes its utility-process branch.
export const utilityProcess = {
  fork(modulePath, args, options) {
    log.utilityForks = (log.utilityForks ?? 0) + 1;
    const child = fork(modulePath, args, { execArgv: [...(options.execArgv ?? []), '--import', process.env.FAKE_UTILITY_SHIM], serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const u = {
      postMessage: (m) => void (child.connected && child.send(m)),
      on(event, l) {
        if (event === 'exit') child.on('exit', (code, signal) => l(code ?? (signal === 'SIGKILL' ? 137 : 1)));
        else if (event === 'message') child.on('message', l);
        return u;
      },
      kill: () => child.kill('SIGKILL'),
      get pid() { return child.pid; },
    };
    return u;
  },
};
// A keychain stand-in: reversible, and it records what it was asked to encrypt.
export const safeStorage = {
  isEncryptionAvailable: () => true, getSelectedStorageBackend: () => 'gnome_libsecret',
  encryptString(s) { log.encrypted.push(s); return Buffer.from('enc:' + [...s].reverse().join('')); },
  decryptString(b) { return [...b.toString().slice(4)].reverse().join(''); },
};
`;

const HARNESS = String.raw`
import { register } from 'node:module';
const fakeUrl = new URL('./fake-electron.mjs', import.meta.url).href;
const hooks = 'export async function resolve(s, c, next) { return s === "electron" ? { url: ' + JSON.stringify(fakeUrl) + ', shortCircuit: true } : next(s, c); }';
register('data:text/javascript,' + encodeURIComponent(hooks));
await import('./app/main.js');
const log = globalThis.__fake;
const until = async (what, ok, ms = 30000) => { const t = Date.now(); while (!(await ok())) { if (Date.now() - t > ms) throw new Error('timed out: ' + what); await new Promise((r) => setTimeout(r, 20)); } };
await until('window', () => log.windows.length === 1);
const win = log.windows[0], wc = win.webContents;
const r = { privileged: log.privileged, sandbox: log.sandbox, pathAsked: log.pathAsked, webPreferences: win.opts.webPreferences, loaded: wc.url, channels: [...log.handlers.keys()].sort() };
const call = (ev, m, p) => log.handlers.get('ropewalk:' + m)(ev, p);
const trusted = { sender: wc, senderFrame: wc.mainFrame };
r.refused = [
  { sender: wc, senderFrame: { url: 'https://evil.example/', parent: null } },
  { sender: wc, senderFrame: { url: 'app://ropewalk/index.html', parent: wc.mainFrame } },
  { sender: { id: 999 }, senderFrame: { url: 'app://ropewalk/index.html', parent: null } },
  { sender: wc, senderFrame: null },
  { sender: wc, get senderFrame() { throw new Error('Render frame was disposed'); } },
].map((ev) => call(ev, 'getSettings', {}));
r.refused = await Promise.all(r.refused);
await until('model', async () => (await call(trusted, 'getModel', {})).value.status === 'ready');
r.invalid = await call(trusted, 'getConversation', { id: '' });
const conv = (await call(trusted, 'createConversation', {})).value;
r.send = await call(trusted, 'sendMessage', { conversationId: conv.id, content: 'Once upon a time' });
await until('answerDone', () => log.sent.some((s) => s.msg.event === 'answerDone'));
r.eventChannels = [...new Set(log.sent.map((s) => s.channel))];
r.events = [...new Set(log.sent.map((s) => s.msg.event))].sort();
r.done = log.sent.find((s) => s.msg.event === 'answerDone').msg.data.message;
// The Local server setting: off by default; on, the same /v1 on 127.0.0.1; off again, closed.
r.serverDefault = (await call(trusted, 'getLocalServer', {})).value;
r.serverEnable = (await call(trusted, 'updateSettings', { localServer: true, localServerPort: 0 })).ok;
const ls = (await call(trusted, 'getLocalServer', {})).value;
r.serverState = ls;
r.serverModels = await (await fetch(ls.baseUrl + '/models')).json();
const chat = await fetch(ls.baseUrl + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 4, temperature: 0 }) });
r.serverChat = { status: chat.status, body: await chat.json() };
r.serverOther = (await fetch(ls.baseUrl.replace('/v1', '/index.html'))).status;
// The CORS field's setting: a bad origin is refused, a good one is stored as browsers send it and the running server grants it.
const preflight = async (origin, base = ls.baseUrl) => (await fetch(base + '/models', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } })).headers.get('access-control-allow-origin');
r.corsOff = await preflight('http://localhost:3000');
r.corsBad = await call(trusted, 'updateSettings', { localServerCors: 'http://localhost:3000/app' });
r.corsSaved = (await call(trusted, 'updateSettings', { localServerCors: 'HTTP://LocalHost:3000/' })).value?.localServerCors;
const lsCors = (await call(trusted, 'getLocalServer', {})).value;
r.corsGranted = await preflight('http://localhost:3000', lsCors.baseUrl);
r.corsStranger = await preflight('http://evil.example', lsCors.baseUrl);
// A remote engine with an API key (a stand-in server that lists one model): the key is encrypted with safeStorage at rest and never sent back.
const { createServer } = await import('node:http');
const standIn = createServer((req, res) => { res.writeHead(req.url === '/v1/models' ? 200 : 404, { 'content-type': 'application/json' }); res.end(req.url === '/v1/models' ? '{"data":[{"id":"m"}]}' : '{}'); });
await new Promise((ok) => standIn.listen(0, '127.0.0.1', ok));
r.standInUrl = 'http://127.0.0.1:' + standIn.address().port + '/v1';
const connected = await call(trusted, 'connectRemote', { baseUrl: r.standInUrl, model: 'm', apiKey: 'k-123' });
if (!connected.ok) throw new Error('connectRemote: ' + JSON.stringify(connected.error));
const remoteState = connected.value;
r.remote = remoteState.info.remote;
r.remoteStateHasKey = JSON.stringify(remoteState).includes('k-123');
r.encrypted = log.encrypted;
const Database = (await import('better-sqlite3')).default;
const db = new Database(process.env.FAKE_USER_DATA + '/ropewalk.db', { readonly: true });
r.storedKey = db.prepare("SELECT value FROM settings WHERE key = 'remote.apiKey'").get()?.value ?? null;
db.close();
r.localAgain = (await call(trusted, 'openModel', { path: process.env.ROPEWALK_DEFAULT_MODEL })).value?.info?.remote ?? null;
standIn.close();
await call(trusted, 'updateSettings', { localServer: false });
r.serverAfterOff = (await call(trusted, 'getLocalServer', {})).value;
r.serverClosed = await fetch(ls.baseUrl + '/models').then(() => 'open', () => 'closed');
const serve = async (url, init) => { const res = await log.schemes.get('app')(new Request(url, init)); return { status: res.status, csp: res.headers.get('content-security-policy'), nosniff: res.headers.get('x-content-type-options'), type: res.headers.get('content-type'), body: await res.text() }; };
r.files = {
  index: await serve('app://ropewalk/index.html'), root: await serve('app://ropewalk/'), missing: await serve('app://ropewalk/nope.js'),
  traversal: await serve('app://ropewalk/..%2f..%2fpackage.json'), post: await serve('app://ropewalk/index.html', { method: 'POST', body: 'x' }),
};
const nav = (url) => { const e = { url, defaultPrevented: false, preventDefault() { this.defaultPrevented = true; } }; wc.emit('will-navigate', e); return e.defaultPrevented; };
r.navPrevented = { evil: nav('https://evil.example/'), file: nav('file:///etc/passwd'), self: nav('app://ropewalk/index.html') };
r.windowOpen = ['https://example.com/a', 'javascript:alert(1)', 'file:///etc/passwd'].map((url) => wc.windowOpenHandler({ url }).action);
r.opened = log.opened;
const wv = { defaultPrevented: false, preventDefault() { this.defaultPrevented = true; } }; wc.emit('will-attach-webview', wv); r.webviewPrevented = wv.defaultPrevented;
r.permissions = await Promise.all(['media', 'geolocation', 'clipboard-sanitized-write'].map((p) => new Promise((res) => log.permissionRequest(wc, p, res, { requestingUrl: 'app://ropewalk/index.html' }))));
r.menu = log.menu.template.map((m) => m.label ?? m.role);
r.viewMenu = log.menu.template.find((m) => m.label === '&View').submenu.map((i) => i.role ?? i.type);
r.errors = log.errors;
log.app.quit();
await until('quit', () => log.quitted);
r.handlersAfterQuit = log.handlers.size; r.schemesAfterQuit = log.schemes.size;
r.utilityForks = log.utilityForks ?? 0;
console.log('RESULT ' + JSON.stringify(r));
`;

/** The child's JSON report (shape checked by the assertions). */
type HarnessResult = Record<string, any>;
let result: HarnessResult;
let childExit: { status: number | null; signal: string | null; stderr: string };

before(async () => {
  const opts = bundleOptions(OUT);
  await Promise.all([esbuild.build({ ...opts.main, logLevel: 'silent' }), esbuild.build({ ...opts.worker, logLevel: 'silent' })]);
  mkdirSync(path.join(ROOT, 'renderer'), { recursive: true });
  writeFileSync(path.join(ROOT, 'renderer', 'index.html'), '<!doctype html><title>Ropewalk</title><script type="module" src="app.js"></script>');
  writeFileSync(path.join(ROOT, 'fake-electron.mjs'), FAKE_ELECTRON);
  writeFileSync(path.join(ROOT, 'harness.mjs'), HARNESS);
  const run = spawnSync(process.execPath, [path.join(ROOT, 'harness.mjs')], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, FAKE_UTILITY_SHIM: path.join(PROJECT_ROOT, 'test/helpers/utility-process-shim.mjs'), FAKE_USER_DATA: path.join(TMP, 'userData'), ROPEWALK_CACHE_DIR: path.join(TMP, 'cache'), ROPEWALK_DEFAULT_MODEL: STORIES_BIN },
  });
  childExit = { status: run.status, signal: run.signal, stderr: run.stderr };
  const line = run.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, `the harness printed no result (exit ${run.status} ${run.signal})\n${run.stderr.slice(-3000)}`);
  result = JSON.parse(line.slice('RESULT '.length));
});
after(() => {
  rmSync(ROOT, { recursive: true, force: true });
  rmSync(TMP, { recursive: true, force: true });
});

describe('main process under a fake electron', () => {
  it('registers the privileged scheme before ready and forces the sandbox', () => {
    assert.deepEqual(result.privileged, [{ scheme: 'app', privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
    assert.equal(result.sandbox, true);
    assert.equal(result.pathAsked, 'userData');
  });

  it('creates a hardened window on app://ropewalk/index.html', () => {
    const p = result.webPreferences;
    assert.equal(p.contextIsolation, true);
    assert.equal(p.sandbox, true);
    assert.equal(p.nodeIntegration, false);
    assert.equal(p.webSecurity, true);
    assert.match(p.preload, /[\\/]app[\\/]preload\.cjs$/);
    assert.equal(p.devTools, true, 'unpackaged: devtools available');
    assert.equal(result.loaded, 'app://ropewalk/index.html');
  });

  it('registers exactly one handler per contract method and refuses untrusted senders', () => {
    assert.deepEqual(result.channels, METHOD_NAMES.map(channelOf).sort());
    assert.equal(result.refused.length, 5);
    for (const r of result.refused) assert.deepEqual(r, { ok: false, error: { code: 'FORBIDDEN', message: 'this window is not allowed to call the app' } });
    assert.equal(result.invalid.ok, false);
    assert.equal(result.invalid.error.code, 'INVALID_REQUEST');
  });

  it('runs a chat turn and forwards its events on the event channel', () => {
    assert.equal(result.send.ok, true);
    assert.deepEqual(result.eventChannels, ['ropewalk:event']);
    for (const e of ['answerDelta', 'answerDone', 'conversationsChanged', 'modelState']) assert.ok(result.events.includes(e), e);
    assert.equal(result.done.status, 'complete');
    assert.ok(result.done.content.length > 0);
    assert.equal(result.utilityForks, 1, "the engine ran in one utility process (Electron's utilityProcess.fork)");
  });

  it('Local server: off by default; when on, the OpenAI-compatible API on 127.0.0.1 answers; its CORS origin is validated and granted; off again, it is closed', () => {
    assert.deepEqual(result.serverDefault, { status: 'off', baseUrl: null, error: null });
    assert.equal(result.serverEnable, true);
    assert.equal(result.serverState.status, 'running');
    assert.match(result.serverState.baseUrl, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    assert.deepEqual(result.serverModels.data.map((m: { id: string }) => m.id), ['stories260K']);
    assert.equal(result.serverChat.status, 200);
    assert.equal(result.serverChat.body.usage.completion_tokens, 4);
    assert.equal(result.serverOther, 404, 'only the API is served, not the window');
    assert.equal(result.corsOff, null, 'CORS is off by default');
    assert.equal(result.corsBad.ok, false);
    assert.equal(result.corsBad.error.code, 'INVALID_REQUEST');
    assert.match(result.corsBad.error.message, /one origin such as http:\/\/localhost:3000.*"http:\/\/localhost:3000\/app"/);
    assert.equal(result.corsSaved, 'http://localhost:3000', 'stored as browsers send it');
    assert.equal(result.corsGranted, 'http://localhost:3000', 'the restarted server grants that origin');
    assert.equal(result.corsStranger, null, 'and no other');
  });

  it('a remote engine API key is encrypted with safeStorage at rest and never sent to the window', () => {
    assert.deepEqual(result.remote, { baseUrl: result.standInUrl, model: 'm', counting: 'estimate', apiKey: 'encrypted' });
    assert.equal(result.remoteStateHasKey, false);
    assert.deepEqual(result.encrypted, ['k-123'], 'the key went through safeStorage.encryptString');
    assert.ok(result.storedKey && !result.storedKey.includes('k-123'), `stored: ${result.storedKey}`);
    assert.equal(result.localAgain, null, 'openModel goes back to a local model');
    assert.deepEqual(result.serverAfterOff, { status: 'off', baseUrl: null, error: null });
    assert.equal(result.serverClosed, 'closed');
  });

  it('serves the renderer folder with CSP and nosniff, and nothing outside it', () => {
    const { index, root, missing, traversal, post } = result.files;
    assert.equal(index.status, 200);
    assert.equal(index.type, 'text/html; charset=utf-8');
    assert.match(index.csp, /default-src 'self'/);
    assert.equal(index.nosniff, 'nosniff');
    assert.equal(root.status, 200);
    assert.equal(root.body, index.body);
    assert.equal(missing.status, 404);
    assert.equal(traversal.status, 403);
    assert.ok(!traversal.body.includes('"name"'));
    assert.equal(post.status, 405);
    for (const f of [missing, traversal, post]) assert.match(f.csp, /object-src 'none'/);
  });

  it('blocks navigation, new windows and webviews; opens only http(s) outside', () => {
    assert.deepEqual(result.navPrevented, { evil: true, file: true, self: false });
    assert.deepEqual(result.windowOpen, ['deny', 'deny', 'deny']);
    assert.deepEqual(result.opened, ['https://evil.example/', 'https://example.com/a']);
    assert.equal(result.webviewPrevented, true);
    assert.deepEqual(result.permissions, [false, false, true]);
  });

  it('sets the menu (devtools only unpackaged) and reports no error', () => {
    assert.deepEqual(result.menu, ['&File', '&Edit', '&View', 'windowMenu', 'help']);
    assert.ok(result.viewMenu.includes('toggleDevTools'));
    assert.deepEqual(result.errors, []);
  });

  it('quits cleanly: handlers removed, services disposed, the process exits by itself', () => {
    assert.equal(result.handlersAfterQuit, 0);
    assert.equal(result.schemesAfterQuit, 0);
    assert.equal(childExit.signal, null, `the child was killed: ${childExit.stderr.slice(-2000)}`);
    assert.equal(childExit.status, 0, childExit.stderr.slice(-2000));
  });
});
