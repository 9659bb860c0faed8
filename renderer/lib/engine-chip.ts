/**
 * What the header's model chip says about the engine: the execution provider of a local model
 * (CPU, CUDA), or "Remote" with the server's URL as its tooltip when a remote engine answers
 * (its execution provider field is a placeholder then: the server's hardware is not known).
 */
import type { ModelInfo } from '../../main/contract/types.ts';

export function engineChip(info: Pick<ModelInfo, 'executionProvider' | 'remote'> | null): { label: string; title: string } | null {
  if (!info) return null;
  if (info.remote) return { label: 'Remote', title: `Answered by a remote engine at ${info.remote.baseUrl}` };
  return { label: info.executionProvider.toUpperCase(), title: `Runs on this computer's ${info.executionProvider.toUpperCase()}` };
}
