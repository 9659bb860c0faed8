/**
 * The PDF the document fuzzer found (seed 20261203, case 175: two damaged page objects): pdf.js
 * rejects the first page's promise, which extractDocument turns into a DocumentError, and also
 * rejects a promise of its own that nothing handles, which ends a Node process (serve, the CLI,
 * the app's main process extracted small files inline). extractDocumentOffThread now parses every
 * PDF in a worker: the caller gets the DocumentError and its process sees no unhandled rejection.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DocumentError } from '../../main/documents/errors.ts';
import { extractDocumentOffThread } from '../../main/documents/extract-off-thread.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';

const FIXTURE = path.join(PROJECT_ROOT, 'test/fixtures/documents/pdf-unhandled-rejection.pdf');
const BAD = readFileSync(FIXTURE);
const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => void unhandled.push(e);
before(() => process.on('unhandledRejection', onUnhandled));
after(() => process.off('unhandledRejection', onUnhandled));

describe('a PDF that leaves a rejection inside pdf.js', () => {
  it('inline, pdf.js leaves an unhandled rejection that ends a Node process (why PDFs go to a worker)', () => {
    // In a child process: the test runner fails any test during which a rejection goes unhandled.
    const script = `import { extractDocument } from ${JSON.stringify(path.join(PROJECT_ROOT, 'main/documents/extract.ts'))};
      import { readFileSync } from 'node:fs';
      await extractDocument('bad.pdf', readFileSync(${JSON.stringify(FIXTURE)})).catch((e) => console.log('caught:', e.code));
      await new Promise((r) => setTimeout(r, 500));
      console.log('still running');`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: PROJECT_ROOT, encoding: 'utf8' });
    assert.match(run.stdout, /caught: DOCUMENT_CORRUPT/);
    assert.doesNotMatch(run.stdout, /still running/);
    assert.notEqual(run.status, 0);
    assert.match(run.stderr, /Invalid number/);
  });

  it('off the thread, the caller gets the DocumentError and sees no unhandled rejection', async () => {
    unhandled.length = 0;
    await assert.rejects(extractDocumentOffThread('bad.pdf', BAD), (e: unknown) =>
      e instanceof DocumentError && e.code === 'DOCUMENT_CORRUPT' && /bad\.pdf: the PDF could not be read/.test(e.message));
    await sleep(300);
    assert.deepEqual(unhandled, []);
  });
});
