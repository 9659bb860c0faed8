/**
 * Test helper: checks a built decoder graph (ModelProto bytes) against the kernels ONNX Runtime
 * 1.30 registers per execution provider (test/fixtures/ort-kernels-1.30.json, written from ONNX
 * Runtime's OperatorKernels.md and kernel registrations). Every node's element types are
 * inferred from the graph inputs and initializers forward through the nodes (the few rules the
 * decoder's ops need: Cast → `to`, Shape → int64, GatherBlockQuantized → its scales' type,
 * GroupQueryAttention → query / past types, else the first input's type), so no ONNX Runtime
 * session is needed: a graph for an EP this machine lacks (CUDA) is checked all the same.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import type { ExecutionProvider } from '../../main/engine/model/backend.ts';
import { PROJECT_ROOT } from './paths.ts';

const { onnx } = onnxProto;
const DT = onnx.TensorProto.DataType;

/** ONNX element type → the names OperatorKernels.md uses. */
const TYPE_NAMES: Record<number, string> = {
  [DT.FLOAT]: 'float', [DT.FLOAT16]: 'float16', [DT.BFLOAT16]: 'bfloat16', [DT.DOUBLE]: 'double',
  [DT.UINT8]: 'uint8', [DT.INT32]: 'int32', [DT.INT64]: 'int64',
};
const FLOAT_TYPES = new Set(['float', 'float16', 'bfloat16', 'double']);

type KernelTable = Record<ExecutionProvider, Record<string, Record<string, string[]>>>;

/** The kernel table of the data file. */
export function kernelTable(): KernelTable {
  return JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'test', 'fixtures', 'ort-kernels-1.30.json'), 'utf8')).kernels;
}

export interface GraphNodeTypes {
  opType: string;
  /** 'ai.onnx' for the default domain. */
  domain: string;
  name: string;
  /** Element type name of each input ('' for an omitted optional input). */
  inputTypes: string[];
}

/** The graph's nodes with their inputs' element types, and the graph inputs' / outputs' types by name. */
export function nodeTypes(model: Uint8Array): { nodes: GraphNodeTypes[]; values: Map<string, string> } {
  const m = onnx.ModelProto.decode(model);
  const g = m.graph!;
  const values = new Map<string, string>();
  const name = (t: number) => TYPE_NAMES[t] ?? `type${t}`;
  for (const i of g.input ?? []) values.set(i.name!, name(i.type!.tensorType!.elemType!));
  for (const t of g.initializer ?? []) values.set(t.name!, name(t.dataType!));
  const nodes: GraphNodeTypes[] = [];
  for (const n of g.node ?? []) {
    const inputTypes = (n.input ?? []).map((x) => (x === '' ? '' : values.get(x) ?? 'unknown'));
    const attr = (k: string) => n.attribute?.find((a) => a.name === k);
    let outs: string[];
    switch (n.opType) {
      case 'Cast': outs = [name(Number(attr('to')!.i))]; break;
      case 'Shape': outs = ['int64']; break;
      case 'GatherBlockQuantized': outs = [inputTypes[2]]; break;
      case 'GroupQueryAttention': outs = [inputTypes[0], inputTypes[3], inputTypes[4]]; break;
      default: outs = (n.output ?? []).map(() => inputTypes[0]);
    }
    (n.output ?? []).forEach((o, i) => values.set(o, outs[i] ?? outs[0]));
    nodes.push({ opType: n.opType!, domain: n.domain || 'ai.onnx', name: n.name!, inputTypes });
  }
  for (const o of g.output ?? []) {
    const declared = name(o.type!.tensorType!.elemType!);
    if (values.get(o.name!) !== declared) values.set(`${o.name} (declared)`, declared);
  }
  return { nodes, values };
}

/**
 * The nodes of `model` that ONNX Runtime 1.30 has no `ep` kernel for, one line each
 * ("GroupQueryAttention (com.microsoft) n_GroupQueryAttention_12: float not in [bfloat16, float16]"),
 * plus graph outputs whose inferred type differs from the declared one. Empty when every node can run on `ep`.
 */
export function kernelViolations(model: Uint8Array, ep: ExecutionProvider, table = kernelTable()): string[] {
  const { nodes, values } = nodeTypes(model);
  const out: string[] = [];
  for (const n of nodes) {
    const types = table[ep][n.domain]?.[n.opType];
    if (!types) {
      out.push(`${n.opType} (${n.domain}) ${n.name}: no ${ep} kernel`);
      continue;
    }
    for (const t of n.inputTypes) {
      if (FLOAT_TYPES.has(t) && !types.includes(t)) out.push(`${n.opType} (${n.domain}) ${n.name}: ${t} not in [${types.join(', ')}]`);
      if (t === 'unknown') out.push(`${n.opType} (${n.domain}) ${n.name}: an input of unknown type`);
    }
  }
  for (const [k, v] of values) if (k.endsWith(' (declared)')) out.push(`output ${k}: declared ${v}, computed ${values.get(k.replace(' (declared)', ''))}`);
  return out;
}

/** Count of nodes per op type, for assertions on what a graph contains. */
export function opCounts(model: Uint8Array): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const n of nodeTypes(model).nodes) counts[n.opType] = (counts[n.opType] ?? 0) + 1;
  return counts;
}
