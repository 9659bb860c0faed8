/**
 * The window's one `RopewalkApi`: the Electron preload bridge (`window.ropewalk`) when present,
 * otherwise the `serve` mode WebSocket client on this page's origin at WS_PATH. Called once at
 * startup; `getConnection()` exposes the WebSocket status (null under Electron).
 */
import type { RopewalkApi } from '../main/contract/channels.ts';
import { WS_PATH } from '../main/contract/wire.ts';
import { withErrorCodes } from './lib/errors.ts';
import { createWsApi, type WsApi } from './lib/ws-client.ts';

let api: RopewalkApi | null = null;
let ws: WsApi | null = null;

export function getApi(): RopewalkApi {
  if (api) return api;
  const bridge = (window as Window & { ropewalk?: RopewalkApi }).ropewalk;
  if (bridge) return (api = withErrorCodes(bridge));
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  ws = createWsApi(`${scheme}//${location.host}${WS_PATH}`, (url) => new WebSocket(url));
  return (api = ws);
}

/** The WebSocket transport, for its connection status; null in Electron. */
export function getConnection(): WsApi | null {
  getApi();
  return ws;
}

