/**
 * Test helper: which nodes of a bundle's decoder graph ONNX Runtime 1.30 really runs in one step,
 * from its own profiler (every executed node, subgraph nodes included), and the bytes of the
 * weights those nodes read (their initializer inputs, as stored in the external data file), so
 * a test can say how much of a Mixture-of-Experts model one decode step touches. The step runs
 * T tokens at position 0 (empty KV cache), the shapes of a decode step when T = 1.
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';
import * as io from '../../main/engine/model/io-names.ts';
import type { ModelConfig } from '../../main/engine/model/manifest.ts';

const { onnx } = onnxProto;
type Graph = onnxProto.onnx.IGraphProto;

/** One executed node: its name, op type, the graph it is in ('' for the main graph) and its inputs' shapes. */
export interface NodeRun {
  name: string;
  op: string;
  graph: string;
  inputShapes: number[][];
}

/**
 * Runs one step of T tokens (ids 10, 11, …) through `dir`'s model.onnx with profiling on (one
 * thread; the profile is written to `prefix`…json, in a folder of the caller's, and removed), and
 * returns the nodes the profiler saw run.
 */
export async function profiledStep(dir: string, config: ModelConfig, T: number, prefix: string): Promise<NodeRun[]> {
  const s = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), { enableProfiling: true, profileFilePrefix: prefix, intraOpNumThreads: 1 });
  const R2 = config.rope.rotaryDim / 2;
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from({ length: T }, (_, i) => BigInt(10 + i)), [1, T]),
    // The RoPE cache (graph contract: the whole cache, rows for positions 0 … T−1 at least).
    [io.ROPE_COS_CACHE]: new ort.Tensor('float32', new Float32Array(T * R2).fill(1), [T, R2]),
    [io.ROPE_SIN_CACHE]: new ort.Tensor('float32', new Float32Array(T * R2), [T, R2]),
    seqlens_k: new ort.Tensor('int32', Int32Array.from([T - 1]), [1]),
    total_seq_len: new ort.Tensor('int32', Int32Array.from([T]), []),
  };
  // A graph with sliding-window layers has their own lengths (io-names.ts): the same at position 0.
  if (s.inputNames.includes(io.SEQLENS_K_WINDOW)) {
    feeds[io.SEQLENS_K_WINDOW] = feeds.seqlens_k;
    feeds[io.TOTAL_SEQ_LEN_WINDOW] = feeds.total_seq_len;
  }
  for (const n of s.inputNames) if (n.startsWith('past_')) feeds[n] = new ort.Tensor('float32', new Float32Array(0), [1, config.numKvHeads, 0, config.headDim]);
  await s.run(feeds);
  s.endProfiling(); // writes `${prefix}_<date>.json` (onnxruntime-node returns no name)
  await s.release();
  const base = path.basename(prefix);
  const found = readdirSync(path.dirname(prefix)).filter((f) => f.startsWith(base) && f.endsWith('.json'));
  if (found.length !== 1) throw new Error(`expected one profile ${prefix}*.json, found ${found.length}`);
  const file = path.join(path.dirname(prefix), found[0]);
  const graphOf = nodeGraphs(onnx.ModelProto.decode(readFileSync(path.join(dir, 'model.onnx'))).graph!);
  const events = JSON.parse(readFileSync(file, 'utf8')) as { cat: string; name: string; args?: { op_name?: string; input_type_shape?: Record<string, number[]>[] } }[];
  rmSync(file, { force: true });
  return events
    .filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'))
    .map((e) => {
      const name = e.name.slice(0, -'_kernel_time'.length);
      const inputShapes = (e.args?.input_type_shape ?? []).map((t) => Object.values(t)[0] ?? []);
      return { name, op: e.args?.op_name ?? '', graph: graphOf.get(name)?.graph ?? '', inputShapes };
    });
}

/** Every node of the model (subgraphs included) → its graph's name and the bytes of its initializer inputs. */
function nodeGraphs(main: Graph): Map<string, { graph: string; bytes: number }> {
  const out = new Map<string, { graph: string; bytes: number }>();
  const visit = (g: Graph, name: string, outer: Map<string, number>) => {
    const sizes = new Map(outer);
    for (const t of g.initializer ?? []) sizes.set(t.name!, initializerBytes(t));
    for (const n of g.node ?? []) {
      out.set(n.name!, { graph: name, bytes: (n.input ?? []).reduce((a, i) => a + (sizes.get(i) ?? 0), 0) });
      for (const a of n.attribute ?? []) if (a.g) visit(a.g, a.g.name ?? '', sizes);
    }
  };
  visit(main, '', new Map());
  return out;
}

/** Bytes of an initializer: its external data's length, or its raw data's. */
function initializerBytes(t: onnxProto.onnx.ITensorProto): number {
  const ext = t.externalData?.find((e) => e.key === 'length');
  return ext ? Number(ext.value) : (t.rawData?.length ?? 0);
}

/**
 * The bytes of weights read by the nodes in `runs` (each node's initializer inputs; the
 * embedding's Gather left out: it reads T rows, not its whole table), split into MoE experts'
 * (nodes in an `If` branch named `layer{i}_expert{e}`) and the rest, beside the experts' total
 * (every expert branch's nodes, run or not).
 */
export function weightBytesRead(dir: string, runs: NodeRun[]): { experts: number; rest: number; allExperts: number } {
  const graphOf = nodeGraphs(onnx.ModelProto.decode(readFileSync(path.join(dir, 'model.onnx'))).graph!);
  const expert = (g: string) => /^layer\d+_expert\d+$/.test(g);
  let experts = 0;
  let rest = 0;
  for (const r of runs) {
    if (r.op === 'Gather' && r.graph === '') continue;
    const b = graphOf.get(r.name)?.bytes ?? 0;
    if (expert(r.graph)) experts += b;
    else rest += b;
  }
  let allExperts = 0;
  for (const v of graphOf.values()) if (expert(v.graph)) allExperts += v.bytes;
  return { experts, rest, allExperts };
}
