/**
 * The desktop app's engine process seam with a stand-in for Electron's UtilityProcess (Electron
 * cannot start here): app/utility-engine.ts carries the protocol's messages both ways, reports one
 * end (the exit, or a fatal V8 error first), drops messages after it, kills; utilityEngineSpawn
 * forks with the engine's options. The engine's side, utilityPort (main/engine-host/channel.ts),
 * unwraps Electron's `{ data }` message events. The real worker behind this seam:
 * test/integration/engine-utility-seam.test.ts.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { utilityEngineProcess, utilityEngineSpawn, type UtilityChild } from '../../app/utility-engine.ts';
import { utilityPort } from '../../main/engine-host/channel.ts';

/** A UtilityProcess stand-in: what was posted, and `emit` for what the process would do. */
class StandInUtility extends EventEmitter implements UtilityChild {
  posted: unknown[] = [];
  kills = 0;
  pid: number | undefined = undefined;
  postMessage(message: unknown): void {
    this.posted.push(message);
  }
  kill(): boolean {
    this.kills++;
    return true;
  }
}

test('utilityEngineProcess: messages both ways, pid once spawned, one end (the first of error and exit), nothing sent after it', () => {
  const child = new StandInUtility();
  const p = utilityEngineProcess(child);
  const received: unknown[] = [];
  const ends: string[] = [];
  p.onMessage((m) => received.push(m));
  p.onEnd((why) => ends.push(why));
  assert.equal(p.pid, null, 'no pid before spawn');
  p.send({ type: 'load', id: 1, source: 'x', options: {} });
  child.pid = 4242;
  child.emit('message', { type: 'loaded', id: 1, info: {} });
  assert.equal(p.pid, 4242);
  assert.deepEqual(child.posted, [{ type: 'load', id: 1, source: 'x', options: {} }]);
  assert.deepEqual(received, [{ type: 'loaded', id: 1, info: {} }]);
  assert.equal(p.ended, false);
  child.emit('error', 'FatalError', 'v8::ToLocalChecked Empty MaybeLocal', 'report');
  child.emit('exit', 133);
  assert.deepEqual(ends, ['FatalError at v8::ToLocalChecked Empty MaybeLocal'], 'one end, the first reason');
  assert.equal(p.ended, true);
  p.send({ type: 'reset', id: 2 });
  assert.equal(child.posted.length, 1, 'dropped after the end');
  p.kill();
  assert.equal(child.kills, 1);
});

test('utilityEngineProcess: an exit alone says its code', () => {
  const child = new StandInUtility();
  const p = utilityEngineProcess(child);
  const ends: string[] = [];
  p.onEnd((why) => ends.push(why));
  child.emit('exit', 9);
  assert.deepEqual(ends, ['exit code 9']);
});

test('utilityEngineSpawn: forks the module with the engine options (execArgv, a service name, stdout ignored, stderr inherited)', () => {
  const calls: unknown[][] = [];
  const child = new StandInUtility();
  const spawn = utilityEngineSpawn((...args) => {
    calls.push(args);
    return child;
  });
  const p = spawn('/opt/Ropewalk/resources/app.asar.unpacked/dist/app/worker.js', { execArgv: [] });
  assert.deepEqual(calls, [['/opt/Ropewalk/resources/app.asar.unpacked/dist/app/worker.js', [], { execArgv: [], serviceName: 'Ropewalk engine', stdio: ['ignore', 'ignore', 'inherit'] }]]);
  p.send({ type: 'stats', id: 3 });
  assert.deepEqual(child.posted, [{ type: 'stats', id: 3 }]);
});

test('utilityPort (the engine side): Electron message events are unwrapped, replies posted as they are', () => {
  const parent = new EventEmitter() as EventEmitter & { postMessage(m: unknown): void; posted: unknown[] };
  parent.posted = [];
  parent.postMessage = (m) => parent.posted.push(m);
  const port = utilityPort(parent);
  const got: unknown[] = [];
  port.onMessage((m) => got.push(m));
  parent.emit('message', { data: { type: 'cancel', id: 5 } });
  port.post({ type: 'result', id: 5, value: null });
  assert.deepEqual(got, [{ type: 'cancel', id: 5 }]);
  assert.deepEqual(parent.posted, [{ type: 'result', id: 5, value: null }]);
});
