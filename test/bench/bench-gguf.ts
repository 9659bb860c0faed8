/**
 * The benches' Qwen3-0.6B-shaped GGUF files (peer.ts, native-kernels-ab.ts): random weights from
 * the shared pool (`poolWeights`; shapes decide speed, not values) and Qwen3's real tokenizer,
 * written here in F32, Q8_0 and Q4_0, or llama-quantize'd from the F32 one (Q4_K_M, Q6_K, …) by
 * Debian's llama.cpp (../shared/tools/debian-llamacpp.sh prints its wrapper). A bench helper.
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { qwen3_0_6bConfig, qwen3TokenizerMetadata, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { poolWeights } from './pool-weights.ts';

/** Formats the benches write themselves; any other is a llama-quantize target. */
const WRITTEN = new Set(['F32', 'Q8_0', 'Q4_0']);

/** The Debian build's wrapper (debian-llamacpp.sh prints it), or null with the reason printed. */
export function debianWrapper(): string | null {
  try {
    const script = path.resolve(import.meta.dirname, '../../../shared/tools/debian-llamacpp.sh');
    return execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim().split('\n').at(-1)!;
  } catch (e) {
    console.log(`(no Debian llama.cpp: ${(e as Error).message.split('\n')[0]})`);
    return null;
  }
}

/** Whether `format` needs llama-quantize (the Debian build) to be made. */
export const needsQuantize = (format: string): boolean => !WRITTEN.has(format);

/**
 * The GGUF of `format` (`layers` layers) in `dir`: written here or llama-quantize'd from the F32
 * one with `threads` threads; null when it needs the Debian build and `wrapper` is null.
 */
export function benchGguf(format: string, dir: string, layers: number, threads: number, wrapper: string | null): string | null {
  const file = path.join(dir, `qwen3-${format}.gguf`);
  const config = qwen3_0_6bConfig(layers);
  const write = (f: 'F32' | 'Q8_0' | 'Q4_0', to: string) => writeModelGguf(to, config, qwen3TokenizerMetadata(config.vocabSize), poolWeights(), f, f);
  if (!needsQuantize(format)) {
    write(format as 'F32' | 'Q8_0' | 'Q4_0', file);
    return file;
  }
  if (!wrapper) return null;
  const f32 = path.join(dir, 'qwen3-F32-source.gguf');
  write('F32', f32);
  try {
    execFileSync(wrapper, ['llama-quantize', f32, file, format, String(threads)], { stdio: 'ignore' });
  } finally {
    rmSync(f32, { force: true });
  }
  return file;
}
