/**
 * PDF reading order by layout (issue 20): a two-column page reads column by column whichever
 * order its content stream draws the lines in (PDFs written here, read by pdf.js); a single column
 * and a table of short cells read line by line; a wide paragraph gap is a blank line.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { extractDocument } from '../../main/documents/extract.ts';
import { layoutPageText } from '../../main/documents/pdf-layout.ts';
import { buildPdf, type PlacedLine } from '../helpers/documents.ts';

const LINES = 5;
const left = (i: number): PlacedLine => ({ x: 72, y: 700 - 14 * i, text: `Left column line ${i} alpha.` });
const right = (i: number): PlacedLine => ({ x: 320, y: 700 - 14 * i, text: `Right column line ${i} omega.` });
const rows = Array.from({ length: LINES }, (_, i) => i + 1);
const byColumn = [...rows.map((i) => `Left column line ${i} alpha.`), '', ...rows.map((i) => `Right column line ${i} omega.`)].join('\n');

describe('PDF reading order', () => {
  it('reads a two-column page drawn line by line across both columns column by column (the issue)', async () => {
    const d = await extractDocument('news.pdf', buildPdf([rows.flatMap((i) => [left(i), right(i)])]));
    assert.equal(d.text, byColumn);
  });

  it('reads the same page drawn column by column the same way', async () => {
    const d = await extractDocument('news.pdf', buildPdf([[...rows.map(left), ...rows.map(right)]]));
    assert.equal(d.text, byColumn);
  });

  it('keeps a single column, and a table of short cells row by row', async () => {
    const single = await extractDocument('one.pdf', buildPdf([['First line of prose here.', 'Second line of prose here.']]));
    assert.equal(single.text, 'First line of prose here.\nSecond line of prose here.');
    const cells = [['Region', 'Product', 'Units'], ['EU', 'Cable', '12'], ['US', 'Hub', '7']];
    const table = cells.flatMap((row, r) => row.map((text, c): PlacedLine => ({ x: 72 + 120 * c, y: 700 - 14 * r, text })));
    assert.equal((await extractDocument('table.pdf', buildPdf([table]))).text, 'Region Product Units\nEU Cable 12\nUS Hub 7');
  });

  it('joins items of one line with spaces by their gaps and puts a blank line at a paragraph gap', () => {
    const at = (str: string, x: number, y: number) => ({ str, x, y, width: str.length * 6, size: 12 });
    const text = layoutPageText([at('world.', 108, 700), at('Hello', 72, 700), at('Next', 72, 686), at('line.', 99, 686), at('Far below.', 72, 640), at('   ', 72, 600)]);
    assert.equal(text, 'Hello world.\nNext line.\n\nFar below.');
  });
});
