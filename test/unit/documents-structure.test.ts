/**
 * Structure kept in extracted text (issue 20): .docx tables (written here as WordprocessingML,
 * read by mammoth) and HTML tables become Markdown rows, merged cells spread over the cells they
 * cover, headings stay headings and give the document its sections.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { extractDocument } from '../../main/documents/extract.ts';
import { htmlText } from '../../main/documents/html-text.ts';
import { buildDocx } from '../helpers/documents.ts';

describe('docx structure', () => {
  it('keeps the rows of a 3×3 table (the issue: every cell came out its own paragraph)', async () => {
    const d = await extractDocument('sales.docx', await buildDocx(['Units by region.', { table: [['Region', 'Product', 'Units'], ['EU', 'Cable', '12'], ['US', 'Hub', '7']] }]));
    assert.equal(d.text, 'Units by region.\n\n| Region | Product | Units |\n| --- | --- | --- |\n| EU | Cable | 12 |\n| US | Hub | 7 |');
    assert.ok(d.text.split('\n').includes('| EU | Cable | 12 |'), 'the EU row is one line');
  });

  it('spreads merged cells (gridSpan, vMerge) over the cells they cover', async () => {
    const table = [
      [{ text: 'Quarter', span: 2 }, 'Total'],
      [{ text: 'Q1', merge: 'restart' as const }, 'Jan', '5'],
      [{ text: '', merge: 'continue' as const }, 'Feb', '6'],
    ];
    const d = await extractDocument('merged.docx', await buildDocx([{ table }]));
    assert.equal(d.text, '| Quarter | Quarter | Total |\n| --- | --- | --- |\n| Q1 | Jan | 5 |\n| Q1 | Feb | 6 |');
  });

  it('keeps headings as Markdown headings, and they are the sections', async () => {
    const d = await extractDocument('report.docx', await buildDocx([{ heading: 'Harbor', level: 1 }, 'Tides.', { heading: 'Moorings', level: 2 }, 'Ropes.']));
    assert.equal(d.text, '# Harbor\n\nTides.\n\n## Moorings\n\nRopes.');
    assert.deepEqual(
      d.parts.map((p) => [p.label, d.text.slice(p.start, p.start + 5)]),
      [
        ['§ Harbor', '# Har'],
        ['§ Moorings', '## Mo'],
      ],
    );
  });
});

describe('htmlText tables', () => {
  it('renders th/td rows, escapes pipes, pads short rows and spreads a rowspan at the end of a row', () => {
    const html = `<h2>Stock</h2><table><thead><tr><th>Item</th><th>Note</th><th rowspan="3">Shelf A</th></tr></thead>
      <tbody><tr><td>Rope <b>10 m</b></td><td>a|b</td></tr><tr><td>Hook</td></tr></tbody></table><p>After.</p>`;
    assert.equal(
      htmlText(html),
      '## Stock\n\n| Item | Note | Shelf A |\n| --- | --- | --- |\n| Rope 10 m | a\\|b | Shelf A |\n| Hook |  | Shelf A |\n\nAfter.',
    );
  });

  it('flattens a table inside a cell, and keeps list items', () => {
    const html = '<ul><li>one</li><li>two</li></ul><table><tr><td>outer</td><td><table><tr><td>in1</td><td>in2</td></tr></table></td></tr></table>';
    const text = htmlText(html);
    assert.equal(text, '- one\n- two\n\n| outer | in1 in2 |\n| --- | --- |');
  });

  it('a rowspan in the middle of a row shifts the next row\'s cells right', () => {
    const html = '<table><tr><td>a</td><td rowspan="2">B</td><td>c</td></tr><tr><td>d</td><td>e</td></tr></table>';
    assert.equal(htmlText(html), '| a | B | c |\n| --- | --- | --- |\n| d | B | e |');
  });
});
