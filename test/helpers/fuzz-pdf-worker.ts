/**
 * Test helper, a worker thread: fuzzes `extractDocument` on PDFs inline, as the app's extraction
 * worker runs it, counting the rejections pdf.js leaves unhandled (in a worker they cannot fail
 * the test runner's current test; in the app they end only that extraction's worker). Receives
 * `{ seed, count, pdf }` as workerData, posts `{ summary, findings, stray }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { extractDocument } from '../../main/documents/extract.ts';
import { FuzzTally, runCase } from './fuzz.ts';
import { mutateBytes } from './fuzz-bytes.ts';
import { mulberry32 } from './prng.ts';

const { seed, count, pdf } = workerData as { seed: number; count: number; pdf: Uint8Array };
let stray = 0;
process.on('unhandledRejection', () => void stray++);
const r = mulberry32(seed);
const tally = new FuzzTally();
const t0 = performance.now();
for (let i = 0; i < count; i++) {
  const bytes = mutateBytes(Buffer.from(pdf), r);
  tally.add(`seed ${seed} fuzz.pdf case ${i}`, await runCase(() => extractDocument('fuzz.pdf', bytes), 10_000, 256 * 2 ** 20));
}
await new Promise((resolve) => setTimeout(resolve, 200)); // late rejections
parentPort!.postMessage({ summary: `fuzz.pdf ${tally.total} in ${Math.round(performance.now() - t0)} ms: ${tally.summary()}`, findings: tally.findings, stray });
