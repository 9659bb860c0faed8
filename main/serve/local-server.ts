/**
 * The desktop app's "Local server": the same `/health` and OpenAI-compatible `/v1` as `serve`
 * mode (api-routes.ts), on 127.0.0.1 at the port the settings name, started, restarted and
 * stopped as the settings change. Nothing else is served (no window files, no WebSocket: other
 * paths get a JSON 404). A port that cannot be taken is reported in the state, never thrown.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalServerState, Settings } from '../contract/types.ts';
import type { CompletionBackend, LocalServerControl } from '../services/index.ts';
import { routeApi } from './api-routes.ts';
import { createLocalHttpServer } from './local-http.ts';
import { sendError } from './openai.ts';
import { ApiError } from './openai-request.ts';
import { HOST } from './server.ts';

const OFF: LocalServerState = { status: 'off', baseUrl: null, error: null };

/** Runs the API server the Local server settings ask for. */
export class LocalApiServer implements LocalServerControl {
  private server: http.Server | null = null;
  private current: LocalServerState = OFF;
  /** What the running (or failed) server was started for: `port|cors`, '' when off. */
  private wanted = '';
  private applying: Promise<LocalServerState> = Promise.resolve(OFF);

  constructor(private readonly completions: CompletionBackend) {}

  state(): LocalServerState {
    return this.current;
  }

  /** Starts, restarts or stops the server to match `s` (one change at a time, in order). */
  apply(s: Settings): Promise<LocalServerState> {
    this.applying = this.applying.then(() => this.bringInLine(s));
    return this.applying;
  }

  /** Stops the server. */
  async close(): Promise<void> {
    await this.applying;
    await this.stop();
    this.wanted = '';
    this.current = OFF;
  }

  private async bringInLine(s: Settings): Promise<LocalServerState> {
    const wanted = s.localServer ? `${s.localServerPort}|${s.localServerCors}` : '';
    if (wanted === this.wanted && this.current.status !== 'error') return this.current;
    await this.stop();
    this.wanted = wanted;
    this.current = s.localServer ? await this.start(s.localServerPort, s.localServerCors || null) : OFF;
    return this.current;
  }

  private async start(port: number, cors: string | null): Promise<LocalServerState> {
    let bound = 0;
    const server = createLocalHttpServer(() => bound, (req, res) => {
      if (!routeApi(req, res, { port: () => bound, completions: this.completions, cors })) {
        sendError(res, new ApiError(404, 'not_found', `no endpoint ${(req.url ?? '').split('?')[0].slice(0, 100)}; the API is under /v1`));
      }
    });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, HOST, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const why = code === 'EADDRINUSE' ? `port ${port} is in use; pick another` : code === 'EACCES' ? `port ${port} is not allowed; pick one above 1023` : `cannot listen on port ${port}: ${(e as Error).message}`;
      return { status: 'error', baseUrl: null, error: why };
    }
    bound = (server.address() as AddressInfo).port;
    this.server = server;
    return { status: 'running', baseUrl: `http://${HOST}:${bound}/v1`, error: null };
  }

  private async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
