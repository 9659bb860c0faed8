/**
 * `npm run bench:library`: how long the model library takes to list 50 GGUF files, reading
 * their headers only. Two kinds of file, each as 50 hard links in an LM Studio-shaped folder (a
 * link is a path of its own to the scanner, and costs no disk): stories260K-q4_0 (a 512-token
 * vocabulary: a small header) and a Qwen3-shaped header (the real 151,669-token Qwen3 tokenizer
 * with its merges, the header a real Qwen3 GGUF carries; tiny weights). Prints, per kind, the
 * first (cold: every header parsed) and a second listing (warm: sizes and mtimes unchanged, so
 * no header is read again), in ms, and headers/s. One run each; it asserts nothing.
 */
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ModelLibraryService } from '../../main/services/model-library.ts';
import { ConversationStore } from '../../main/services/store.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';
import { qwen3TokenizerMetadata, randomWeights, writeModelGguf } from '../helpers/synthetic-gguf.ts';
import { QWEN3_TOKENIZER_VOCAB } from '../helpers/synthetic-hf.ts';

const COUNT = 50;
const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-library-'));
const store = new ConversationStore(path.join(root, 'data'));

/** A home whose LM Studio folder holds COUNT links to `file`. */
function homeWith(kind: string, file: string): string {
  const home = path.join(root, kind);
  const dir = path.join(home, '.lmstudio', 'models', 'bench', kind);
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < COUNT; i++) linkSync(file, path.join(dir, `${kind}-${i}.gguf`));
  return home;
}

async function row(kind: string, file: string): Promise<void> {
  const lib = new ModelLibraryService({ store, builtinPath: STORIES_BIN, modelsFolder: () => path.join(root, 'none'), maxContext: (t) => t ?? 512, home: homeWith(kind, file), env: {} });
  const t0 = performance.now();
  const first = await lib.list();
  const cold = performance.now() - t0;
  const t1 = performance.now();
  await lib.list();
  const warm = performance.now() - t1;
  const listed = first.models.length - 1;
  const mib = (statSync(file).size / 2 ** 20).toFixed(1);
  console.log(`${kind.padEnd(16)} ${listed} GGUF headers (file ${mib} MiB): cold ${cold.toFixed(0)} ms (${((listed / cold) * 1000).toFixed(0)} headers/s), warm ${warm.toFixed(0)} ms`);
}

try {
  const small = path.join(root, 'stories260K-q4_0.gguf');
  copyFileSync(path.join(GGUF_DIR, 'stories260K-q4_0.gguf'), small);
  await row('stories260K', small);
  const qwen = path.join(root, 'qwen3-header.gguf');
  const config = {
    architecture: 'qwen3' as const, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8,
    vocabSize: QWEN3_TOKENIZER_VOCAB, rmsNormEps: 1e-6, tiedEmbeddings: true, attentionBias: false, qkNorm: true,
    rope: { theta: 1_000_000, rotaryDim: 8, layout: 'half' as const }, trainedContext: 40_960,
  };
  writeModelGguf(qwen, config, qwen3TokenizerMetadata(), randomWeights(1), 'Q8_0', 'Q8_0');
  await row('qwen3-tokenizer', qwen);
} finally {
  store.close();
  rmSync(root, { recursive: true, force: true });
}
