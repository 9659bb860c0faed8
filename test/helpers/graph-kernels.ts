/**
 * Test helper: checks a built decoder graph (ModelProto bytes) against the kernels ONNX Runtime
 * 1.30 registers per execution provider (test/fixtures/ort-kernels-1.30.json, written from ONNX
 * Runtime's OperatorKernels.md and kernel registrations). Every node's element types are
 * inferred from the graph inputs and initializers forward through the nodes (the few rules the
 * decoder's ops need: Cast → `to`, Shape / NonZero → int64, comparisons → bool, TopK → values'
 * and int64, ConstantOfShape → its value's type (float32 by default), GatherBlockQuantized → its
 * scales' type, GroupQueryAttention → query / past types, else the first input's type), and into
 * subgraphs (If branches, Loop / Scan bodies), which see the enclosing graph's values and whose
 * outputs type their node's outputs, so no ONNX Runtime session is needed: a graph for an EP this
 * machine lacks (CUDA) is checked all the same, Mixture-of-Experts branches included.
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
  [DT.UINT8]: 'uint8', [DT.INT8]: 'int8', [DT.INT32]: 'int32', [DT.INT64]: 'int64', [DT.BOOL]: 'bool',
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
  /** The subgraph the node is in ('' for the main graph; else e.g. "n_If_12.then_branch", nested joined by "/"). */
  graph: string;
}

type GraphProto = onnxProto.onnx.IGraphProto;
type NodeProto = onnxProto.onnx.INodeProto;
const typeName = (t: number | null | undefined) => (t ? TYPE_NAMES[t] ?? `type${t}` : 'unknown');
/** Ops whose outputs are bool whatever their inputs. */
const BOOL_OUT = new Set(['Greater', 'GreaterOrEqual', 'Less', 'LessOrEqual', 'Equal', 'Not', 'And', 'Or', 'Xor', 'IsNaN', 'IsInf']);
/** Ops whose outputs are int64 whatever their inputs. */
const INT64_OUT = new Set(['Shape', 'Size', 'NonZero', 'ArgMax', 'ArgMin']);

/** Output element types of a node that holds no subgraph, from its inputs' types and attributes. */
function outputTypes(n: NodeProto, inputTypes: string[]): string[] {
  const attr = (k: string) => n.attribute?.find((a) => a.name === k);
  if (BOOL_OUT.has(n.opType!)) return ['bool'];
  if (INT64_OUT.has(n.opType!)) return ['int64'];
  switch (n.opType) {
    case 'Cast': return [typeName(Number(attr('to')!.i))];
    // ONNX: ConstantOfShape's `value` defaults to a float32 0.
    case 'ConstantOfShape': return [attr('value')?.t ? typeName(attr('value')!.t!.dataType) : 'float'];
    case 'Constant': return [typeName(attr('value')?.t?.dataType)];
    case 'TopK': return [inputTypes[0], 'int64'];
    case 'Where': return [inputTypes[1]];
    case 'GatherBlockQuantized': return [inputTypes[2]];
    case 'GroupQueryAttention': return [inputTypes[0], inputTypes[3], inputTypes[4]];
    default: return (n.output ?? []).map(() => inputTypes[0]);
  }
}

/**
 * Types of a control-flow node's subgraph inputs as its node inputs give them (ONNX: `Loop` body
 * (iteration_num int64, cond bool, carried… ↔ node inputs 2…); `Scan` body ↔ node inputs (scan
 * inputs lose a dimension, not their type); an `If` branch has none), where the subgraph does
 * not declare them.
 */
function subgraphInputTypes(n: NodeProto, inputTypes: string[], sub: GraphProto): string[] {
  return (sub.input ?? []).map((vi, j) => {
    const declared = vi.type?.tensorType?.elemType;
    if (declared) return typeName(declared);
    if (n.opType === 'Loop') return j === 0 ? 'int64' : j === 1 ? 'bool' : inputTypes[j] ?? 'unknown';
    return inputTypes[j] ?? 'unknown';
  });
}

/**
 * Walks graph `g` with the outer-scope types `scope`: appends its nodes (and, recursively, those
 * of every subgraph attribute: If branches, Loop / Scan bodies) to `nodes`, and a line to
 * `mismatches` for each output whose computed type differs from its declared one. Returns the
 * types of `g`'s values, outer scope included.
 */
function walkGraph(g: GraphProto, scope: Map<string, string>, where: string, inputs: string[], nodes: GraphNodeTypes[], mismatches: string[]): Map<string, string> {
  const values = new Map(scope);
  (g.input ?? []).forEach((vi, j) => values.set(vi.name!, inputs[j] ?? typeName(vi.type?.tensorType?.elemType)));
  for (const t of g.initializer ?? []) values.set(t.name!, typeName(t.dataType));
  for (const n of g.node ?? []) {
    const inputTypes = (n.input ?? []).map((x) => (x === '' ? '' : values.get(x) ?? 'unknown'));
    nodes.push({ opType: n.opType!, domain: n.domain || 'ai.onnx', name: n.name!, inputTypes, graph: where });
    let outs = outputTypes(n, inputTypes);
    for (const a of n.attribute ?? []) {
      if (!a.g) continue;
      const inner = `${where ? `${where}/` : ''}${n.name}.${a.name}`;
      const subValues = walkGraph(a.g, values, inner, subgraphInputTypes(n, inputTypes, a.g), nodes, mismatches);
      // A node's outputs are its subgraph's outputs (If: either branch's; Loop: all but cond; Scan: all).
      const subOuts = (a.g.output ?? []).map((o) => subValues.get(o.name!) ?? 'unknown');
      if (n.opType === 'If' || n.opType === 'Scan') outs = subOuts;
      if (n.opType === 'Loop') outs = subOuts.slice(1);
    }
    (n.output ?? []).forEach((o, i) => values.set(o, outs[i] ?? outs[0]));
  }
  for (const o of g.output ?? []) {
    const declared = typeName(o.type?.tensorType?.elemType);
    if (declared !== 'unknown' && values.get(o.name!) !== declared) mismatches.push(`output ${o.name}${where ? ` of ${where}` : ''}: declared ${declared}, computed ${values.get(o.name!)}`);
  }
  return values;
}

/**
 * The graph's nodes, those of its subgraphs too (If branches, Loop / Scan bodies, recursively),
 * with their inputs' element types; the main graph's values' types by name; and a line for each
 * graph or subgraph output whose computed type differs from its declared one.
 */
export function nodeTypes(model: Uint8Array): { nodes: GraphNodeTypes[]; values: Map<string, string>; mismatches: string[] } {
  const nodes: GraphNodeTypes[] = [];
  const mismatches: string[] = [];
  const values = walkGraph(onnx.ModelProto.decode(model).graph!, new Map(), '', [], nodes, mismatches);
  return { nodes, values, mismatches };
}

/**
 * The nodes of `model` that ONNX Runtime 1.30 has no `ep` kernel for, one line each
 * ("GroupQueryAttention (com.microsoft) n_GroupQueryAttention_12: float not in [bfloat16, float16]"),
 * plus graph outputs whose inferred type differs from the declared one. Empty when every node can run on `ep`.
 */
export function kernelViolations(model: Uint8Array, ep: ExecutionProvider, table = kernelTable()): string[] {
  const { nodes, mismatches } = nodeTypes(model);
  const out: string[] = [];
  for (const n of nodes) {
    const at = `${n.opType} (${n.domain}) ${n.name}${n.graph ? ` in ${n.graph}` : ''}`;
    const types = table[ep][n.domain]?.[n.opType];
    if (!types) {
      out.push(`${at}: no ${ep} kernel`);
      continue;
    }
    for (const t of n.inputTypes) {
      if (FLOAT_TYPES.has(t) && !types.includes(t)) out.push(`${at}: ${t} not in [${types.join(', ')}]`);
      if (t === 'unknown') out.push(`${at}: an input of unknown type`);
    }
  }
  return [...out, ...mismatches];
}

/** Every node of the model: the main graph's and, recursively, its subgraphs' (If branches, Loop / Scan bodies). */
export function graphNodes(model: Uint8Array): NodeProto[] {
  const out: NodeProto[] = [];
  const walk = (g: GraphProto) => {
    for (const n of g.node ?? []) {
      out.push(n);
      for (const a of n.attribute ?? []) if (a.g) walk(a.g);
    }
  };
  walk(onnx.ModelProto.decode(model).graph!);
  return out;
}

/** Count of nodes per op type (subgraphs' nodes included), for assertions on what a graph contains. */
export function opCounts(model: Uint8Array): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const n of nodeTypes(model).nodes) counts[n.opType] = (counts[n.opType] ?? 0) + 1;
  return counts;
}
