/**
 * The engine worker: owns one `Engine` and serves the host's requests (protocol.ts). Inference
 * runs here so the host's event loop (window, IPC, terminal) stays free during prefill and decode.
 * It runs as the engine's own child process (the default) or as a worker thread (channel.ts); when
 * the host's process goes away, a child process stops too.
 */
import { enginePort } from './channel.ts';
import { EngineError, toEngineError } from '../engine/errors.ts';
import { Engine } from '../engine/generate/engine.ts';
import type { EngineCacheStats, HostToWorker, WorkerToHost } from './protocol.ts';

const port = enginePort();
let engine: Engine | null = null;
const running = new Map<number, AbortController>();
/** Every request being handled; shutdown waits for them so no native call is in flight. */
const inflight = new Set<Promise<void>>();
let stopping = false;

/**
 * Outgoing messages. A token event may wait up to COALESCE_MS and leave with the ones after it as
 * one `batch` message: a message across the process boundary costs its serialization and a write,
 * and a small model decodes a token in well under a millisecond. Everything else (the first token
 * of an answer, for TTFT; done, errors, results, progress) leaves at once, after what waits, so the
 * order is kept. The services batch the text for the window every 16 ms anyway.
 */
const COALESCE_MS = 2;
const outbox: WorkerToHost[] = [];
let lastFlush = 0;
let flushTimer: ReturnType<typeof setTimeout> | null = null;

function flush(): void {
  if (flushTimer) clearTimeout(flushTimer);
  flushTimer = null;
  lastFlush = performance.now();
  if (outbox.length === 0 || stopping) return;
  const messages = outbox.splice(0);
  port.post(messages.length === 1 ? messages[0] : { type: 'batch', id: 0, messages });
}

const send = (m: WorkerToHost, mayWait = false) => {
  if (stopping) return;
  outbox.push(m);
  if (!mayWait || performance.now() - lastFlush >= COALESCE_MS) flush();
  else flushTimer ??= setTimeout(flush, COALESCE_MS);
};
const fail = (id: number, e: unknown) => send({ type: 'error', id, error: toEngineError(e).toJSON() });

function requireEngine(): Engine {
  if (!engine) throw new EngineError('MODEL_LOAD', 'no model is loaded');
  return engine;
}

port.onHostGone(() => void shutdown(0));
port.onMessage((msg: HostToWorker) => {
  if (msg.type === 'shutdown') {
    void shutdown(msg.exitCode);
    return;
  }
  if (stopping) return;
  const p = handle(msg).finally(() => inflight.delete(p));
  inflight.add(p);
});

async function shutdown(exitCode: number): Promise<void> {
  stopping = true;
  for (const ac of running.values()) ac.abort();
  await Promise.allSettled([...inflight]);
  await engine?.dispose().catch(() => undefined);
  process.exit(exitCode);
}

/** Answers a request whose work is synchronous: its value as a result, or what it threw. */
function reply(id: number, compute: () => unknown): void {
  try {
    send({ type: 'result', id, value: compute() });
  } catch (e) {
    fail(id, e);
  }
}

async function handle(msg: HostToWorker): Promise<void> {
  switch (msg.type) {
    case 'load': {
      // Cancellable like a generation ('cancel' with this id, or shutdown): an import stops clean.
      const ac = new AbortController();
      running.set(msg.id, ac);
      try {
        const next = await Engine.load(msg.source, {
          ...msg.options,
          onProgress: (p) => send({ type: 'progress', id: msg.id, ...p }),
          signal: ac.signal,
        });
        // The previous model stays loaded until the new one has loaded.
        const old = engine;
        engine = next;
        await old?.dispose();
        send({ type: 'loaded', id: msg.id, info: next.info });
      } catch (e) {
        fail(msg.id, e);
      } finally {
        running.delete(msg.id);
      }
      return;
    }
    case 'generate': {
      const ac = new AbortController();
      running.set(msg.id, ac);
      try {
        let first = true;
        for await (const event of requireEngine().generate(msg.request, { signal: ac.signal })) {
          send({ type: 'event', id: msg.id, event }, event.type === 'token' && !first);
          if (event.type === 'token') first = false;
        }
      } catch (e) {
        fail(msg.id, e);
      } finally {
        running.delete(msg.id);
      }
      return;
    }
    case 'cancel':
      running.get(msg.id)?.abort();
      return;
    case 'count':
      return reply(msg.id, () => requireEngine().encodeRequest(msg.request).length);
    case 'countEach':
      return reply(msg.id, () => {
        const t = requireEngine().tokenizer;
        return msg.texts.map((text) => t.encode(text, { addBos: false, parseSpecial: false }).length);
      });
    case 'tokenize':
      return reply(msg.id, () => {
        const e = requireEngine();
        const r = msg.request;
        return 'messages' in r ? e.encodeRequest({ messages: r.messages }) : e.tokenizer.encode(r.text, { addBos: r.addSpecial && e.tokenizer.addBos, parseSpecial: r.parseSpecial });
      });
    case 'renderChat':
      return reply(msg.id, () => requireEngine().tokenizer.renderChat(msg.messages));
    case 'detokenize':
      return reply(msg.id, () => requireEngine().tokenizer.decode(msg.ids));
    case 'stats':
      return reply(msg.id, () => {
        const e = requireEngine();
        return { rope: e.rope.stats, kv: e.kv.stats } satisfies EngineCacheStats;
      });
    case 'reset':
      return reply(msg.id, () => {
        requireEngine().reset();
        return null;
      });
  }
}
