/**
 * Preloaded (`--import`) into a forked Node child to make it look like an Electron utility process
 * to the engine: `process.parentPort` over the IPC channel, messages delivered as `{ data }` events
 * and sent with `postMessage` (Electron's ParentPort), held until the first 'message' listener as
 * Electron's port holds them, and `process.send` hidden, so the engine worker must take the
 * utility-process branch of enginePort(). Plain JavaScript, so a child without tsx can preload it:
 * test/integration/engine-utility-seam.test.ts and the fake electron's utilityProcess in
 * test/integration/app-main-harness.test.ts.
 */
import { EventEmitter } from 'node:events';

const send = process.send.bind(process);
const parentPort = Object.assign(new EventEmitter(), { postMessage: (m) => void send(m) });
const held = [];
process.on('message', (m) => (parentPort.listenerCount('message') > 0 ? parentPort.emit('message', { data: m }) : held.push(m)));
parentPort.on('newListener', (event) => {
  if (event === 'message') setImmediate(() => held.splice(0).forEach((m) => parentPort.emit('message', { data: m })));
});
Object.assign(process, { parentPort, send: undefined });
