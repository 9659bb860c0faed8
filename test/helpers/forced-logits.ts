/**
 * A teacher-forced run of a decoder backend, for comparing two graphs of one model run by run
 * (test/integration/gguf-matmulq8.test.ts, float-matmul.test.ts). A test helper.
 */
import type { DecoderBackend } from '../../main/engine/model/backend.ts';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';

/**
 * Logits [vocab] per run of a teacher-forced path: the prompt runs (default one 5-token prompt:
 * a prefill, in MatMulQ8 a 4-row tile and a row alone; several: prefill chunks at growing
 * positions), then `steps` single tokens (decode steps), so two graphs see the same inputs.
 * Tokens are below 512 (stories260K's vocabulary).
 */
export async function forcedLogits(backend: DecoderBackend, c: ModelConfig, steps: number, prompts: number[][] = [[1, 403, 407, 93, 290]]): Promise<Float32Array[]> {
  const maxContext = Math.max(64, prompts.reduce((a, p) => a + p.length, 0) + steps + 1);
  const kv = new KvCache({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim, maxContext, hostBuffers: backend.kvOnHost });
  const rope = new RopeCache(c.rope, maxContext);
  const out: Float32Array[] = [];
  const feeds = [...prompts, ...Array.from({ length: steps }, (_, s) => [(37 * s + 11) % c.vocabSize])];
  for (const feed of feeds) {
    rope.ensure(kv.length + feed.length);
    kv.ensure(kv.length + feed.length);
    out.push((await backend.run(feed, rope.tables, kv)).slice());
    kv.commit(feed.length);
  }
  return out;
}
