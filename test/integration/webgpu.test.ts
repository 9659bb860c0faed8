/**
 * WebGPU really runs (issue 16): onnxruntime-node's bundled WebGPU execution provider on this
 * machine's adapter (here and in CI Mesa's lavapipe, a software Vulkan driver: `.ci/run` installs
 * it), through the terminal chat as a user runs it.
 *   - stories260K and its Q4_0 / Q8_0 GGUF: `--ep webgpu` gives the CPU provider's greedy tokens
 *     (a separate test each: a wrong token and a CPU-placed node are different failures);
 *   - `nodesOnCpu === 0` on WebGPU (every node on the GPU: needs the WebGPU graph of branch
 *     gpu-graph, no FusedMatMul; with the float32 CPU graph the 35 FusedMatMul stay on the CPU);
 *   - no adapter (the Vulkan loader pointed at no driver, VK_ICD_FILENAMES): `--ep auto` falls
 *     back to the CPU with its note; `--ep webgpu` says why and runs on the CPU;
 *   - a model the WebGPU kernels would refuse at load (as Q4_0 once was: GatherBlockQuantized) runs on the
 *     CPU after a note instead of failing.
 * They run on the native backend (the default), whose KV cache lives in WebGPU buffers.
 * Without any Vulkan adapter the WebGPU tests fail saying so (they are not skipped).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, test } from 'node:test';
import { describeRun, freshCacheDir, parseJsonRun, runChat, type ChatJson } from '../helpers/cli-run.ts';
import { placementLog } from '../helpers/ort-placement.ts';
import { GGUF_DIR } from '../helpers/paths.ts';

const PROMPT = 'Once upon a time';
const GREEDY = ['--temperature', '0', '--max-tokens', '40', '--json', PROMPT];
/** The Vulkan loader finds no driver: no WebGPU adapter, as on a machine without a GPU or driver. */
const NO_ADAPTER = { VK_ICD_FILENAMES: '/nonexistent/no-driver_icd.json', VK_DRIVER_FILES: undefined } as const;
const MODELS: { name: string; args: string[] }[] = [
  { name: 'stories260K (llama2.c, float32)', args: [] },
  { name: 'stories260K Q8_0 GGUF', args: ['--model', path.join(GGUF_DIR, 'stories260K-q8_0.gguf')] },
  { name: 'stories260K Q4_0 GGUF', args: ['--model', path.join(GGUF_DIR, 'stories260K-q4_0.gguf')] },
];

let cacheDir = '';
const cpu = new Map<string, ChatJson>();
before(async () => {
  cacheDir = await freshCacheDir();
  // The CPU provider's answers are the reference (imports the bundles into the cache once).
  for (const m of MODELS) cpu.set(m.name, parseJsonRun(await runChat(['--ep', 'cpu', ...m.args, ...GREEDY], cacheDir, 120_000)));
});

/** One `--ep webgpu` run, which must have run on WebGPU. */
async function onWebGpu(args: string[]): Promise<ChatJson> {
  const r = await runChat(['--ep', 'webgpu', ...args, ...GREEDY], cacheDir, 180_000);
  assert.doesNotMatch(r.stderr, /could not be used/, `no WebGPU adapter here: install Mesa's lavapipe (see .ci/run). ${describeRun(r)}`);
  const j = parseJsonRun(r);
  assert.equal(j.stats.executionProvider, 'webgpu', describeRun(r));
  // The native addon, its KV cache in WebGPU buffers (test/integration/native-webgpu.test.ts).
  assert.equal(j.stats.backend, 'native', describeRun(r));
  return j;
}

for (const m of MODELS) {
  test(`--ep webgpu on ${m.name}: the CPU provider's greedy tokens, 40 of 40`, async () => {
    const j = await onWebGpu(m.args);
    const ref = cpu.get(m.name)!;
    assert.equal(ref.stats.executionProvider, 'cpu');
    assert.deepEqual(j.promptTokens, ref.promptTokens);
    assert.deepEqual(j.tokens, ref.tokens, `WebGPU ${j.text}\nCPU    ${ref.text}`);
  });

  test(`--ep webgpu on ${m.name}: nodesOnCpu is 0 (every compute node on WebGPU; needs gpu-graph's WebGPU graph)`, async () => {
    const j = await onWebGpu(m.args);
    assert.equal(j.stats.nodesOnCpu, 0, `ONNX Runtime left ${j.stats.nodesOnCpu} compute nodes on the CPU`);
  });
}

test('a model WebGPU opens but cannot run (whatever the reason) never fails the load: on WebGPU, or on the CPU after a note saying why', async () => {
  const q4 = MODELS[2];
  const r = await runChat(['--ep', 'webgpu', ...q4.args, ...GREEDY], cacheDir, 180_000);
  const j = parseJsonRun(r);
  if (j.stats.executionProvider === 'cpu') assert.match(r.stderr, /^note: WebGPU cannot run this model \(.+\); using CPU$/m, describeRun(r));
  else assert.equal(j.stats.executionProvider, 'webgpu');
  assert.deepEqual(j.tokens, cpu.get(q4.name)!.tokens);
});

test("nodesOnCpu on WebGPU equals the CPU nodes of ONNX Runtime's own placement log (stories260K)", async () => {
  const j = await onWebGpu(MODELS[0].args);
  const bundle = readdirSync(cacheDir).find((d) => {
    try {
      // The WebGPU graph's bundle (the CPU graph's is in the same cache, from the CPU runs).
      const m = JSON.parse(readFileSync(path.join(cacheDir, d, 'manifest.json'), 'utf8')) as { source: { kind: string }; graphTarget?: { ep: string; dtype: string } };
      return m.source.kind === 'llama2c' && m.graphTarget?.ep === 'webgpu' && m.graphTarget.dtype === 'float32';
    } catch {
      return false;
    }
  });
  assert.ok(bundle, `no llama2.c WebGPU bundle in ${cacheDir}`);
  const log = placementLog(path.join(cacheDir, bundle, 'model.onnx'));
  assert.ok(log.webgpu > 0, 'the placement log was read (it lists the WebGPU nodes)');
  assert.equal(j.stats.nodesOnCpu, log.cpu);
});

test('the CPU provider reports every compute node on the CPU (nodesOnCpu > 0), measured at load', () => {
  for (const [name, j] of cpu) assert.ok(typeof j.stats.nodesOnCpu === 'number' && j.stats.nodesOnCpu > 0, `${name}: ${j.stats.nodesOnCpu}`);
});

test('--ep auto without an adapter (no Vulkan driver): CPU, one note saying why, the CPU greedy tokens', async () => {
  const r = await runChat(['--ep', 'auto', ...GREEDY], cacheDir, 120_000, NO_ADAPTER);
  const j = parseJsonRun(r);
  assert.equal(j.stats.executionProvider, 'cpu');
  const notes = r.stderr.split('\n').filter((l) => l.startsWith('note: '));
  assert.equal(notes.length, 1, describeRun(r));
  // No CUDA here either (onnxruntime-node's CUDA libraries are not installed), so both reasons show.
  assert.match(notes[0], /^note: auto: no CUDA \(.+\), no GPU for WebGPU \(no Vulkan device\); using CPU$/, describeRun(r));
  assert.deepEqual(j.tokens, cpu.get(MODELS[0].name)!.tokens);
});

test('--ep webgpu without an adapter: a clear note (ONNX Runtime found no adapter), then the answer on the CPU', async () => {
  const r = await runChat(['--ep', 'webgpu', ...GREEDY], cacheDir, 120_000, NO_ADAPTER);
  const j = parseJsonRun(r);
  assert.equal(j.stats.executionProvider, 'cpu');
  assert.match(r.stderr, /^note: WebGPU execution provider could not be used \(Failed to get a WebGPU adapter: No supported adapters\); using CPU$/m, describeRun(r));
  // No JavaScript stack frame (Dawn prints its own C++ frame of the failed vkCreateInstance).
  assert.doesNotMatch(r.stderr, /^\s+at .*\.[cm]?[jt]s:\d+/m, describeRun(r));
  assert.deepEqual(j.tokens, cpu.get(MODELS[0].name)!.tokens);
});
