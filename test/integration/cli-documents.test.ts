/**
 * `npm run chat -- --attach FILE … "question"` as a subprocess (real extraction, real
 * stories260K): `--json` lists each document with its tokens as counted in the prompt (checked
 * against the prompt's own token count), bad documents exit 2 with one line naming the file,
 * a document that does not fit exits 2 with both numbers, and `--fit relevant` answers from the
 * part the question is about; pages without text and images read by OCR are said on stderr and
 * in --json, with the passages the prompt held.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { assertOneLineError, freshCacheDir, parseJsonRun, runChat, type ChatJson } from '../helpers/cli-run.ts';
import { buildPdf } from '../helpers/documents.ts';
import { renderTextImages } from '../helpers/rendered-text.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-cli-docs-'));
const file = (name: string, data: string | Buffer) => {
  const p = path.join(dir, name);
  writeFileSync(p, data);
  return p;
};
let cache: string;
before(async () => {
  cache = await freshCacheDir();
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(cache, { recursive: true, force: true });
});

type DocJson = ChatJson & {
  documents: { name: string; tokens: number; pagesWithoutText?: number[]; ocrPages?: number[] }[];
  documentParts?: string[];
  passages?: { document: string; label: string; page?: number; section?: string; start: number; end: number }[];
};

test('--attach: documents in the prompt with their token counts, errors naming the file, not fitting, --fit relevant', async () => {
  const md = file('story.md', 'Lily had a red ball. She played in the park.\n\nTom had a blue kite.\n');
  const pdf = file('kite.pdf', buildPdf([['The kite was blue.']]));
  const plain = parseJsonRun(await runChat(['--temperature', '0', '--max-tokens', '8', '--json', 'What did Lily have?'], cache));
  const r = parseJsonRun(await runChat(['--temperature', '0', '--max-tokens', '8', '--json', '--attach', md, '--attach', pdf, 'What did Lily have?'], cache)) as DocJson;
  assert.deepEqual(r.documents.map((d) => d.name), ['story.md', 'kite.pdf']);
  assert.ok(r.documents.every((d) => d.tokens > 10), JSON.stringify(r.documents));
  // Every prompt token is the question's or a document's (with its delimiters).
  assert.equal(r.promptTokens.length, plain.promptTokens.length + r.documents[0].tokens + r.documents[1].tokens);
  assert.equal(r.documentParts, undefined);

  const scan = file('scan.pdf', buildPdf([null]));
  assertOneLineError(await runChat(['--attach', scan, 'q'], cache), 2, /scan\.pdf: no text found: no text layer, and OCR found no text in its images/);
  assertOneLineError(await runChat(['--attach', path.join(dir, 'missing.txt'), 'q'], cache), 2, /missing\.txt: no such file/);
  assertOneLineError(await runChat(['--fit', 'most', '--attach', md, 'q'], cache), 2, /--fit must be relevant, got "most"/);

  const big = file('big.md', Array.from({ length: 40 }, (_, i) => `# Part ${i}\n\n${i === 17 ? 'The zebra ran to the river.' : `Lily and Tom played with ball number ${i} in the park.`}`).join('\n\n'));
  const line = assertOneLineError(await runChat(['--max-tokens', '20', '--attach', big, 'Where did the zebra run?'], cache), 2, /the documents do not fit/);
  assert.match(line, /needs \d+ tokens plus 20 reserved .* > max context 512; use --fit relevant/);
  // 512 is stories260K's trained context: a larger max context is not the advice (it costs quality).
  assert.match(line, /; use --fit relevant or lower --max-tokens$/);
  const below = assertOneLineError(await runChat(['--max-tokens', '20', '--max-context', '256', '--attach', big, 'Where did the zebra run?'], cache), 2, /> max context 256; /);
  assert.match(below, /; use --fit relevant, raise --max-context \(up to the model's trained context, 512\) or lower --max-tokens$/);
  const fit = parseJsonRun(await runChat(['--temperature', '0', '--max-tokens', '20', '--json', '--fit', 'relevant', '--attach', big, 'Where did the zebra run?'], cache)) as DocJson;
  assert.ok(fit.documentParts!.some((p) => p.startsWith('big.md: § Part 17, chunk ')), fit.documentParts!.join('; '));
  assert.ok(fit.promptTokens.length + 20 <= 512, `${fit.promptTokens.length} prompt tokens`);
  assert.ok(fit.documents[0].tokens < 512);
});

test('--attach: a page without text is named on stderr and in --json, never dropped silently; --json lists the cited passages (issue 20)', async () => {
  const pdf = file('mixed.pdf', buildPdf([['Page one speaks of ropes.'], ['Page two speaks of hemp.'], null, null]));
  const r = await runChat(['--temperature', '0', '--max-tokens', '4', '--json', '--attach', pdf, 'What about hemp?'], cache);
  const json = parseJsonRun(r) as DocJson;
  assert.deepEqual(json.documents[0].pagesWithoutText, [3, 4]);
  assert.equal(json.documents[0].ocrPages, undefined);
  assert.match(r.stderr, /^note: mixed\.pdf: pages 3, 4 have no text \(no text layer, and OCR found none\): left out$/m);
  // The passages in the prompt, each with its document, page and character range in the text.
  const text = 'Page one speaks of ropes.\n\nPage two speaks of hemp.';
  assert.deepEqual(json.passages, [
    { document: 'mixed.pdf', label: 'mixed.pdf p. 1', page: 1, start: 0, end: 27 },
    { document: 'mixed.pdf', label: 'mixed.pdf p. 2', page: 2, start: 27, end: text.length },
  ]);
});

test('--attach an image: read by OCR, said on stderr, ocrPages in --json (issue 20)', async () => {
  const [shot] = await renderTextImages([['The ferry to the island leaves at noon.']], 'png');
  const png = file('ferry.png', shot.bytes);
  const r = await runChat(['--temperature', '0', '--max-tokens', '4', '--json', '--attach', png, 'When does the ferry leave?'], cache);
  const json = parseJsonRun(r) as DocJson;
  assert.deepEqual(json.documents[0].ocrPages, [1]);
  assert.match(r.stderr, /^note: ferry\.png: text read by OCR$/m);
  assert.deepEqual(json.passages!.map((p) => p.label), ['ferry.png']);
});

test('--attach a corrupt PNG: exit 2 with our one line, none of Tesseract\'s own (libpng error: Read Error) on stderr', async () => {
  // A PNG signature and a truncated IHDR chunk: the type is recognised, the image cannot be decoded.
  const bad = file('broken.png', Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]), Buffer.from('IHDRgarbagegarbage')]));
  const r = await runChat(['--attach', bad, 'q'], cache);
  assertOneLineError(r, 2, /broken\.png: the image could not be read by OCR/);
  assert.doesNotMatch(r.stderr, /libpng/);
});
