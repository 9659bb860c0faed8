/**
 * Test helper: greedy decoding through the real ONNX Runtime graph (OnnxRunner) beside the
 * independent float64 reference forward (reference-forward.ts), asserting at every step that the
 * logits agree to float32 rounding and the greedy token is the reference's; and the same
 * reference without its sliding window, to show the window mattered.
 */
import assert from 'node:assert/strict';
import type { ModelConfig, ModelWeights, WeightSources } from '../../main/engine/model/manifest.ts';
import type { BackendKind } from '../../main/engine/model/backend.ts';
import { argmax, maxAbsDiff, OnnxRunner } from './onnx-runner.ts';
import { ReferenceModel } from './reference-forward.ts';

export interface GreedyComparison {
  /** Worst max |onnx − reference| / max(1, max |reference|) over the steps. */
  worst: number;
  /** Largest |unwindowed − windowed| reference logit past the (smallest) window. */
  fullOff: number;
  /** Steps past the window where the unwindowed reference picks another token. */
  tokensDiffer: number;
  /** The greedy tokens. */
  tokens: number[];
}

/**
 * Prefills `ids` (two chunks), then `steps` greedy tokens on `backend`, asserting at each step
 * that the graph's logits equal the reference's to `tolerance` of their scale and its greedy
 * token is the reference's.
 * @param weights what the graph gets (the import's); `refWeights` what the reference gets (default
 *   the same; a Gemma checkpoint's raw norm weights, which the reference takes as 1 + w).
 * @param refConfig the config the reference runs (default `config`): a test's own, hand-written one.
 */
export async function greedyAgainstReference(opts: {
  config: ModelConfig; weights: WeightSources; refWeights?: ModelWeights; refConfig?: ModelConfig;
  ids: number[]; steps: number; maxContext: number; backend?: BackendKind; tolerance?: number;
  /** Bound the sliding-window layers' KV cache with this slack (OnnxRunner.create); `onStep` sees the cache after every run. */
  windowSlack?: number; onStep?: (kv: OnnxRunner['kv'], T: number, runner: OnnxRunner) => void;
}): Promise<GreedyComparison> {
  const { config, ids, steps, maxContext } = opts;
  const refConfig = opts.refConfig ?? config;
  const refWeights = opts.refWeights ?? (opts.weights as ModelWeights);
  const tolerance = opts.tolerance ?? 1e-5;
  const window = Math.min(...(refConfig.slidingWindow ?? [0]).filter((w) => w > 0), Infinity);
  const runner = await OnnxRunner.create(config, opts.weights, maxContext, opts.backend ?? 'js', 'cpu', opts.windowSlack);
  const onStep = opts.onStep ?? (() => {});
  const ref = new ReferenceModel(refConfig, refWeights, maxContext);
  const full = new ReferenceModel({ ...refConfig, slidingWindow: undefined, localRope: undefined }, refWeights, maxContext);
  try {
    const cut = Math.floor(ids.length / 2);
    await runner.forward(ids.slice(0, cut));
    onStep(runner.kv, cut, runner);
    ref.forward(ids.slice(0, cut));
    full.forward(ids.slice(0, cut));
    let onnx = await runner.forward(ids.slice(cut));
    onStep(runner.kv, ids.length - cut, runner);
    let expected = ref.forward(ids.slice(cut));
    let unwindowed = full.forward(ids.slice(cut));
    let worst = 0;
    let fullOff = 0;
    let tokensDiffer = 0;
    const tokens: number[] = [];
    for (let step = 0; step < steps; step++) {
      const { diff, scale } = maxAbsDiff(onnx, expected);
      worst = Math.max(worst, diff / Math.max(1, scale));
      assert.ok(diff <= tolerance * Math.max(1, scale), `step ${step}: max |onnx − ref| = ${diff}, scale ${scale}`);
      const next = argmax(expected);
      assert.equal(argmax(onnx), next, `step ${step} (position ${ids.length + step}): greedy token differs`);
      if (ids.length + step >= window) {
        fullOff = Math.max(fullOff, maxAbsDiff(unwindowed, expected).diff);
        if (argmax(unwindowed) !== next) tokensDiffer++;
      }
      tokens.push(next);
      onnx = await runner.forward([next]);
      onStep(runner.kv, 1, runner);
      expected = ref.forward([next]);
      unwindowed = full.forward([next]);
    }
    return { worst, fullOff, tokensDiffer, tokens };
  } finally {
    await runner.dispose();
  }
}
