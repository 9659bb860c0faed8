/**
 * Bench section `isolation`: what the engine's own process costs against a worker thread
 * (main/engine-host/channel.ts), measured where the services see it — on the host's side of the
 * channel, so the token events' trip across the process boundary is inside the figures: TTFT (from
 * `generate` to the first token event received) and decode tok/s (token events received between
 * the first and the last), on the same model, prompt and greedy settings, the two isolations
 * interleaved round by round so both see the same load. Medians; the ratio process / thread.
 */
import { EngineHost } from '../../main/engine-host/host.ts';
import type { EngineIsolation } from '../../main/engine-host/channel.ts';
import type { GenerationRequest } from '../../main/engine/generate/types.ts';

export interface IsolationRow {
  isolation: EngineIsolation;
  ttftMs: number;
  decodeTokPerSec: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One answer through `host`, timed on the host's side. */
async function timedAnswer(host: EngineHost, request: GenerationRequest): Promise<{ ttftMs: number; decodeTokPerSec: number }> {
  const t0 = performance.now();
  let first = 0;
  let last = 0;
  let tokens = 0;
  for await (const ev of host.generate(request)) {
    if (ev.type !== 'token') continue;
    last = performance.now();
    if (tokens++ === 0) first = last;
  }
  return { ttftMs: first - t0, decodeTokPerSec: ((tokens - 1) * 1000) / (last - first) };
}

/**
 * Loads `model` in a thread-isolated and a process-isolated host and times `rounds` answers of
 * `maxTokens` greedy tokens each after a `promptTokens`-token prompt (prefix reuse off: each round resets).
 */
export async function isolationCost(model: string, cacheDir: string, opts: { rounds?: number; maxTokens?: number; prompt?: string } = {}): Promise<IsolationRow[]> {
  const rounds = opts.rounds ?? 5;
  const request: GenerationRequest = {
    prompt: opts.prompt ?? 'the rope walk is long '.repeat(50),
    maxTokens: opts.maxTokens ?? 64,
    sampler: { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 },
    ignoreEos: true,
  };
  const hosts = (['thread', 'process'] as const).map((isolation) => ({ isolation, host: new EngineHost({ isolation }), ttft: [] as number[], tps: [] as number[] }));
  try {
    for (const h of hosts) {
      await h.host.load(model, { cacheDir });
      await timedAnswer(h.host, { ...request, maxTokens: 4 }); // warm-up: sessions and caches
    }
    for (let r = 0; r < rounds; r++) {
      for (const h of r % 2 === 0 ? hosts : [...hosts].reverse()) {
        await h.host.reset();
        const t = await timedAnswer(h.host, request);
        h.ttft.push(t.ttftMs);
        h.tps.push(t.decodeTokPerSec);
      }
    }
  } finally {
    for (const h of hosts) await h.host.dispose();
  }
  return hosts.map((h) => ({ isolation: h.isolation, ttftMs: median(h.ttft), decodeTokPerSec: median(h.tps) }));
}
