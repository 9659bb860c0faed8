/**
 * `node --import tsx test/bench/documents-large.ts`: large attachments, as issue 20 asks — a
 * 300-page PDF with a text layer (48 lines a page, built by test/helpers/documents.ts) and a 5 MB
 * plain text file. Each is extracted in a fresh child process (`extractDocumentOffThread`, the
 * app's path: a worker thread above 256 KiB), which prints the seconds, its peak RSS
 * (`process.resourceUsage().maxRSS`) against a child that only loads the same modules, and the
 * figures per MB of input. Then the 5 MB text attached and fitted with "use the relevant parts"
 * on stories260K, as the window and `--fit relevant` do it: extracted, counted for its info
 * (`documentTokens`, the DocumentService's count: measured, for 5 MB) and fitted to a 492-token room
 * (`documentPrompt`, the CLI's path), in a child that loaded the model first (its baseline: the
 * same child with the model loaded and nothing attached); printed with the load average.
 * Figures are from one run each; a benchmark, not a test: it asserts nothing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);

/** Model loaded, then (kind 'relevant') the file attached, counted and fitted to its relevant parts. */
async function relevantChild(kind: string, file: string): Promise<void> {
  const { EngineHost } = await import('../../main/engine-host/host.ts');
  const { extractDocumentOffThread } = await import('../../main/documents/extract-off-thread.ts');
  const { documentTokens } = await import('../../main/documents/token-cache.ts');
  const { documentPrompt } = await import('../../main/cli/documents.ts');
  const { STORIES_BIN } = await import('../helpers/paths.ts');
  const host = new EngineHost();
  try {
    const info = await host.load(STORIES_BIN, { executionProvider: 'cpu' });
    const started = performance.now();
    let parts: string[] = [];
    let tokens = 0;
    if (kind === 'relevant') {
      const d = await extractDocumentOffThread(path.basename(file), readFileSync(file));
      tokens = (await documentTokens(d.text, (texts) => host.countEach(texts))).tokens;
      const room = info.maxContext - 20;
      const fitted = await documentPrompt(host, [], 'How many barrels of tar?', [d], { relevant: true, room, maxContext: info.maxContext, trainedContext: info.trainedContext, reserve: 20 });
      parts = fitted.documentParts ?? [];
    }
    const seconds = (performance.now() - started) / 1000;
    process.stdout.write(JSON.stringify({ seconds, maxRssMiB: process.resourceUsage().maxRSS / 1024, chars: tokens, parts: parts.length }));
  } finally {
    await host.dispose();
  }
}

async function child(kind: string, file: string): Promise<void> {
  if (kind === 'model' || kind === 'relevant') return relevantChild(kind, file);
  const { extractDocumentOffThread } = await import('../../main/documents/extract-off-thread.ts');
  const bytes = readFileSync(file);
  const started = performance.now();
  const d = kind === 'baseline' ? null : await extractDocumentOffThread(path.basename(file), bytes);
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(JSON.stringify({ seconds, maxRssMiB: process.resourceUsage().maxRSS / 1024, chars: d?.text.length ?? 0, parts: d?.parts.length ?? 0 }));
}

function run(kind: string, file: string): { seconds: number; maxRssMiB: number; chars: number; parts: number } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', SELF, kind, file], { encoding: 'utf8', maxBuffer: 1 << 20, env: { ...process.env, ROPEWALK_CACHE_DIR: path.join(os.tmpdir(), 'ropewalk-bench-docs-models') } });
  if (r.status !== 0) throw new Error(`${kind} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function main(): Promise<void> {
  const { buildPdf, variedText } = await import('../helpers/documents.ts');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-bench-docs-'));
  try {
    const line = 'The ropewalk twisted hemp into long ropes for the ships in the harbour, day after day.';
    const pdf = path.join(dir, 'book.pdf');
    writeFileSync(pdf, buildPdf(Array.from({ length: 300 }, (_, p) => Array.from({ length: 48 }, (_, l) => `${p + 1}.${l + 1} ${line}`))));
    const txt = path.join(dir, 'book.txt');
    writeFileSync(txt, variedText(5 * 1024 * 1024));
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
    // Attach + relevant fit of the 5 MB text on stories260K, over a child that only loaded the model.
    const mb = readFileSync(txt).length / 1e6;
    const idle = run('model', txt);
    const r = run('relevant', txt);
    const extra = r.maxRssMiB - idle.maxRssMiB;
    console.log(
      `5 MB text attached + relevant parts (stories260K, room 492): ${r.seconds.toFixed(2)} s (${(r.seconds / mb).toFixed(2)} s/MB), peak RSS ${r.maxRssMiB.toFixed(0)} MiB (+${extra.toFixed(0)} over the model alone, ${(extra / mb).toFixed(1)} MiB per MB), ${r.chars} tokens, ${r.parts} parts; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2]) await child(process.argv[2], process.argv[3]);
else await main();
