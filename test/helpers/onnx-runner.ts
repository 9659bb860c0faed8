/**
 * Test helper: builds the ONNX decoder graph of a model (config + canonical weights) into a
 * temporary bundle folder and runs token sequences through the real ONNX Runtime session with
 * the engine's RoPE and KV caches, on either decoder backend, so tests can compare logits with
 * the reference forward pass and between backends.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KvCache } from '../../main/engine/cache/kv-cache.ts';
import { windowGroup } from '../../main/engine/cache/kv-window.ts';
import { RopeCache } from '../../main/engine/cache/rope-cache.ts';
import { buildDecoderGraph, EXTERNAL_DATA_FILE } from '../../main/engine/model/decoder-graph.ts';
import { writeExternalData } from '../../main/engine/model/onnx-builder.ts';
import type { ModelConfig, WeightSources } from '../../main/engine/model/manifest.ts';
import type { BackendKind, DecoderBackend, ExecutionProvider } from '../../main/engine/model/backend.ts';
import { CPU_TARGET, graphTarget } from '../../main/engine/model/graph-target.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { DecoderSession } from '../../main/engine/model/js-session.ts';

export class OnnxRunner {
  readonly rope: RopeCache;
  readonly kv: KvCache;
  private constructor(
    readonly session: DecoderBackend,
    readonly config: ModelConfig,
    readonly dir: string,
    maxContext: number,
    windowSlack?: number,
  ) {
    this.rope = new RopeCache(config.rope, maxContext, config.localRope);
    const window = windowSlack === undefined ? null : windowGroup(config.slidingWindow, maxContext, windowSlack);
    this.kv = new KvCache({ numLayers: config.numLayers, numKvHeads: config.numKvHeads, headDim: config.headDim, maxContext, hostBuffers: session.kvOnHost, window });
  }

  /**
   * `backend` 'native' fails (NativeUnavailableError) rather than falling back. `ep` (default
   * 'cpu': the CPU graph, as before) builds that EP's float32 graph (`graphTarget(ep)`) and opens it there.
   * `windowSlack`: bound the sliding-window layers' KV cache with that slack (cache/kv-window.ts);
   * absent: every layer holds the whole context, as before.
   */
  static async create(config: ModelConfig, weights: WeightSources, maxContext = config.trainedContext, backend: BackendKind = 'js', ep: ExecutionProvider = 'cpu', windowSlack?: number): Promise<OnnxRunner> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-graph-'));
    const built = buildDecoderGraph(config, weights, ep === 'cpu' ? CPU_TARGET : graphTarget(ep, 'float32'));
    writeFileSync(path.join(dir, 'model.onnx'), built.model);
    await writeExternalData(path.join(dir, EXTERNAL_DATA_FILE), built);
    const modelPath = path.join(dir, 'model.onnx');
    const session = backend === 'native' ? await NativeDecoderSession.create(modelPath, config, ep) : await DecoderSession.create(modelPath, config, ep);
    return new OnnxRunner(session, config, dir, maxContext, windowSlack);
  }

  /** Runs `tokens` after what the KV cache holds; returns a copy of the last position's logits [V]. */
  async forward(tokens: number[]): Promise<Float32Array> {
    const P = this.kv.length;
    this.rope.ensure(P + tokens.length);
    this.kv.ensure(P + tokens.length);
    const logits = await this.session.run(tokens, this.rope.tables, this.kv);
    this.kv.commit(tokens.length);
    return logits.slice();
  }

  async dispose(): Promise<void> {
    await this.session.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Largest |a_i − b_i| and the largest |b_i|, for relative error messages. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): { diff: number; scale: number } {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return { diff, scale };
}

export function argmax(a: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}
