/**
 * The services behind their router: what both transports start (the Electron shell's ipcMain and
 * `serve` mode's WebSocket). `startBackend` = `startServices` + a `Router` over its handlers and
 * events; everything else is the services' own (see main/services/index.ts).
 */
import { Router } from './router.ts';
import { startServices, type Services, type StartServicesOptions } from './services/index.ts';

export interface Backend extends Services {
  router: Router;
}

/**
 * Starts the services and wires them into a router.
 * @throws ServiceError DATA_DIR / SCHEMA_TOO_NEW, or SQLite's error for an unreadable database.
 */
export async function startBackend(opts: StartServicesOptions): Promise<Backend> {
  const services = await startServices(opts);
  return { ...services, router: new Router(services.handlers, services.events) };
}
