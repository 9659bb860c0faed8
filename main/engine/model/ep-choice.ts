/**
 * Which execution provider a load uses (`--ep auto|cpu|webgpu|cuda`, the window's setting,
 * `serve --ep`), decided before the model's bundle is resolved, since each provider has its own
 * graph (the bundle is built for the provider chosen here).
 *
 *   - cpu: always.
 *   - cuda: when a session opens on the CUDA provider (onnxruntime-node's CUDA libraries are
 *     installed and a CUDA device answers), else CPU with the reason.
 *   - webgpu: when a session opens on the WebGPU provider (Dawn finds an adapter: Vulkan,
 *     Direct3D 12 or Metal), else CPU with the reason. A software adapter (Mesa's lavapipe) is
 *     used when asked for by name: that is how the WebGPU tests run without a GPU.
 *   - auto (the default): CUDA when it opens; else WebGPU when a GPU adapter is found; else CPU.
 *     A software adapter does not count as a GPU for auto: ONNX Runtime's CPU provider is faster
 *     than a software rasterizer. Every step down says why, in one line (`note`).
 *
 * Probing opens a session on a two-node model built here, once per process per provider.
 * Adapters are named from the system's Vulkan devices (native/ addon `vulkanDevices`; on Linux
 * Dawn finds its adapters through the same Vulkan loader); ONNX Runtime 1.30 names none itself,
 * so on Windows and macOS, or without the addon, the adapter's name is not known (null).
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import * as ort from 'onnxruntime-node';
import { InvalidOptionError, firstLine } from '../errors.ts';
import { EXECUTION_PROVIDER_CHOICES, type ExecutionProvider, type ExecutionProviderChoice } from './backend.ts';
import { loadNativeAddon } from './native-addon.ts';
import { DataType, OnnxGraphBuilder } from './onnx-builder.ts';

/** A Vulkan device (VkPhysicalDeviceType, shortened). */
export interface GpuAdapter {
  name: string;
  type: 'discrete' | 'integrated' | 'virtual' | 'cpu' | 'other';
}

/** What the choice asks of the machine; injected in tests. */
export interface ProviderProbe {
  /** null when a session opens on `ep`, else why not (one line). */
  opens(ep: 'cuda' | 'webgpu'): Promise<string | null>;
  /** The machine's Vulkan devices, or null when they cannot be listed (no loader, no addon, not Linux). */
  adapters(): GpuAdapter[] | null;
  /** The CUDA device's name (nvidia-smi), or null. */
  cudaDeviceName(): string | null;
}

/** The provider a load will use, why it is not the one asked for (one line, or null), and the device's name where known. */
export interface ProviderChoice {
  ep: ExecutionProvider;
  note: string | null;
  adapter: string | null;
}

/** @throws InvalidOptionError quoting `v` unless it is auto, cpu, webgpu or cuda. */
export function parseExecutionProvider(v: unknown): ExecutionProviderChoice {
  if (typeof v === 'string' && (EXECUTION_PROVIDER_CHOICES as readonly string[]).includes(v)) return v as ExecutionProviderChoice;
  throw new InvalidOptionError('execution provider', `expected ${EXECUTION_PROVIDER_CHOICES.join(', ')}, got ${JSON.stringify(v)}`);
}

/** Dawn's order for a high-performance adapter: discrete, integrated, virtual, then the rest. */
const ADAPTER_ORDER: GpuAdapter['type'][] = ['discrete', 'integrated', 'virtual', 'other', 'cpu'];

/** The adapter WebGPU will most likely use: the first in Dawn's order, or null. */
export function likelyAdapter(adapters: readonly GpuAdapter[] | null): GpuAdapter | null {
  if (!adapters?.length) return null;
  return [...adapters].sort((a, b) => ADAPTER_ORDER.indexOf(a.type) - ADAPTER_ORDER.indexOf(b.type))[0];
}

/**
 * Decides the provider (file comment). Never throws for a provider that is missing: the answer
 * is then CPU with the reason in `note`.
 */
export async function chooseExecutionProvider(want: ExecutionProviderChoice, probe: ProviderProbe = systemProbe): Promise<ProviderChoice> {
  if (want === 'cpu') return { ep: 'cpu', note: null, adapter: null };
  if (want === 'cuda' || want === 'auto') {
    const why = await probe.opens('cuda');
    if (why === null) return { ep: 'cuda', note: null, adapter: probe.cudaDeviceName() };
    if (want === 'cuda') return { ep: 'cpu', note: `CUDA execution provider could not be loaded (${why}); using CPU`, adapter: null };
    const noCuda = `auto: no CUDA (${why})`;
    const adapters = probe.adapters();
    const best = likelyAdapter(adapters);
    if (adapters !== null && (best === null || best.type === 'cpu')) {
      const none = best === null ? 'no Vulkan device' : `only ${best.name}, a software renderer`;
      return { ep: 'cpu', note: `${noCuda}, no GPU for WebGPU (${none}); using CPU`, adapter: null };
    }
    const webWhy = await probe.opens('webgpu');
    if (webWhy === null) return { ep: 'webgpu', note: `${noCuda}; using WebGPU`, adapter: best?.name ?? null };
    return { ep: 'cpu', note: `${noCuda}, no WebGPU (${webWhy}); using CPU`, adapter: null };
  }
  const why = await probe.opens('webgpu');
  if (why === null) return { ep: 'webgpu', note: null, adapter: likelyAdapter(probe.adapters())?.name ?? null };
  return { ep: 'cpu', note: `WebGPU execution provider could not be used (${why}); using CPU`, adapter: null };
}

/**
 * ONNX Runtime's error in one short line: its source location and failed check are cut
 * ("…webgpu_context.cc:136 … was false. Failed to get a WebGPU adapter: No supported adapters"
 * → "Failed to get a WebGPU adapter: No supported adapters").
 */
export function ortReason(e: unknown): string {
  const line = firstLine(e);
  const m = /^\S+\.(?:cc|cpp|h):\d+ .*? was false\. (.+)$/.exec(line);
  return (m ? m[1] : line).trim();
}

/**
 * Why the CUDA provider did not open, in the user's words: ONNX Runtime's known failures named
 * for what to do about them, anything else as `ortReason` gives it. The raw text
 * ("OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library") names a C
 * function, not the cause: onnxruntime-node ships without its CUDA libraries (its install script
 * fetches them; see docs/gpu.md).
 */
export function cudaReason(e: unknown): string {
  const raw = ortReason(e);
  if (/libcudart|libcublas|libcudnn|CUDA_PATH/i.test(raw)) return 'the CUDA runtime or cuDNN libraries are not found';
  if (/Failed to load (shared )?library|cannot open shared object|libonnxruntime_providers_(shared|cuda)/i.test(raw)) {
    return "onnxruntime-node's CUDA libraries are not installed";
  }
  if (/insufficient ?driver|driver version is insufficient/i.test(raw)) return 'the NVIDIA driver is older than the CUDA runtime needs';
  if (/no CUDA-capable device|cudaErrorNoDevice|CUDA failure 100/i.test(raw)) return 'no CUDA device found';
  return raw;
}

/**
 * Dawn's Vulkan backend wants XDG_RUNTIME_DIR; where it is unset (a service, a container), the
 * OS's temporary folder stands in. Set in the process environment before the first WebGPU session.
 */
export function ensureWebGpuEnvironment(env: NodeJS.ProcessEnv = process.env): void {
  if (!env.XDG_RUNTIME_DIR) env.XDG_RUNTIME_DIR = os.tmpdir();
}

/** y = x + x, float32 [1, 4]: a model every provider can take, to see whether it opens. */
let probeModel: Uint8Array | null = null;
function tinyModel(): Uint8Array {
  if (probeModel) return probeModel;
  const b = new OnnxGraphBuilder('probe.data');
  b.input('x', DataType.FLOAT, [1, 4]);
  b.output('y', DataType.FLOAT, [1, 4]);
  b.node('Add', ['x', 'x'], ['y']);
  return (probeModel = b.build('probe', { '': 17 }, 'Ropewalk execution provider probe').model);
}

const opened = new Map<'cuda' | 'webgpu', Promise<string | null>>();

async function opensHere(ep: 'cuda' | 'webgpu'): Promise<string | null> {
  if (ep === 'webgpu') ensureWebGpuEnvironment();
  try {
    const s = await ort.InferenceSession.create(tinyModel(), { executionProviders: [ep], logSeverityLevel: 3 });
    await s.release();
    return null;
  } catch (e) {
    return ep === 'cuda' ? cudaReason(e) : ortReason(e);
  }
}

/** This machine, probed once per process per provider. */
export const systemProbe: ProviderProbe = {
  opens(ep) {
    let p = opened.get(ep);
    if (!p) opened.set(ep, (p = opensHere(ep)));
    return p;
  },
  adapters() {
    if (process.platform !== 'linux') return null;
    const status = loadNativeAddon();
    if (!status.available || !status.addon.vulkanDevices) return null;
    try {
      return status.addon.vulkanDevices() as GpuAdapter[];
    } catch {
      return []; // no Vulkan loader: Dawn has no adapter to find either
    }
  },
  cudaDeviceName() {
    try {
      const out = execFileSync('nvidia-smi', ['--query-gpu=name', '--format=csv,noheader'], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] });
      return out.split('\n')[0].trim() || null;
    } catch {
      return null;
    }
  },
};
