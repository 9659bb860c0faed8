/**
 * Every node of every execution provider's decoder graph has a kernel in ONNX Runtime 1.30 for
 * that EP and its input types (test/fixtures/ort-kernels-1.30.json), checked statically, so a
 * CUDA graph that could not run is caught on a machine without CUDA. Graphs: stories260K
 * (llama2.c), its Q4_0 / Q5_1 / Q8_0 GGUF files, and synthetic Hugging Face checkpoints (Qwen3
 * QK-norm tied, Qwen2 q/k/v bias, Llama untied, Qwen3 `--quantize q4`, Gemma 2, Gemma 3 and Phi-3
 * `--quantize q4`, a Llama-shaped model with gpt-oss's dense pieces: sinks, biases, clamped SwiGLU; qwen3moe F32 and Q8_0
 * GGUF files, whose experts run in If branches, which the check walks into), each built for cpu, webgpu and cuda (the MoE
 * graphs on webgpu pinned to the one op ONNX Runtime's WebGPU provider has no kernel for, NonZero). Only shapes matter here:
 * weights are zeros.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import onnxProto from 'onnx-proto';
import { buildDecoderGraph, usesRotaryEmbedding } from '../../main/engine/model/decoder-graph.ts';
import { importGguf } from '../../main/engine/model/gguf/import-gguf.ts';
import { quantizeLinearWeights } from '../../main/engine/model/gguf/quantized-weights.ts';
import { CPU_TARGET, CUDA_FLOAT32_REFERENCE, EXECUTION_PROVIDERS, graphTarget, targetKey } from '../../main/engine/model/graph-target.ts';
import { expectedWeights, importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { importLlama2c } from '../../main/engine/model/import-llama2c.ts';
import { buildKvCopyGraph } from '../../main/engine/model/kv-copy-graph.ts';
import type { ModelConfig, WeightSources } from '../../main/engine/model/manifest.ts';
import { graphNodes, kernelViolations, nodeTypes, opCounts } from '../helpers/graph-kernels.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';
import { storiesTokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { writeSyntheticCheckpoint, type SyntheticSpec } from '../helpers/synthetic-hf.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-graph-kernels-'));
after(() => rmSync(root, { recursive: true, force: true }));

const { onnx } = onnxProto;
const models: { name: string; config: ModelConfig; weights: WeightSources }[] = [];
const hf: { name: string; spec: SyntheticSpec; quantize?: 4 }[] = [
  { name: 'hf qwen3 QK-norm tied', spec: { family: 'qwen3', tied: true } },
  { name: 'hf qwen2 q/k/v bias', spec: { family: 'qwen2' } },
  { name: 'hf llama untied', spec: { family: 'llama', tied: false } },
  { name: 'hf qwen3 --quantize q4', spec: { family: 'qwen3', tied: true }, quantize: 4 },
  // Gemma 2 (soft-caps, post norms, GELU-tanh), Gemma 3 (local RoPE: split RoPE rows), Phi-3 (fused, split outputs).
  { name: 'hf gemma2', spec: { family: 'gemma2', configOverrides: { sliding_window: 16 } } },
  { name: 'hf gemma3', spec: { family: 'gemma3_text', layers: 6, configOverrides: { sliding_window: 16 } } },
  { name: 'hf phi3 --quantize q4', spec: { family: 'phi3', configOverrides: { sliding_window: 16 } }, quantize: 4 },
];

before(async () => {
  const stories = await importLlama2c(STORIES_BIN);
  models.push({ name: 'stories260K', config: stories.manifest.config, weights: stories.weights });
  for (const q of ['q4_0', 'q5_1', 'q8_0']) {
    const m = await importGguf(path.join(GGUF_DIR, `stories260K-${q}.gguf`));
    models.push({ name: `stories260K ${q.toUpperCase()} GGUF`, config: m.manifest.config, weights: m.weights });
  }
  for (const c of hf) {
    const dir = path.join(root, c.name.replace(/\W+/g, '-'));
    await writeSyntheticCheckpoint(dir, { seed: 3, ...c.spec });
    const m = await importHuggingFace(dir);
    models.push({ name: c.name, config: m.manifest.config, weights: c.quantize ? quantizeLinearWeights(m.weights, c.quantize) : m.weights });
  }
});

/**
 * gpt-oss's dense pieces on a Llama-shaped model: attention sinks (head_sink), q/k/v/o biases, a
 * sliding layer and the clamped SwiGLU (Clip).
 */
const SINKS_CONFIG: ModelConfig = {
  architecture: 'llama', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, vocabSize: 512,
  rmsNormEps: 1e-5, tiedEmbeddings: false, attentionBias: true, outputBias: true, qkNorm: false, rope: { theta: 10000, rotaryDim: 16, layout: 'interleaved' },
  trainedContext: 256, slidingWindow: [16, 0], attentionSinks: true, clampedSwiglu: { alpha: 1.702, limit: 7 },
};
/**
 * Qwen3-MoE (moe-block.ts: the router's TopK / Softmax / ScatterElements, each expert in an If
 * branch with NonZero, Gather and ScatterND reduction add): 4 experts of which each token uses 2,
 * from GGUF files written as llama.cpp's converter writes them, F32 and Q8_0.
 */
const MOE_CONFIG: ModelConfig = {
  architecture: 'qwen3moe', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16,
  vocabSize: 512, rmsNormEps: Math.fround(1e-6), tiedEmbeddings: false, attentionBias: false, qkNorm: true,
  rope: { theta: 1_000_000, rotaryDim: 16, layout: 'half' }, trainedContext: 256,
  moe: { numExperts: 4, expertsPerToken: 2, expertIntermediateSize: 64, routing: 'softmax-topk', normalizeTopK: true, routerBias: false, expertBias: false, activation: 'silu' },
};
before(async () => {
  const tokenizer = await storiesTokenizerMetadata();
  for (const type of ['F32', 'Q8_0'] as const) {
    const file = path.join(root, `qwen3moe-${type}.gguf`);
    writeModelGguf(file, MOE_CONFIG, tokenizer, (_name, shape) => new Float32Array(shape.reduce((a, b) => a * b, 1)), type);
    const m = await importGguf(file);
    models.push({ name: `qwen3moe ${type} GGUF`, config: m.manifest.config, weights: m.weights });
  }
});

before(() => {
  const weights = new Map([...expectedWeights(SINKS_CONFIG)].map(([n, shape]) => [n, { shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) }]));
  models.push({ name: 'attention sinks, biases, sliding layer, clamped SwiGLU', config: SINKS_CONFIG, weights });
});

test('GroupQueryAttention takes the sinks as head_sink (input 11) in the graph float type of every EP (float16 on cuda, as its kernel reads T)', () => {
  const m = models.find((x) => x.name.startsWith('attention sinks'))!;
  for (const ep of EXECUTION_PROVIDERS) {
    const gqa = nodeTypes(buildDecoderGraph(m.config, m.weights, graphTarget(ep)).model).nodes.filter((n) => n.opType === 'GroupQueryAttention');
    assert.equal(gqa.length, 2);
    for (const n of gqa) {
      assert.equal(n.inputTypes.length, 12, ep);
      assert.deepEqual(n.inputTypes.slice(7, 11), ['', '', '', ''], ep);
      assert.equal(n.inputTypes[11], n.inputTypes[0], `${ep}: head_sink has the query's type`);
    }
  }
});

/**
 * The Mixture-of-Experts graphs on WebGPU are left out of the every-node check: ONNX Runtime 1.30's WebGPU
 * provider has no NonZero kernel (its placement log on lavapipe puts it on the CPU; see the kernel table's
 * "moe" source), so each expert's NonZero runs on the CPU with copies around it (the next test pins exactly that).
 */
const skipOn = (ep: string, m: { config: ModelConfig }) => ep === 'webgpu' && m.config.moe !== undefined;

for (const ep of EXECUTION_PROVIDERS) {
  test(`every node of the ${ep} graph has an ONNX Runtime 1.30 ${ep} kernel for its input types (all models${ep === 'webgpu' ? ' but the MoE ones' : ''})`, () => {
    assert.equal(models.length, 14);
    for (const m of models.filter((x) => !skipOn(ep, x))) {
      const built = buildDecoderGraph(m.config, m.weights, graphTarget(ep));
      assert.deepEqual(kernelViolations(built.model, ep), [], `${m.name} on ${ep}`);
    }
  });
}

test('the MoE graphs on WebGPU: only NonZero (each expert branch) lacks a kernel; TopK, ScatterElements, If, ScatterND, the zeros\' Expand and the experts\' matmuls have one', () => {
  for (const m of models.filter((x) => x.config.moe)) {
    const missing = new Set(kernelViolations(buildDecoderGraph(m.config, m.weights, graphTarget('webgpu')).model, 'webgpu').map((v) => v.split(' ')[0]));
    assert.deepEqual([...missing].sort(), ['NonZero'], m.name);
  }
});

test('the walker types values inside If branches from the enclosing graph: each expert branch reads the main graph\'s rows and its nodes are checked', () => {
  const m = models.find((x) => x.name === 'qwen3moe F32 GGUF')!;
  const { nodes, mismatches } = nodeTypes(buildDecoderGraph(m.config, m.weights, graphTarget('cuda')).model);
  const inBranches = nodes.filter((n) => n.graph.endsWith('.then_branch'));
  // 2 layers × 4 experts, each with its NonZero and ScatterND; no input of unknown type, no output typed against its declaration.
  assert.equal(inBranches.filter((n) => n.opType === 'ScatterND').length, 8);
  assert.equal(inBranches.filter((n) => n.opType === 'NonZero').length, 8);
  assert.ok(nodes.every((n) => !n.inputTypes.includes('unknown')), 'an input of unknown type');
  assert.deepEqual(mismatches, []);
  // The enclosing graph's types reach into the branches: the experts' ScatterND adds into the float32 sums of the
  // main graph (the cuda graph keeps its residual stream, and so the MoE block, in float32), its indices int64 from NonZero.
  const scatters = inBranches.filter((n) => n.opType === 'ScatterND');
  assert.deepEqual([...new Set(scatters.map((n) => n.inputTypes.join(',')))], ['float,int64,float']);
});

test('the check catches a graph that cannot run: the float32 CPU graph on CUDA (GroupQueryAttention) and on WebGPU (FusedMatMul, Round)', () => {
  const stories = models[0];
  const onCuda = kernelViolations(buildDecoderGraph(stories.config, stories.weights, CPU_TARGET).model, 'cuda');
  assert.ok(onCuda.some((v) => v.startsWith('GroupQueryAttention (com.microsoft)') && v.includes('float not in [bfloat16, float16]')), onCuda.join('\n'));
  const onWebgpu = kernelViolations(buildDecoderGraph(stories.config, stories.weights, CPU_TARGET).model, 'webgpu');
  assert.ok(onWebgpu.some((v) => v.startsWith('FusedMatMul (com.microsoft)') && v.includes('no webgpu kernel')), onWebgpu.join('\n'));
  const q51 = models.find((m) => m.name.includes('Q5_1'))!;
  const q51OnWebgpu = kernelViolations(buildDecoderGraph(q51.config, q51.weights, CPU_TARGET).model, 'webgpu');
  assert.ok(q51OnWebgpu.some((v) => v.startsWith('Round (ai.onnx)')), q51OnWebgpu.join('\n'));
});

test('the cuda graph: float16 attention, KV cache and float-weight matmuls, float32 elsewhere (norms, RoPE, residual stream, quantized matmuls, the classifier), with no llama.cpp emulation ops', () => {
  for (const m of models) {
    const built = buildDecoderGraph(m.config, m.weights, graphTarget('cuda'));
    const { values, nodes } = nodeTypes(built.model);
    const inputTypes = (op: string) => new Set(nodes.filter((n) => n.opType === op).flatMap((n) => n.inputTypes.filter((t) => t.startsWith('float'))));
    assert.deepEqual([...inputTypes('GroupQueryAttention')], ['float16'], m.name);
    assert.ok([...inputTypes('FusedMatMul')].every((t) => t === 'float16'), `${m.name}: FusedMatMul on ${[...inputTypes('FusedMatMul')]}`);
    // MatMul: the block offsets' term; MatMulNBits: on float32 activations, float32 scales.
    for (const op of ['SimplifiedLayerNormalization', 'Gemm', 'MatMul', 'MatMulNBits']) assert.ok([...inputTypes(op)].every((t) => t === 'float'), `${m.name}: ${op} on ${[...inputTypes(op)]}`);
    assert.equal(values.get('past_key_0'), 'float16', m.name);
    assert.equal(values.get('present_value_0'), 'float16', m.name);
    assert.equal(values.get('new_key_0'), 'float16', m.name);
    assert.equal(values.get('rope_cos_cache'), 'float', m.name);
    assert.equal(values.get('logits'), 'float', m.name);
    const ops = opCounts(built.model);
    for (const op of ['Round', 'Abs', 'Max']) assert.equal(ops[op], undefined, `${m.name}: ${op} ×${ops[op]} in the cuda graph`);
    // ReduceMax: only the MoE router's "did any token choose expert e" flags, one per layer.
    assert.equal(ops.ReduceMax, m.config.moe ? m.config.numLayers : undefined, `${m.name}: ReduceMax ×${ops.ReduceMax} in the cuda graph`);
  }
});

test('the float32 reference of the cuda graph is the cuda graph but for its float16 Casts (and Identity nodes: the logits leave a float32 graph as they are): MatMulNBits at accuracy level 0', () => {
  for (const m of models) {
    const built = buildDecoderGraph(m.config, m.weights, CUDA_FLOAT32_REFERENCE).model;
    const f16 = opCounts(buildDecoderGraph(m.config, m.weights, graphTarget('cuda')).model);
    const f32 = opCounts(built);
    for (const c of [f16, f32]) {
      delete c.Cast;
      delete c.Identity;
    }
    assert.deepEqual(f32, f16, m.name);
    assert.equal(nodeTypes(built).values.get('past_key_0'), 'float', m.name);
    const levels = onnx.ModelProto.decode(built).graph!.node!.filter((n) => n.opType === 'MatMulNBits').map((n) => Number(n.attribute!.find((a) => a.name === 'accuracy_level')!.i));
    assert.deepEqual([...new Set(levels)], levels.length ? [0] : [], m.name);
  }
});

test("the native addon's KV copy graph (Slice + Pad), float32 and float16, has a kernel for every node on cuda and webgpu", () => {
  for (const dtype of ['float32', 'float16'] as const) {
    for (const ep of ['cuda', 'webgpu'] as const) assert.deepEqual(kernelViolations(buildKvCopyGraph(dtype), ep), [], `${dtype} on ${ep}`);
  }
});

/** MatMul nodes of a graph, its subgraphs' too, but those adding quantized weights' block offsets (B `….offsets.T`; the CPU graph stacks those). */
function floatMatMuls(model: Uint8Array): number {
  return graphNodes(model).filter((n) => n.opType === 'MatMul' && !n.input![1].endsWith('.offsets.T')).length;
}

test('the webgpu graph is float32 with MatMul on transposed weights, no FusedMatMul; the cpu graph keeps FusedMatMul', () => {
  for (const m of models) {
    const webgpu = opCounts(buildDecoderGraph(m.config, m.weights, graphTarget('webgpu')).model);
    const cpuModel = buildDecoderGraph(m.config, m.weights, CPU_TARGET).model;
    const cpu = opCounts(cpuModel);
    assert.equal(webgpu.FusedMatMul, undefined, m.name);
    assert.equal(floatMatMuls(buildDecoderGraph(m.config, m.weights, graphTarget('webgpu')).model), (cpu.FusedMatMul ?? 0) + floatMatMuls(cpuModel), m.name);
    const { values } = nodeTypes(buildDecoderGraph(m.config, m.weights, graphTarget('webgpu')).model);
    assert.equal(values.get('past_key_0'), 'float', m.name);
  }
});

test('float16 KV under the float32 CPU graph (the KV cache setting): past/present/new KV and GroupQueryAttention in float16, four Casts a layer more (five with sinks), every other node as the float32 graph, each with a CPU kernel, over the same data file', () => {
  for (const m of models) {
    const kv16 = { ...CPU_TARGET, kvDtype: 'float16' as const };
    assert.equal(targetKey(kv16), targetKey(CPU_TARGET), 'one bundle holds both graphs');
    const builtKv16 = buildDecoderGraph(m.config, m.weights, kv16);
    const builtPlain = buildDecoderGraph(m.config, m.weights, CPU_TARGET);
    const layout = (b: typeof builtPlain) => [b.dataBytes, b.segments.map((s) => [s.name, s.offset, s.bytes])];
    assert.deepEqual(layout(builtKv16), layout(builtPlain), `${m.name}: the same external data, segment for segment`);
    const built = builtKv16.model;
    assert.deepEqual(kernelViolations(built, 'cpu'), [], m.name);
    const { nodes, values } = nodeTypes(built);
    for (const name of ['past_key_0', 'present_value_0', 'new_key_0', 'new_value_0']) assert.equal(values.get(name), 'float16', `${m.name}: ${name}`);
    assert.equal(values.get('logits'), 'float', m.name);
    for (const n of nodes.filter((x) => x.opType === 'GroupQueryAttention')) assert.deepEqual(n.inputTypes.slice(0, 5), Array(5).fill('float16'), m.name);
    const plain = opCounts(builtPlain.model);
    const counts = opCounts(built);
    const perLayer = 4 + (m.config.attentionSinks ? 1 : 0);
    assert.equal((counts.Cast ?? 0) - (plain.Cast ?? 0), perLayer * m.config.numLayers, `${m.name}: q, k, v (and the sinks) to float16 and the attention back, a layer`);
    assert.deepEqual({ ...counts, Cast: 0 }, { ...plain, Cast: 0 }, `${m.name}: the other nodes`);
    // Only the attention's values are float16: every node but GroupQueryAttention and the Casts reads float32 (or integers).
    const halfReaders = nodes.filter((n) => n.inputTypes.includes('float16') && n.opType !== 'GroupQueryAttention' && n.opType !== 'Cast');
    assert.deepEqual(halfReaders.map((n) => n.opType), [], m.name);
  }
});

test('q and k are rotated by RotaryEmbedding on the CPU (one node each a layer, new_key its output), where the rotary covers whole heads and one table serves every layer; else, and off the CPU, by the pair chain', () => {
  let fused = 0;
  for (const m of models) {
    for (const target of [CPU_TARGET, graphTarget('webgpu'), graphTarget('cuda')]) {
      const nodes = graphNodes(buildDecoderGraph(m.config, m.weights, target).model);
      const rotary = nodes.filter((n) => n.opType === 'RotaryEmbedding');
      const expected = target.ep === 'cpu' && !m.config.localRope && m.config.rope.rotaryDim === m.config.headDim;
      assert.equal(usesRotaryEmbedding(m.config, target), expected, `${m.name} on ${target.ep}`);
      assert.equal(rotary.length, expected ? 2 * m.config.numLayers : 0, `${m.name} on ${target.ep}`);
      if (!expected) continue;
      fused++;
      assert.equal(nodes.find((n) => n.output!.includes('new_key_0'))?.opType, 'RotaryEmbedding', m.name);
      const interleaved = Number(rotary[0].attribute!.find((a) => a.name === 'interleaved')!.i);
      assert.equal(interleaved, m.config.rope.layout === 'half' ? 0 : 1, `${m.name}: layout ${m.config.rope.layout}`);
    }
  }
  assert.ok(fused >= 4, `${fused} model/target pairs use RotaryEmbedding`);
});

test('the new KV rows leave as k and v themselves: each new_key/new_value is made by a projection or RoPE node (no Identity) and read by GroupQueryAttention', () => {
  for (const m of models) {
    for (const ep of EXECUTION_PROVIDERS) {
      const nodes = graphNodes(buildDecoderGraph(m.config, m.weights, graphTarget(ep)).model);
      for (let i = 0; i < m.config.numLayers; i++) {
        for (const name of [`new_key_${i}`, `new_value_${i}`]) {
          const producer = nodes.find((n) => n.output!.includes(name));
          assert.ok(producer && producer.opType !== 'Identity', `${m.name} ${ep}: ${name} made by ${producer?.opType}`);
          assert.ok(nodes.some((n) => n.opType === 'GroupQueryAttention' && n.input!.includes(name)), `${m.name} ${ep}: ${name} not read by attention`);
        }
      }
    }
  }
});
