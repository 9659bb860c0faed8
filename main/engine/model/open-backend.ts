/**
 * Opens the decoder backend the engine asked for (backend.ts): `native` when the addon loads,
 * else `js` with a one-line note why; `js` when asked. The note joins the execution provider's
 * own fallback reason in `SessionInfo.fallbackReason`.
 *
 * WebGPU runs on the JS backend: the addon opens a WebGPU session, but with its KV cache bound
 * in host memory (past and present the same buffer) the greedy tokens leave the CPU's after the
 * first (stories260K: 432 then 269, the CPU's 432 then 383), measured on lavapipe. The device-
 * resident KV cache that would fix it is issue 16's item 2.
 */
import type { BackendKind, DecoderBackend, ExecutionProvider } from './backend.ts';
import type { ModelConfig } from './manifest.ts';
import { NativeDecoderSession, NativeUnavailableError } from './native-session.ts';
import { DecoderSession } from './js-session.ts';

/** Why `--backend native` runs WebGPU on the JS backend (see the file comment). */
export const NATIVE_WEBGPU_NOTE = 'the native backend does not run WebGPU yet (its KV cache is host memory); using the JS backend';

/** A backend and, when it is not the one asked for, why (one line). */
export interface OpenedBackend {
  backend: DecoderBackend;
  note: string | null;
}

/**
 * @param want 'native' (the default) or 'js'.
 * @param kvDtype the graph's KV dtype (the bundle manifest's `dtype`): the native addon's KV
 *   blocks are float32, so a float16 graph opens on the JS backend, with a note.
 * @param intraOpThreads ONNX Runtime's intra-op threads (0: its default, the physical cores).
 * @throws ModelLoadError when ONNX Runtime cannot load the model (on either backend).
 */
export async function openDecoderBackend(
  modelPath: string,
  config: ModelConfig,
  want: BackendKind = 'native',
  ep: ExecutionProvider = 'cpu',
  kvDtype: 'float32' | 'float16' = 'float32',
  intraOpThreads = 0,
): Promise<OpenedBackend> {
  let note: string | null = null;
  if (want === 'native' && kvDtype === 'float16') {
    note = 'native backend: its KV blocks are float32 and this graph is float16; using the JS backend';
  } else if (want === 'native' && ep === 'webgpu') {
    note = NATIVE_WEBGPU_NOTE;
  } else if (want === 'native') {
    try {
      return { backend: await NativeDecoderSession.create(modelPath, config, ep, intraOpThreads), note: null };
    } catch (e) {
      if (!(e instanceof NativeUnavailableError)) throw e;
      note = `native backend unavailable: ${e.reason}; using the JS backend`;
    }
  }
  return { backend: await DecoderSession.create(modelPath, config, ep, intraOpThreads), note };
}
