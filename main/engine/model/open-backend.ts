/**
 * Opens the decoder backend the engine asked for (backend.ts): `native` when the addon loads,
 * else `js` with a one-line note why; `js` when asked. The note joins the execution provider's
 * own fallback reason in `SessionInfo.fallbackReason`.
 *
 * Every provider runs on the native backend: its KV cache lives in the provider's memory (WebGPU
 * buffers, CUDA device memory). (With the KV cache in host memory, bound as past and present,
 * WebGPU's greedy tokens left the CPU's from the second on: its GroupQueryAttention shares the
 * buffer only when past and present are the same device buffer.)
 *
 * A thread count of 0 (the default) opens either session with this machine's physical cores as a
 * number (cpu-threads.ts: ONNX Runtime's own count for 0 came to one thread on a 2-core VM, and a
 * decode step ran 1.6× slower for it).
 */
import type { BackendKind, DecoderBackend, ExecutionProvider } from './backend.ts';
import type { ModelConfig } from './manifest.ts';
import { NativeDecoderSession, NativeUnavailableError } from './native-session.ts';
import { DecoderSession } from './js-session.ts';

/** A backend and, when it is not the one asked for, why (one line). */
export interface OpenedBackend {
  backend: DecoderBackend;
  note: string | null;
}

/**
 * @param want 'native' (the default) or 'js'.
 * @param kvDtype the graph's KV dtype (manifest.ts `manifestKvDtype`), the native addon's KV
 *   tensors' element type.
 * @param intraOpThreads ONNX Runtime's intra-op threads (0: the physical cores, cpu-threads.ts).
 * @param opts.weightsInMemory the native backend reads the weights file into memory on the CPU
 *   (NativeDecoderSession.create: for bundles stored quantized); the JS backend maps it either way.
 * @throws ModelLoadError when ONNX Runtime cannot load the model (on either backend).
 */
export async function openDecoderBackend(
  modelPath: string,
  config: ModelConfig,
  want: BackendKind = 'native',
  ep: ExecutionProvider = 'cpu',
  kvDtype: 'float32' | 'float16' = 'float32',
  intraOpThreads = 0,
  opts: { weightsInMemory?: boolean } = {},
): Promise<OpenedBackend> {
  let note: string | null = null;
  if (want === 'native') {
    try {
      return { backend: await NativeDecoderSession.create(modelPath, config, ep, kvDtype, intraOpThreads, opts), note: null };
    } catch (e) {
      if (!(e instanceof NativeUnavailableError)) throw e;
      note = `native backend unavailable: ${e.reason}; using the JS backend`;
    }
  }
  return { backend: await DecoderSession.create(modelPath, config, ep, intraOpThreads), note };
}
