/**
 * `node --import tsx test/bench/documents-large.ts`: large attachments, as issue 20 asks — a
 * 300-page PDF with a text layer (48 lines a page, built by test/helpers/documents.ts) and a 5 MB
 * plain text file. Each is extracted in a fresh child process (`extractDocumentOffThread`, the
 * app's path: a worker thread above 256 KiB), which prints the seconds, its peak RSS
 * (`process.resourceUsage().maxRSS`) against a child that only loads the same modules, and the
 * figures per MB of input. Figures are from one run each; a benchmark, not a test: it asserts nothing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);

async function child(kind: string, file: string): Promise<void> {
  const { extractDocumentOffThread } = await import('../../main/documents/extract-off-thread.ts');
  const bytes = readFileSync(file);
  const started = performance.now();
  const d = kind === 'baseline' ? null : await extractDocumentOffThread(path.basename(file), bytes);
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(JSON.stringify({ seconds, maxRssMiB: process.resourceUsage().maxRSS / 1024, chars: d?.text.length ?? 0, parts: d?.parts.length ?? 0 }));
}

function run(kind: string, file: string): { seconds: number; maxRssMiB: number; chars: number; parts: number } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', SELF, kind, file], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`${kind} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function main(): Promise<void> {
  const { buildPdf } = await import('../helpers/documents.ts');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-docs-'));
  try {
    const line = 'The ropewalk twisted hemp into long ropes for the ships in the harbour, day after day.';
    const pdf = path.join(dir, 'book.pdf');
    writeFileSync(pdf, buildPdf(Array.from({ length: 300 }, (_, p) => Array.from({ length: 48 }, (_, l) => `${p + 1}.${l + 1} ${line}`))));
    const txt = path.join(dir, 'book.txt');
    const para = `${line} ${line} ${line}\n\n`;
    writeFileSync(txt, para.repeat(Math.ceil((5 * 1024 * 1024) / para.length)));
    const base = run('baseline', txt);
    console.log(`baseline (modules loaded, nothing extracted): peak RSS ${base.maxRssMiB.toFixed(0)} MiB`);
    for (const [name, file] of [['300-page PDF', pdf], ['5 MB text', txt]] as const) {
      const mb = readFileSync(file).length / 1e6;
      const r = run('extract', file);
      const extra = r.maxRssMiB - base.maxRssMiB;
      console.log(
        `${name}: ${mb.toFixed(1)} MB, ${r.seconds.toFixed(2)} s (${(r.seconds / mb).toFixed(2)} s/MB), peak RSS ${r.maxRssMiB.toFixed(0)} MiB (+${extra.toFixed(0)} over baseline, ${(extra / mb).toFixed(1)} MiB per MB), ${r.chars} chars, ${r.parts} parts`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2]) await child(process.argv[2], process.argv[3]);
else await main();
