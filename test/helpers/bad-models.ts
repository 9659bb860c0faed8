/**
 * Bad model sources for the bad-input tests (CLI and library), built in a temp folder from the
 * real stories260K files: a truncated checkpoint, headers with absurd sizes, random bytes, a
 * checkpoint with a tokenizer of another vocab size, a folder that is not a model, a path that
 * does not exist, and a truncated GGUF file. Each checkpoint lies in its own folder with
 * the tokenizer a user would have beside it.
 */
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { STORIES_BIN, STORIES_GGUF, STORIES_TOKENIZER } from './paths.ts';

export interface BadModels {
  root: string;
  /** First half of stories260K.bin (valid header, missing weights), tok512.bin beside it. */
  truncated: string;
  /** 10 bytes: shorter than the 28-byte header, tok512.bin beside it. */
  shortHeader: string;
  /** Header fields each ≤ 2^20 but describing ~10^15 parameters (vocab 512, tok512.bin beside it). */
  absurdParams: string;
  /** Header with n_heads = 0 and seq_len = 2^31 − 1 (vocab 512, tok512.bin beside it). */
  absurdField: string;
  /** 100 000 (seeded) random bytes named like a checkpoint, tok512.bin beside it. */
  random: string;
  /** A copy of stories260K.bin with a synthetic 300-piece `tokenizer.bin` beside it (model vocab 512). */
  mismatchedTokenizer: string;
  /** A folder holding only a text file. */
  notAModel: string;
  /** A path that does not exist. */
  nonExistent: string;
  /** The first 20,000 bytes of stories260K.gguf: its header and tensor infos, most tensor data missing. */
  gguf: string;
}

/** llama2.c `tokenizer.bin` bytes: int32 max_token_length, then per piece float32 score, int32 len, bytes. */
export function llama2cTokenizerBytes(pieces: string[]): Uint8Array {
  const enc = new TextEncoder();
  const encoded = pieces.map((p) => enc.encode(p));
  const maxLen = Math.max(...encoded.map((e) => e.length));
  const out = new Uint8Array(4 + encoded.reduce((n, e) => n + 8 + e.length, 0));
  const v = new DataView(out.buffer);
  v.setInt32(0, maxLen, true);
  let off = 4;
  encoded.forEach((e, i) => {
    v.setFloat32(off, -i, true);
    v.setInt32(off + 4, e.length, true);
    out.set(e, off + 8);
    off += 8 + e.length;
  });
  return out;
}

/** A well-formed llama2.c tokenizer with `n` pieces (<unk>, BOS, EOS, 256 byte pieces, then letters). */
export function syntheticTokenizerPieces(n: number): string[] {
  const pieces = ['<unk>', '\n<s>\n', '\n</s>\n'];
  for (let b = 0; b < 256; b++) pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  for (let i = 0; pieces.length < n; i++) pieces.push(`${i % 2 ? '' : ' '}${String.fromCharCode(97 + (i >> 1) % 26)}${'x'.repeat(Math.floor(i / 52))}`);
  return pieces;
}

function header(fields: number[]): Uint8Array {
  const out = new Uint8Array(28);
  const v = new DataView(out.buffer);
  fields.forEach((f, i) => v.setInt32(i * 4, f, true));
  return out;
}

/** Deterministic pseudo-random bytes (xorshift32), so a failure reproduces. */
function randomBytes(n: number, seed = 0x9e3779b9): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** Builds every bad source under a fresh temp folder (remove it with `rm(root, { recursive: true })`). */
export async function makeBadModels(): Promise<BadModels> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-bad-models-'));
  const inDir = async (name: string, file: string, bytes: Uint8Array, tokenizer: 'tok512' | Uint8Array = 'tok512') => {
    const dir = path.join(root, name);
    await mkdir(dir);
    if (tokenizer === 'tok512') await copyFile(STORIES_TOKENIZER, path.join(dir, 'tok512.bin'));
    else await writeFile(path.join(dir, 'tokenizer.bin'), tokenizer);
    await writeFile(path.join(dir, file), bytes);
    return path.join(dir, file);
  };
  const good = new Uint8Array(await readFile(STORIES_BIN));
  const notAModel = path.join(root, 'not-a-model');
  await mkdir(notAModel);
  await writeFile(path.join(notAModel, 'notes.txt'), 'just some notes\n');
  return {
    root,
    truncated: await inDir('truncated', 'stories260K.bin', good.subarray(0, good.length >> 1)),
    shortHeader: await inDir('short', 'short.bin', good.subarray(0, 10)),
    absurdParams: await inDir('absurd-params', 'absurd.bin', header([1 << 20, 1 << 20, 1 << 20, 8, 4, 512, 1 << 20])),
    absurdField: await inDir('absurd-field', 'absurd.bin', header([64, 172, 5, 0, 4, 512, 0x7fffffff])),
    random: await inDir('random', 'random.bin', randomBytes(100_000)),
    mismatchedTokenizer: await inDir('mismatched', 'stories260K.bin', good, llama2cTokenizerBytes(syntheticTokenizerPieces(300))),
    notAModel,
    nonExistent: path.join(root, 'does-not-exist', 'model.bin'),
    gguf: await inDir('truncated-gguf', 'stories260K.gguf', new Uint8Array(await readFile(STORIES_GGUF)).subarray(0, 20_000)),
  };
}

export async function removeBadModels(m: BadModels | undefined): Promise<void> {
  if (m) await rm(m.root, { recursive: true, force: true });
}
