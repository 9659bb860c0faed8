/**
 * The services behind their router: what both transports start (the Electron shell's ipcMain and
 * `serve` mode's WebSocket). `startBackend` = `startServices` + a `Router` over its handlers and
 * events; with `localServer` (the desktop app), the Local server setting runs an API server
 * (main/serve/local-server.ts). Everything else is the services' own (main/services/index.ts).
 */
import { Router } from './router.ts';
import { LocalApiServer } from '../serve/local-server.ts';
import { startServices, type Services, type StartServicesOptions } from '../services/index.ts';

export interface Backend extends Services {
  router: Router;
}

/**
 * Starts the services and wires them into a router.
 * @throws ServiceError DATA_DIR / SCHEMA_TOO_NEW, or SQLite's error for an unreadable database.
 */
export async function startBackend(opts: Omit<StartServicesOptions, 'localServer'> & { localServer?: boolean }): Promise<Backend> {
  const { localServer, ...rest } = opts;
  const services = await startServices({ ...rest, ...(localServer ? { localServer: (c) => new LocalApiServer(c) } : {}) });
  return { ...services, router: new Router(services.handlers, services.events) };
}
