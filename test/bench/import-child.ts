/**
 * One import for `npm run bench`, in a process of its own so its peak RSS is the import's:
 *   tsx test/bench/import-child.ts <stream|eager|idle> <hf folder> <bundle dir>
 * stream: `openHuggingFace` + `writeBundle` (weights read one at a time, as `resolveModel` does);
 * eager: `importHuggingFace` (every weight in memory first, as before streaming) + `writeBundle`;
 * idle: loads the same modules and imports nothing (the runtime's own RSS).
 * Prints one JSON line: { ms, maxRssBytes }.
 */
import { performance } from 'node:perf_hooks';
import { writeBundle } from '../../main/engine/model/bundle.ts';
import { importHuggingFace, openHuggingFace } from '../../main/engine/model/import-hf.ts';

const [mode, folder, dir] = process.argv.slice(2);
const t0 = performance.now();
if (mode === 'stream') {
  const m = await openHuggingFace(folder!, { sourceHash: 'bench' });
  try {
    await writeBundle(m, dir!);
  } finally {
    await m.close();
  }
} else if (mode === 'eager') {
  await writeBundle(await importHuggingFace(folder!, { sourceHash: 'bench' }), dir!);
}
process.stdout.write(`${JSON.stringify({ ms: performance.now() - t0, maxRssBytes: process.resourceUsage().maxRSS * 1024 })}\n`);
