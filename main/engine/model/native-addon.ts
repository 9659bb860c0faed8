/**
 * Finds and loads the native/ addon (a Node-API module over ONNX Runtime's C API), and types
 * its surface by hand (native/src/addon.cc is the other half of this contract).
 *
 * The addon is optional: `loadNativeAddon()` returns either the loaded module or the reason it
 * is unavailable (not built, cannot be loaded, runtime refused), in one line, and never throws.
 * It makes the addon dlopen the libonnxruntime of onnxruntime-node, the library that package's
 * own binding loads, so one process holds one ONNX Runtime whichever backend runs.
 */
import { firstLine, NativeUnavailableError } from '../errors.ts';
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { unpackedPath } from '../../common/asar-path.ts';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Addon file, relative to the project root (native/build.mjs writes it there). */
export const NATIVE_ADDON_FILE = path.join('native', 'build', 'Release', 'ropewalk_native.node');
/**
 * Addon file in a packaged app, relative to its resources folder: electron-builder.yml's
 * extraResources copies it there (a shared library cannot be loaded from inside app.asar).
 */
export const PACKAGED_ADDON_FILE = path.join('native', 'ropewalk_native.node');

/**
 * Where the addon may be, in order: `ROPEWALK_NATIVE_ADDON`, the packaged app's resources folder
 * (`process.resourcesPath`, or `ROPEWALK_RESOURCES_PATH` that the app sets for its worker threads),
 * then `native/build/Release/` in the nearest ancestor of `from` (a checkout, or a bundle in it).
 */
export function addonCandidates(env: NodeJS.ProcessEnv, resourcesPath: string | undefined, from: string): string[] {
  const out: string[] = [];
  if (env.ROPEWALK_NATIVE_ADDON) out.push(env.ROPEWALK_NATIVE_ADDON);
  const resources = resourcesPath ?? env.ROPEWALK_RESOURCES_PATH;
  if (resources) out.push(path.join(resources, PACKAGED_ADDON_FILE));
  const found = findUpwards(NATIVE_ADDON_FILE, from);
  if (found) out.push(found);
  return out;
}

/** `…/app.asar/x` → `…/app.asar.unpacked/x` (main/common/asar-path.ts). */
export { unpackedPath } from '../../common/asar-path.ts';

/** Options of `new NativeDecoder`; sizes are positive integers. */
export interface NativeDecoderOptions {
  executionProvider: 'cpu' | 'webgpu' | 'cuda';
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  /** R/2 (or R with a local RoPE): columns of rope_cos_cache / rope_sin_cache. */
  rotaryHalf: number;
  /** float32 [vocabSize], bound once as the logits output; every run overwrites it. */
  logits: Float32Array;
  /** The graph's past/present element type (default float32); saved copies are float32 either way. */
  kvDtype?: 'float32' | 'float16';
  /**
   * The KV copy graph (kv-copy-graph.ts, `buildKvCopyGraph`), opened on the same provider: how
   * the addon moves KV rows in device memory. Needed for 'webgpu' and 'cuda'.
   */
  copyModel?: Uint8Array;
  /** Turns ONNX Runtime's profiler on, writing `<prefix>_<time>.json`, until `endProfiling()`. */
  profilePrefix?: string;
  /** ONNX Runtime's intra-op threads, 0–1024 (0 or absent: its default, the physical cores). */
  intraOpThreads?: number;
  /**
   * The model's external-data file (named as its `location`s name it). On the CPU provider on
   * Linux it is read whole into memory that may be 2 MiB pages and handed to ONNX Runtime as that
   * file's contents (`weightsInMemory` says how many bytes); elsewhere, or absent, ONNX Runtime maps
   * the file itself. A file that cannot be read fails the load (ORT_LOAD, naming the path).
   */
  weightsFile?: string;
  /**
   * [numLayers]: 1 for a sliding-window layer, whose KV blocks have a capacity of their own and
   * hold the last rows only (cache/kv-window.ts); ignored for a graph without the window lengths.
   */
  windowLayers?: Uint8Array;
}

/** What a native decoder has done since it opened (native/src/decoder.h DecoderStats). */
export interface NativeDecoderStats {
  /** Graph runs: prefill chunks and decode steps. */
  runs: number;
  /** Times the KV tensors were bound as past/present: once per growth (and restore). */
  kvBinds: number;
  /** KV tensors allocated (2 × layers per growth). */
  kvAllocs: number;
  /** Runs of the device copy graph (growths, saves, restores, shifts); 0 on the CPU. */
  kvCopies: number;
  /** Times the RoPE cache was bound (`setRope`): once per RoPE growth. */
  ropeBinds: number;
  /** Positions the bound RoPE cache holds (0 before the first `setRope`). */
  ropeRows: number;
}

/**
 * One ONNX Runtime session with its KV cache in addon-owned memory (host, or the CUDA / WebGPU
 * provider's device memory),
 * bound once per growth with IoBinding. Errors are Errors with `code` 'ORT_LOAD' | 'ORT_RUN' |
 * 'ORT_ARG' and a one-line message naming the ONNX Runtime call.
 */
export interface NativeDecoder {
  readonly executionProvider: 'cpu' | 'webgpu' | 'cuda';
  /** Why the requested provider is not in use (the failing C API call and ORT's words), or null. */
  readonly fallbackReason: string | null;
  /** Positions the addon's KV blocks hold (0 before the first resize). */
  readonly capacity: number;
  /** Bytes of `weightsFile` read into memory (0: ONNX Runtime maps the weights file, or there is none). */
  readonly weightsInMemory?: number;
  /** ONNX Runtime's name of the memory the KV tensors live in: 'Cpu', 'Cuda' or 'WebGPU_Buf'. */
  readonly kvMemory: string;
  /** Counters (a fresh object per read). */
  readonly stats: NativeDecoderStats;
  /** Reallocates the (global layers') KV blocks at `capacity` positions, copying rows [0, keep) of every head. */
  resize(capacity: number, keep: number): void;
  /** Whether the graph has the sliding-window lengths and `windowLayers` marks some layer (absent in an older addon). */
  readonly windowInputs?: boolean;
  /** Positions the sliding-window layers' blocks hold (0 before the first resizeWindow). */
  readonly windowCapacity?: number;
  /** The sliding-window layers' blocks: rows [from, from + rows) move to [0, rows), at `capacity` positions. */
  resizeWindow?(capacity: number, from: number, rows: number): void;
  /**
   * Binds the whole RoPE cache, cos/sin float32 [rows, rotaryHalf] (copied into the addon's own
   * tensors, on a device into the provider's memory when bound): once per RoPE growth.
   * Synchronous. Errors: 'ORT_ARG' for sizes that do not match.
   */
  setRope(cos: Float32Array, sin: Float32Array, rows: number): void;
  /**
   * One prefill chunk or decode step, run on the libuv thread pool: T = tokenIds.length tokens
   * at positions past … past+T−1 (past + T within the KV capacity and the bound RoPE cache's
   * rows). Resolves when the logits array given at construction holds the last position's
   * scores. One run at a time.
   */
  run(tokenIds: Int32Array, past: number, windowPast?: number): Promise<void>;
  /**
   * Context shift of the addon's KV blocks: of `length` positions, drops [keep, keep+drop), moves
   * the later rows down by `drop` and rotates their keys' first `rotaryDim` dims by cos/sin
   * float32 [rotaryDim/2] (pairs (2i, 2i+1) when `interleaved`, else (i, i+R/2)). Synchronous.
   */
  shift(keep: number, drop: number, length: number, cos: Float32Array, sin: Float32Array, interleaved: boolean, rotaryDim: number, layerTables?: Uint8Array,
    windowKeep?: number, windowDrop?: number, windowLength?: number): void;
  /**
   * Copies rows [0, length) of every layer's KV (a sliding-window layer's [0, windowLength)) to
   * `dst` float32, per layer [2, Hkv, rows, headDim].
   */
  copyOut(length: number, dst: Float32Array, windowLength?: number): void;
  /** The reverse of copyOut, into rows [0, length) (capacity ≥ length). */
  copyIn(length: number, src: Float32Array, windowLength?: number): void;
  /** Stops the profiler (`profilePrefix` given) and returns the file it wrote. */
  endProfiling(): string;
  /** Releases the session and the KV memory; later calls throw. */
  dispose(): void;
}

/** The addon's exports. */
export interface NativeAddon {
  /** dlopens ONNX Runtime at `libraryPath` (once per process); returns its version. */
  loadRuntime(libraryPath: string): string;
  NativeDecoder: new (modelPath: string, options: NativeDecoderOptions) => NativeDecoder;
  /**
   * This machine's Vulkan devices (name, VkPhysicalDeviceType shortened); [] when the loader
   * finds no driver. Absent from an addon built before it. @throws Error without a Vulkan loader.
   */
  vulkanDevices?(): { name: string; type: string }[];
  /**
   * The instruction set the addon's `ropewalk.MatMulQ8` kernel runs on here ('amx', 'avx512vnni', 'avx2'
   * or 'scalar'; native/src/gguf_matmul.h). Absent from an addon built before it: such an addon's
   * sessions cannot load graphs built for `NATIVE_CPU_TARGET`.
   */
  matMulQ8Kernel?: string;
  /**
   * ropewalk.MatMulQ8's kernel alone (one ISA variant, one thread, no ONNX Runtime): y [m·n] for
   * x [m·k] and a weight's MatMulNBits blocks and scales (native/src/gguf_matmul_addon.cc).
   * @throws Error (code 'ORT_ARG') for sizes that disagree or an ISA this CPU lacks.
   */
  matMulQ8?(isa: 'scalar' | 'avx2' | 'avx512vnni' | 'amx', x: Float32Array, m: number, blocks: Uint8Array, scales: Float32Array | Uint16Array, n: number, k: number, bits: 4 | 8): Float32Array;
  /**
   * ropewalk.MatMulQ8K's kernel alone, as `matMulQ8`: y [m·n] for x [m·k] (k a multiple of 256) and
   * a weight's GGUF super-blocks as stored, [n · k/256 · bytes], of ggml type 12 (Q4_K), 13 (Q5_K) or 14 (Q6_K).
   * 'panel' is its prefill path on MatMulQ8's kernel (native/src/gguf_matmul.h Q8KRowsPanel).
   * chunk: output rows a call (default n); rowGroups 4: the blocks in the op's grouped layout
   * (quantized-matmul.ts groupedSuperBlocks), 0 (default) as stored.
   * Absent from an addon built before it (whose sessions lack the op: `nativeKernelsAvailable`).
   * @throws Error (code 'ORT_ARG') for sizes that disagree, another type or an ISA this CPU lacks.
   */
  matMulQ8K?(isa: 'scalar' | 'avx2' | 'avx512vnni' | 'panel', x: Float32Array, m: number, blocks: Uint8Array, n: number, k: number, ggmlType: number, chunk?: number, rowGroups?: 0 | 4): Float32Array;
  /** The instruction set `ropewalk.MatMulQ8K` runs on here ('avx512vnni', 'avx2' or 'scalar'). */
  matMulQ8KKernel?: string;
  /**
   * ropewalk.MatMulF32's decode kernel alone (one ISA variant, one thread): y [n] = W · x for x [k]
   * and W [n, k] float32 (native/src/float_matmul.h). Absent from an addon built before it.
   * @throws Error (code 'ORT_ARG') for sizes that disagree or an ISA this CPU lacks.
   */
  matMulF32?(isa: 'scalar' | 'avx2' | 'avx512', x: Float32Array, w: Float32Array, n: number, k: number): Float32Array;
  /** The instruction set `ropewalk.MatMulF32` runs on here ('avx512', 'avx2' or 'scalar'). */
  matMulF32Kernel?: string;
  /**
   * ropewalk.DecodeAttention's kernel for one KV head alone (one ISA variant, one thread): q float32
   * [g, hd] (the head's query heads), k and v [L, hd] (its held rows: both Float32Array, or both
   * Uint16Array of float16 bits, the float16 KV cache's kernel) → out float32 [g, hd],
   * out_j = Σ_t softmax_t(scale · q_j·k_t) v_t (native/src/attention.h). Absent from an addon built before it.
   * @throws Error (code 'ORT_ARG') for sizes that disagree, k and v of other types, or an ISA this CPU lacks.
   */
  attentionHead?(isa: 'scalar' | 'avx2' | 'avx512', q: Float32Array, k: Float32Array | Uint16Array, v: Float32Array | Uint16Array, g: number, L: number, hd: number, scale: number): Float32Array;
  /**
   * ropewalk.DecodeAttention's prefill kernel for one KV head alone (one ISA variant, one thread):
   * T new tokens at positions P … P+T−1, q [T, g, hd] (token-major, the head's g query heads), k
   * and v [P+T, hd] (its rows, the new ones included), all Float32Array or all Uint16Array (float16
   * bits); hd a multiple of 16 → out [T, g, hd] of q's type, row (t, j) = Σ_{s ≤ P+t}
   * softmax_s(scale · q_tj·k_s) v_s (native/src/attention.h PrefillHeadFn); its tiles of 16 rows
   * split over `step` calls (default 1) as the op's tasks split them. Absent from an addon built before it.
   * @throws Error (code 'ORT_ARG') for sizes that disagree, arrays of other types, or an ISA this CPU lacks.
   */
  attentionPrefill?<A extends Float32Array | Uint16Array>(isa: 'scalar' | 'avx2' | 'avx512', q: A, k: A, v: A, g: number, P: number, T: number, hd: number, scale: number, step?: number): A;
  /** The instruction set `ropewalk.DecodeAttention` runs on here ('avx512', 'avx2' or 'scalar'). */
  attentionKernel?: string;
  /**
   * `ropewalk.QkNormRope`'s work on one head row (native/src/qk_norm_rope.h): x float32 [hd] (hd
   * even) → x / √(mean(x²) + eps) · w, then RoPE by the row's cos, sin [hd/2] (pairs (i, i + hd/2),
   * or (2i, 2i + 1) when `interleaved`). Absent from an addon built before it.
   * @throws Error (code 'ORT_ARG') for sizes that disagree, arrays of other types, or eps ≤ 0.
   */
  qkNormRopeRow?(x: Float32Array, w: Float32Array, cos: Float32Array, sin: Float32Array, interleaved: boolean, eps: number): Float32Array;
}

/**
 * Whether the addon loads and its sessions run the ops of graphs for `NATIVE_CPU_TARGET`
 * (`ropewalk.MatMulQ8`; since NATIVE_KERNELS_VERSION 2, `MatMulQ8K`; since 4, `MatMulF32`; since 6, `DecodeAttention`; since 7, `QkNormRope`).
 */
export function nativeKernelsAvailable(): boolean {
  const s = loadNativeAddon();
  return s.available && typeof s.addon.matMulQ8Kernel === 'string' && typeof s.addon.matMulQ8K === 'function' && typeof s.addon.matMulF32 === 'function' &&
    typeof s.addon.attentionHead === 'function' && typeof s.addon.qkNormRopeRow === 'function';
}

export type NativeAddonStatus =
  | { available: true; addon: NativeAddon; runtimeVersion: string }
  | { available: false; reason: string };

let status: NativeAddonStatus | null = null;

/** Loads the addon and ONNX Runtime once per thread; later calls return the same answer. */
export function loadNativeAddon(): NativeAddonStatus {
  status ??= tryLoad();
  return status;
}

function tryLoad(): NativeAddonStatus {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const addonPath = addonCandidates(process.env, (process as { resourcesPath?: string }).resourcesPath, here).find((p) => existsSync(p));
  if (!addonPath) {
    return { available: false, reason: `the native addon is not built (${NATIVE_ADDON_FILE}; npm run build:native)` };
  }
  const require = createRequire(import.meta.url);
  try {
    const addon = require(addonPath) as NativeAddon;
    return { available: true, addon, runtimeVersion: addon.loadRuntime(onnxRuntimeLibrary(require)) };
  } catch (e) {
    return { available: false, reason: `the native addon cannot be loaded (${firstLine(e)})` };
  }
}

/** `rel` in the nearest ancestor of `from` (a folder) that has it. */
function findUpwards(rel: string, from: string): string | null {
  let dir = from;
  for (;;) {
    const candidate = path.join(dir, rel);
    if (existsSync(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/**
 * The ONNX Runtime shared library onnxruntime-node's binding loads (same folder as
 * onnxruntime_binding.node, which it requires as bin/napi-v6/<platform>/<arch>/).
 * @throws NativeUnavailableError naming the folder when it holds none.
 */
function onnxRuntimeLibrary(require: NodeJS.Require): string {
  // In a packaged app the package resolves inside app.asar; its libraries lie unpacked beside it.
  const pkg = unpackedPath(path.dirname(require.resolve('onnxruntime-node/package.json')));
  const dir = path.join(pkg, 'bin', 'napi-v6', process.platform, process.arch);
  const names = existsSync(dir) ? readdirSync(dir) : [];
  const lib = names.find((n) => /^libonnxruntime\.so\.\d+$/.test(n) || /^libonnxruntime\.\d+\.dylib$/.test(n) || n === 'onnxruntime.dll');
  if (!lib) throw new NativeUnavailableError(`no ONNX Runtime library in ${dir}`);
  return path.join(dir, lib);
}
