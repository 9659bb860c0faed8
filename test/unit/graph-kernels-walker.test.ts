/**
 * The kernel check's node walker (test/helpers/graph-kernels.ts) on hand-built ONNX graphs with
 * subgraphs: a Loop body whose inputs carry no declared type (typed from the Loop's inputs, as
 * ONNX maps them: iteration int64, cond bool, carried values), an If nested in it reading a value
 * of the outer graph, and the Loop's outputs typed by its body. No model weights, no session.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import onnxProto from 'onnx-proto';
import { graphNodes, kernelViolations, nodeTypes } from '../helpers/graph-kernels.ts';

const { onnx } = onnxProto;
const DT = onnx.TensorProto.DataType;
const GRAPH = onnx.AttributeProto.AttributeType.GRAPH;
const value = (name: string, elemType = 0) => onnx.ValueInfoProto.create({ name, type: { tensorType: elemType ? { elemType } : {} } });
const node = (opType: string, input: string[], output: string[], name: string, attribute: InstanceType<typeof onnx.AttributeProto>[] = []) =>
  onnx.NodeProto.create({ opType, input, output, name, attribute });
const graphAttr = (name: string, g: InstanceType<typeof onnx.GraphProto>) => onnx.AttributeProto.create({ name, type: GRAPH, g });

/**
 * x float16 [2] → Loop (M, cond, carried x) whose body runs Softmax on the carried value and an If
 * on its cond whose branches read the outer `scale` (float16) with Mul / Identity; y is the Loop's output.
 */
function loopModel(): Uint8Array {
  const thenBranch = onnx.GraphProto.create({ name: 'then', node: [node('Mul', ['v_in', 'scale'], ['t_out'], 'n_Mul_then')], output: [value('t_out', DT.FLOAT16)] });
  const elseBranch = onnx.GraphProto.create({ name: 'else', node: [node('Identity', ['v_in'], ['e_out'], 'n_Identity_else')], output: [value('e_out', DT.FLOAT16)] });
  const body = onnx.GraphProto.create({
    name: 'body',
    input: [value('iter'), value('cond_in'), value('v_in')],
    node: [
      node('If', ['cond_in'], ['v_if'], 'n_If_body', [graphAttr('then_branch', thenBranch), graphAttr('else_branch', elseBranch)]),
      node('Softmax', ['v_if'], ['v_out'], 'n_Softmax_body'),
      node('Identity', ['cond_in'], ['cond_out'], 'n_Identity_cond'),
    ],
    output: [value('cond_out', DT.BOOL), value('v_out', DT.FLOAT16)],
  });
  const graph = onnx.GraphProto.create({
    name: 'main',
    input: [value('x', DT.FLOAT16), value('M', DT.INT64), value('cond', DT.BOOL)],
    initializer: [onnx.TensorProto.create({ name: 'scale', dataType: DT.FLOAT16, dims: [], int32Data: [0x3c00] })],
    node: [node('Loop', ['M', 'cond', 'x'], ['y'], 'n_Loop_0', [graphAttr('body', body)])],
    output: [value('y', DT.FLOAT16)],
  });
  return onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 21 }], graph })).finish();
}

test('the walker types a Loop body from the Loop inputs, an If inside it from the outer graph, and the Loop outputs from the body', () => {
  const { nodes, values, mismatches } = nodeTypes(loopModel());
  const byName = new Map(nodes.map((n) => [n.name, n]));
  assert.deepEqual(byName.get('n_Mul_then')!.inputTypes, ['float16', 'float16']);
  assert.equal(byName.get('n_Mul_then')!.graph, 'n_Loop_0.body/n_If_body.then_branch');
  assert.deepEqual(byName.get('n_If_body')!.inputTypes, ['bool']);
  assert.deepEqual(byName.get('n_Softmax_body')!.inputTypes, ['float16']);
  assert.equal(values.get('y'), 'float16');
  assert.deepEqual(mismatches, []);
  assert.equal(graphNodes(loopModel()).length, 6);
});

test('a node without a kernel inside a subgraph is reported with the subgraph it is in: float16 Softmax and Mul on the CPU EP', () => {
  const v = kernelViolations(loopModel(), 'cpu');
  assert.ok(v.includes('Softmax (ai.onnx) n_Softmax_body in n_Loop_0.body: float16 not in [double, float]'), v.join('\n'));
  assert.ok(v.includes('Mul (ai.onnx) n_Mul_then in n_Loop_0.body/n_If_body.then_branch: float16 not in [double, float]'), v.join('\n'));
});
