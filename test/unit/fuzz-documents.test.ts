/**
 * Seeded fuzzing of the document extractors (`extractDocument`: pdf.js, mammoth, the HTML text
 * extractor): a PDF and a .docx built here, mutated by bit flips, truncations and duplicated or
 * deleted byte ranges (the docx also with its zip entries damaged after compression), and
 * generated hostile HTML (deep nesting, unclosed and broken tags, huge attributes and entities,
 * scripts and styles, invalid UTF-8 and NUL bytes). Every case ends within 10 s in a
 * DocumentError or extracted text, never an untyped exception, a hang, or resident memory growing
 * by more than 256 MB. PDFs run in one worker thread (inline there, as the app's extraction
 * worker runs them) that counts the rejections pdf.js leaves unhandled: the fuzzer's finding
 * (case 175), which ended the process when small PDFs were parsed inline, and why every PDF is
 * now parsed in a worker (documents-pdf-rejection.test.ts). Fewer cases than the model files.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { extractDocument } from '../../main/documents/extract.ts';
import { buildDocx, buildPdf } from '../helpers/documents.ts';
import { FuzzTally, runCase } from '../helpers/fuzz.ts';
import { mutateBytes } from '../helpers/fuzz-bytes.ts';
import { workerThread } from '../../main/common/worker-thread.ts';
import { mulberry32 } from '../helpers/prng.ts';

const SEED = 20261203;
const PER_FORMAT = { pdf: 300, docx: 300, html: 300 };
type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rand, n: number) => Math.floor(r() * n);

/** Hostile HTML, one of several shapes, seeded. */
function hostileHtml(r: Rand): Buffer {
  const n = 1 + int(r, 20_000);
  const shapes = [
    () => '<div>'.repeat(n) + 'deep' + '</div>'.repeat(int(r, n)),
    () => `<p title="${'x'.repeat(n * 10)}">long attribute</p>`,
    () => '&amp;&#x10FFFF;&#0;&#xD800;&bogus;&#99999999999;'.repeat(int(r, 500)) + 'entities',
    () => `<script>${'<p>'.repeat(n)}</script><style>${'a{}'.repeat(n)}</style>text`,
    () => '<<<>>><p <a <b>></'.repeat(int(r, 2000)) + 'broken',
    () => '<table><tr><td>'.repeat(int(r, 3000)) + 'cells',
    () => '<!--'.repeat(int(r, 1000)) + 'comments -->',
  ];
  const html = Buffer.from(pick(r, shapes)(), 'utf8');
  if (r() < 0.2) return Buffer.concat([html, Buffer.from([0xff, 0xfe, 0xc0, 0x80])]);
  if (r() < 0.1) return Buffer.concat([html, Buffer.from([0])]);
  return html;
}

describe('fuzzing the document extractors', () => {
  it(`${PER_FORMAT.pdf} PDFs, ${PER_FORMAT.docx} .docx and ${PER_FORMAT.html} HTML files end in a DocumentError or text`, { timeout: 600_000 }, async () => {
    const r = mulberry32(SEED);
    const pdf = buildPdf([['Page one of the fuzz corpus.', 'A second line.'], ['Page two.']]);
    const docx = await buildDocx(['First paragraph of the fuzz corpus.', 'Second paragraph.']);
    const sources: Array<[string, number, () => Buffer]> = [
      ['fuzz.docx', PER_FORMAT.docx, () => mutateBytes(docx, r)],
      ['fuzz.html', PER_FORMAT.html, () => (r() < 0.3 ? mutateBytes(hostileHtml(r), r) : hostileHtml(r))],
    ];
    // PDFs in one worker thread, inline there, as the app's extraction worker parses them.
    const pdfRun = new Promise<{ summary: string; findings: string[]; stray: number }>((resolve, reject) => {
      const w = workerThread(new URL('../helpers/fuzz-pdf-worker.ts', import.meta.url), { workerData: { seed: SEED, count: PER_FORMAT.pdf, pdf } });
      w.once('message', resolve);
      w.once('error', reject);
    });
    const summaries: string[] = [];
    const findings: string[] = [];
    for (const [name, count, make] of sources) {
      const tally = new FuzzTally();
      const t0 = performance.now();
      for (let i = 0; i < count; i++) {
        const bytes = make();
        tally.add(`seed ${SEED} ${name} case ${i}`, await runCase(() => extractDocument(name, bytes), 10_000, 256 * 2 ** 20));
      }
      summaries.push(`${name} ${tally.total} in ${Math.round(performance.now() - t0)} ms: ${tally.summary()}`);
      findings.push(...tally.findings);
    }
    const p = await pdfRun;
    summaries.unshift(`${p.summary}, ${p.stray} rejections left unhandled by pdf.js`);
    findings.push(...p.findings);
    console.log(`# document fuzz: ${summaries.join('; ')}`);
    assert.deepEqual(findings, []);
  });
});
