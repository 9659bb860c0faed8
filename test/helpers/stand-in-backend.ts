/**
 * The KV side of a weightless stand-in decoder backend (the engine's tests script the logits): the
 * KV cache keeps only its bookkeeping (no host buffers, `kvOnHost` false), a shift discards rows
 * with the engine's rotation, save/restore keep the length. Subclasses write `run` (the logits)
 * and `info`.
 */
import type { KeyRotation, KvCache } from '../../main/engine/cache/kv-cache.ts';
import type { RopeTables } from '../../main/engine/cache/rope-cache.ts';
import type { DecoderBackend, SessionInfo } from '../../main/engine/model/backend.ts';

export abstract class StandInBackend implements DecoderBackend {
  abstract readonly info: SessionInfo;
  readonly kvOnHost = false;

  abstract run(tokenIds: ArrayLike<number>, rope: RopeTables, kv: KvCache): Promise<Float32Array>;

  shift(kv: KvCache, keep: number, drop: number, rotation: KeyRotation): void {
    kv.discard(keep, drop, rotation);
  }

  saveKv(kv: KvCache): Float32Array {
    return new Float32Array(kv.snapshotFloats(kv.length));
  }

  restoreKv(kv: KvCache, _data: Float32Array, length: number): void {
    kv.restore(null, length);
  }

  async dispose(): Promise<void> {}
}
