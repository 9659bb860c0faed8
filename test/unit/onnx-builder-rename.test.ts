/**
 * OnnxGraphBuilder.rename: a node's output takes a new name in its producer and every reader (so
 * a graph output can be a value the graph also uses, with no Identity node); a value no node
 * makes, or a name taken already, is a typed error quoting it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import onnxProto from 'onnx-proto';
import { ModelLoadError } from '../../main/engine/errors.ts';
import { DataType, OnnxGraphBuilder } from '../../main/engine/model/onnx-builder.ts';

test('rename: producer and readers take the new name; unknown or taken names throw ModelLoadError quoting them', () => {
  const g = new OnnxGraphBuilder('model.onnx.data');
  g.input('x', DataType.FLOAT, [2]);
  const a = g.op('Abs', ['x']);
  const b = g.op('Neg', [a]);
  assert.equal(g.rename(a, 'out_a'), 'out_a');
  g.output('out_a', DataType.FLOAT, [2]);
  g.node('Identity', [b], ['y']);
  g.output('y', DataType.FLOAT, [2]);
  const nodes = onnxProto.onnx.ModelProto.decode(g.build('t', { '': 18 }, 't').model).graph!.node!;
  assert.deepEqual(nodes.map((n) => [n.opType, n.input, n.output]), [['Abs', ['x'], ['out_a']], ['Neg', ['out_a'], [b]], ['Identity', [b], ['y']]]);
  assert.throws(() => g.rename('x', 'z'), (e: unknown) => e instanceof ModelLoadError && e.message.includes('"x"'));
  assert.throws(() => g.rename(b, 'y'), (e: unknown) => e instanceof ModelLoadError && e.message.includes('"y"'));
});
