/**
 * Starts a `worker_threads` worker from a module URL, in source runs and in the bundled app alike.
 * Under tsx (source runs, tests) a worker does not inherit tsx's module hooks on Node 20, so a
 * small bootstrap registers them before importing the `.ts` module; a `.js` URL (the bundle)
 * starts directly. Used by the engine host and by document extraction.
 */
import { Worker, type WorkerOptions } from 'node:worker_threads';

/** `new Worker(url, options)`, through tsx's hooks when `url` is a `.ts` file. */
export function workerThread(url: URL, options: WorkerOptions = {}): Worker {
  if (!url.pathname.endsWith('.ts')) return new Worker(url, options);
  const tsxApi = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(url.href)}); })`;
  return new Worker(boot, { ...options, eval: true });
}
