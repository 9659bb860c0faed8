/**
 * One import for `npm run bench`, in a process of its own so its peak RSS is the import's:
 *   tsx test/bench/import-child.ts <streamed|in-memory|idle|before> <hf folder> <cache dir> [sources]
 * streamed: `resolveModel` into an empty cache, what a first start does before the session opens
 *   (content hash, config/headers/tokenizer checks, graph from shapes, weights streamed chunk by
 *   chunk into the data file, tokenizer.json copied, bundle read back).
 * in-memory: today's code made to import as builders 5 and older did: the same content hash,
 *   every weight read into memory as float32 (`importHuggingFace`), every Linear weight
 *   transposed in JS (they stored them [in, out] for MatMul; the bytes are only a cost here, the
 *   bundle is never run), graph built and written from memory, tokenizer.json written from its
 *   parsed JSON, bundle read back.
 * before: `resolveModel` of an older commit's sources (extracted by the bench into [sources]).
 * idle: loads the same modules and imports nothing (the runtime's own RSS).
 * Prints one JSON line: { ms, peakRssBytes, phases: { name: ms } }. Peak RSS is VmHWM from
 * /proc/self/status on Linux: `resourceUsage().maxRSS` of an exec'd child starts at its parent's
 * RSS at fork (Linux keeps the larger of the two), so it reported the bench's own RSS.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { loadBundle, resolveModel, writeBundle } from '../../main/engine/model/bundle.ts';
import { hashFiles } from '../../main/engine/model/content-hash.ts';
import { transpose } from '../../main/engine/model/decoder-graph.ts';
import { isLinearWeight } from '../../main/engine/model/gguf/quantized-weights.ts';
import { hfSourceFiles, importHuggingFace } from '../../main/engine/model/import-hf.ts';
import { openedFromMemory } from '../../main/engine/model/manifest.ts';

/** Peak resident set of this process, bytes. */
function peakRssBytes(): number {
  try {
    const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (kb) return Number(kb[1]) * 1024;
  } catch {}
  return process.resourceUsage().maxRSS * 1024;
}

const [mode, folder, cacheDir] = process.argv.slice(2) as [string, string, string];
const phases: Record<string, number> = {};
const t0 = performance.now();
let t = t0;
const lap = (name: string) => {
  const now = performance.now();
  phases[name] = (phases[name] ?? 0) + now - t;
  t = now;
};
if (mode === 'streamed') {
  // Phases as resolveModel reports them; after the last weight bytes, 'finish': tokenizer files
  // and manifest written, the folder renamed into place, the bundle read back.
  let phase = '';
  await resolveModel(folder, cacheDir, (p) => {
    const next = p.phase === 'write' && p.fraction === 1 ? 'finish' : p.phase;
    if (next === phase) return;
    if (phase) lap(phase);
    phase = next;
  });
  lap(phase);
} else if (mode === 'before') {
  // The import of an older commit, its sources extracted by the bench into argv[5].
  const sources = process.argv[5]!;
  const before = (await import(pathToFileURL(path.join(sources, 'main/engine/model/bundle.ts')).href)) as { resolveModel: typeof resolveModel };
  await before.resolveModel(folder, cacheDir);
  lap('all');
} else if (mode === 'in-memory') {
  const sourceHash = await hashFiles(await hfSourceFiles(folder));
  lap('hash');
  const m = await importHuggingFace(folder, { sourceHash });
  lap('read');
  for (const [name, w] of m.weights) if (isLinearWeight(name)) w.data = transpose(w.data, w.shape[0]!, w.shape[1]!);
  lap('transpose');
  const dir = path.join(cacheDir, 'bundle');
  await writeBundle(openedFromMemory(m), dir);
  lap('build+write');
  await loadBundle(dir);
  lap('finish');
}
process.stdout.write(`${JSON.stringify({ ms: performance.now() - t0, peakRssBytes: peakRssBytes(), phases })}\n`);
