/**
 * The execution-provider choice (main/engine/model/ep-choice.ts) on injected probes: `auto` takes
 * CUDA when it opens, else WebGPU on a GPU adapter, else CPU, and each step down says why in
 * one line; a software adapter (lavapipe's llvmpipe) is not a GPU for auto but is used when
 * WebGPU is asked for by name; `--ep webgpu`/`--ep cuda` without the provider run on the CPU
 * with a note. Also: ONNX Runtime's placement counted from a profile (placement.ts), ORT's
 * error lines shortened, and the `--ep` options of `npm run chat` and `serve`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseChatOptions, UsageError } from '../../main/cli/options.ts';
import { chooseExecutionProvider, cudaReason, ensureWebGpuEnvironment, likelyAdapter, ortReason, parseExecutionProvider, type GpuAdapter, type ProviderProbe } from '../../main/engine/model/ep-choice.ts';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { placementFromProfile } from '../../main/engine/model/placement.ts';
import { parseServeOptions, UsageError as ServeUsageError } from '../../main/serve/options.ts';

const NO_CUDA = 'OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library';
const NO_ADAPTER = 'Failed to get a WebGPU adapter: No supported adapters';
const LLVMPIPE: GpuAdapter = { name: 'llvmpipe (LLVM 15.0.6, 256 bits)', type: 'cpu' };
const RTX: GpuAdapter = { name: 'NVIDIA GeForce RTX 4090', type: 'discrete' };
const IGPU: GpuAdapter = { name: 'Intel(R) UHD Graphics 770', type: 'integrated' };

/** A machine: which providers open (null) or why not, and its Vulkan devices; records what was probed. */
function machine(opens: { cuda: string | null; webgpu: string | null }, adapters: GpuAdapter[] | null): ProviderProbe & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    opens: async (ep) => {
      asked.push(ep);
      return opens[ep];
    },
    adapters: () => adapters,
    cudaDeviceName: () => 'NVIDIA H100 80GB HBM3',
  };
}

test('cpu: CPU without probing anything', async () => {
  const m = machine({ cuda: null, webgpu: null }, [RTX]);
  assert.deepEqual(await chooseExecutionProvider('cpu', m), { ep: 'cpu', note: null, adapter: null });
  assert.deepEqual(m.asked, []);
});

test('auto: CUDA when its provider opens (no note), named by nvidia-smi; WebGPU is not probed', async () => {
  const m = machine({ cuda: null, webgpu: null }, [RTX]);
  assert.deepEqual(await chooseExecutionProvider('auto', m), { ep: 'cuda', note: null, adapter: 'NVIDIA H100 80GB HBM3' });
  assert.deepEqual(m.asked, ['cuda']);
});

test('auto: no CUDA, a GPU adapter → WebGPU on it, the note says why not CUDA', async () => {
  const m = machine({ cuda: NO_CUDA, webgpu: null }, [LLVMPIPE, IGPU, RTX]);
  assert.deepEqual(await chooseExecutionProvider('auto', m), { ep: 'webgpu', note: `auto: no CUDA (${NO_CUDA}); using WebGPU`, adapter: RTX.name });
});

test('auto: no CUDA and only a software renderer → CPU, the note names it; WebGPU is not opened', async () => {
  const m = machine({ cuda: NO_CUDA, webgpu: null }, [LLVMPIPE]);
  const c = await chooseExecutionProvider('auto', m);
  assert.deepEqual(c, { ep: 'cpu', note: `auto: no CUDA (${NO_CUDA}), no GPU for WebGPU (only ${LLVMPIPE.name}, a software renderer); using CPU`, adapter: null });
  assert.deepEqual(m.asked, ['cuda']);
});

test('auto: no CUDA and no Vulkan device at all → CPU with its note', async () => {
  const c = await chooseExecutionProvider('auto', machine({ cuda: NO_CUDA, webgpu: NO_ADAPTER }, []));
  assert.deepEqual(c, { ep: 'cpu', note: `auto: no CUDA (${NO_CUDA}), no GPU for WebGPU (no Vulkan device); using CPU`, adapter: null });
});

test('auto where devices cannot be listed (Windows, macOS): WebGPU if it opens, else CPU with its reason', async () => {
  assert.deepEqual(await chooseExecutionProvider('auto', machine({ cuda: NO_CUDA, webgpu: null }, null)), { ep: 'webgpu', note: `auto: no CUDA (${NO_CUDA}); using WebGPU`, adapter: null });
  assert.deepEqual(await chooseExecutionProvider('auto', machine({ cuda: NO_CUDA, webgpu: NO_ADAPTER }, null)), {
    ep: 'cpu',
    note: `auto: no CUDA (${NO_CUDA}), no WebGPU (${NO_ADAPTER}); using CPU`,
    adapter: null,
  });
});

test('webgpu by name: a software adapter is used (how the tests run here); none → CPU with a clear note', async () => {
  assert.deepEqual(await chooseExecutionProvider('webgpu', machine({ cuda: NO_CUDA, webgpu: null }, [LLVMPIPE])), { ep: 'webgpu', note: null, adapter: LLVMPIPE.name });
  assert.deepEqual(await chooseExecutionProvider('webgpu', machine({ cuda: NO_CUDA, webgpu: NO_ADAPTER }, [])), {
    ep: 'cpu',
    note: `WebGPU execution provider could not be used (${NO_ADAPTER}); using CPU`,
    adapter: null,
  });
});

test('cuda by name without CUDA: CPU, in the words --ep cuda always used', async () => {
  assert.deepEqual(await chooseExecutionProvider('cuda', machine({ cuda: NO_CUDA, webgpu: null }, [RTX])), { ep: 'cpu', note: `CUDA execution provider could not be loaded (${NO_CUDA}); using CPU`, adapter: null });
});

test("likelyAdapter: Dawn's high-performance order (discrete, integrated, virtual, other, cpu); none → null", () => {
  assert.equal(likelyAdapter([LLVMPIPE, IGPU]), IGPU);
  assert.equal(likelyAdapter([IGPU, RTX]), RTX);
  assert.equal(likelyAdapter([LLVMPIPE]), LLVMPIPE);
  assert.equal(likelyAdapter([]), null);
  assert.equal(likelyAdapter(null), null);
});

test("ortReason: ONNX Runtime's source location and failed check are cut, other lines kept", () => {
  const raw = '/onnxruntime_src/onnxruntime/core/providers/webgpu/webgpu_context.cc:136 onnxruntime::webgpu::WebGpuContext::Initialize(const onnxruntime::webgpu::WebGpuContextConfig&)::<lambda()> adapter_result.status == wgpu::RequestAdapterStatus::Success was false. Failed to get a WebGPU adapter: No supported adapters';
  assert.equal(ortReason(new Error(raw)), NO_ADAPTER);
  assert.equal(ortReason(new Error(`${NO_CUDA}\nmore`)), NO_CUDA);
});

test("cudaReason: ONNX Runtime's CUDA failures in one readable line (it quoted a C function)", () => {
  assert.equal(cudaReason(new Error(NO_CUDA)), "onnxruntime-node's CUDA libraries are not installed");
  assert.equal(cudaReason(new Error('libcublasLt.so.12: cannot open shared object file: No such file or directory')), 'the CUDA runtime or cuDNN libraries are not found');
  assert.equal(cudaReason(new Error('/x/cuda_call.cc:123 CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version')), 'the NVIDIA driver is older than the CUDA runtime needs');
  assert.equal(cudaReason(new Error('CUDA failure 100: no CUDA-capable device is detected')), 'no CUDA device found');
  assert.equal(cudaReason(new Error('something new\nand more')), 'something new', 'an unknown failure: its first line, as ortReason gives it');
});

test('ensureWebGpuEnvironment: XDG_RUNTIME_DIR set when unset, kept when set', () => {
  const unset: NodeJS.ProcessEnv = {};
  ensureWebGpuEnvironment(unset);
  assert.ok(unset.XDG_RUNTIME_DIR && unset.XDG_RUNTIME_DIR.length > 0);
  const set: NodeJS.ProcessEnv = { XDG_RUNTIME_DIR: '/run/user/1000' };
  ensureWebGpuEnvironment(set);
  assert.equal(set.XDG_RUNTIME_DIR, '/run/user/1000');
});

test('parseExecutionProvider: the four choices; anything else is an InvalidOptionError quoting it', () => {
  for (const ep of ['auto', 'cpu', 'webgpu', 'cuda']) assert.equal(parseExecutionProvider(ep), ep);
  for (const bad of ['gpu', 'CUDA', '', 3]) {
    assert.throws(() => parseExecutionProvider(bad), (e: unknown) => e instanceof InvalidOptionError && e.message.includes(JSON.stringify(bad)));
  }
});

test('placementFromProfile: distinct nodes by provider; CPU compute nodes exclude the copies between devices', () => {
  // Events in the shape ONNX Runtime 1.30 writes them (one node can have several events).
  const node = (name: string, provider: string, op: string, suffix = 'kernel_time') => ({ cat: 'Node', name: `${name}_${suffix}`, args: { provider, op_name: op } });
  const events = [
    { cat: 'Session', name: 'model_loading_uri', args: {} },
    node('mm0', 'CPUExecutionProvider', 'FusedMatMul', 'fence_before'),
    node('mm0', 'CPUExecutionProvider', 'FusedMatMul'),
    node('mm1', 'CPUExecutionProvider', 'FusedMatMul'),
    node('copy0', 'CPUExecutionProvider', 'MemcpyToHost'),
    node('gqa0', 'WebGpuExecutionProvider', 'GroupQueryAttention'),
    node('in0', 'WebGpuExecutionProvider', 'MemcpyFromHost'),
  ];
  assert.deepEqual(placementFromProfile(events), { nodesOnCpu: 2, byProvider: { CPUExecutionProvider: 3, WebGpuExecutionProvider: 2 } });
  assert.throws(() => placementFromProfile({ traceEvents: [] }), /not a list of events \(got object\)/);
});

test('npm run chat --ep: auto by default; cpu, webgpu, cuda; anything else is a usage error quoting it', () => {
  const epOf = (argv: string[]) => {
    const o = parseChatOptions([...argv, 'Once upon a time']);
    return o === 'help' ? undefined : o.ep;
  };
  assert.equal(epOf([]), 'auto');
  for (const ep of ['auto', 'cpu', 'webgpu', 'cuda']) assert.equal(epOf(['--ep', ep]), ep);
  assert.throws(() => epOf(['--ep', 'gpu']), (e: unknown) => e instanceof UsageError && e.message === '--ep must be auto, cpu, webgpu, cuda, got "gpu"');
});

test('serve --ep: null (the setting) by default; the four choices; anything else is a usage error quoting it', () => {
  const epOf = (argv: string[]) => {
    const o = parseServeOptions([...argv, '--data', process.cwd()]);
    return o === 'help' ? undefined : o.ep;
  };
  assert.equal(epOf([]), null);
  assert.equal(epOf(['--ep', 'webgpu']), 'webgpu');
  assert.equal(epOf(['--ep=auto']), 'auto');
  assert.throws(() => epOf(['--ep', 'vulkan']), (e: unknown) => e instanceof ServeUsageError && e.message === '--ep must be auto, cpu, webgpu, cuda, got "vulkan"');
});
