/**
 * HTML to the text a model reads, with the structure kept: headings become Markdown headings
 * (`## Title`), list items `- item`, and tables Markdown tables, one row per line
 * (`| Region | Product | Units |`, then `| --- | --- | --- |`, then the data rows). Used for HTML
 * attachments and for .docx (mammoth's HTML output), so a question about a row finds the row.
 *
 * Contract: `htmlText(html)` → text; entities decoded, whitespace collapsed, script, style,
 * template and head contents dropped, blocks on their own lines, at most one blank line in a row.
 * Tables: the first row is the header row; a merged cell (colspan / rowspan) is spread: its text
 * repeated in every cell it covers, so each row reads alone; `|` inside a cell is escaped `\|`;
 * rows shorter than the widest are padded with empty cells; a table inside a cell is flattened
 * into that cell's text (cells joined by spaces, rows by `; `). Pure: htmlparser2 only.
 */
import { Parser } from 'htmlparser2';

/** Elements whose content is never text a reader sees. */
const SKIPPED = new Set(['script', 'style', 'noscript', 'template', 'svg', 'head']);
/** Elements that end a line of text. */
const BLOCKS = new Set(['p', 'div', 'br', 'li', 'ul', 'ol', 'tr', 'table', 'section', 'article', 'header', 'footer', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'pre', 'blockquote', 'title', 'hr', 'dd', 'dt']);
/** Block elements without content: one line break, at the opening tag. */
const VOID_BLOCKS = new Set(['br', 'hr']);
const HEADING = /^h([1-6])$/;

/** A cell as written: its text and how many columns and rows it covers. */
interface Cell {
  text: string;
  colspan: number;
  rowspan: number;
}

/** A table being read: its rows of cells, and the cell being filled (null between cells). */
interface TableState {
  rows: Cell[][];
  cell: Cell | null;
}

/** The visible text of an HTML page with headings, lists and tables kept (see the file comment). */
export function htmlText(html: string): string {
  let out = '';
  let skip = 0;
  const tables: TableState[] = [];
  const current = () => tables[tables.length - 1];
  /** Text goes to the innermost open cell, else to the output. */
  const write = (t: string) => {
    const cell = current()?.cell;
    if (cell) cell.text += t;
    else if (tables.length === 0) out += t;
  };
  const parser = new Parser(
    {
      onopentag(tag, attrs) {
        if (SKIPPED.has(tag)) return void skip++;
        if (skip > 0) return;
        const table = current();
        if (tag === 'table') {
          if (table?.cell) table.cell.text += ' ';
          else out += '\n';
          tables.push({ rows: [], cell: null });
        } else if (table && tag === 'tr') table.rows.push([]);
        else if (table && (tag === 'td' || tag === 'th')) {
          if (table.rows.length === 0) table.rows.push([]);
          table.cell = { text: '', colspan: span(attrs.colspan), rowspan: span(attrs.rowspan) };
          table.rows[table.rows.length - 1].push(table.cell);
        } else if (table?.cell) {
          if (BLOCKS.has(tag)) table.cell.text += ' ';
        } else if (BLOCKS.has(tag)) {
          const h = HEADING.exec(tag);
          out += h ? `\n\n${'#'.repeat(Number(h[1]))} ` : tag === 'li' ? '\n- ' : '\n';
        }
      },
      onclosetag(tag) {
        if (SKIPPED.has(tag)) return void (skip = Math.max(0, skip - 1));
        if (skip > 0) return;
        const table = current();
        if (tag === 'table' && table) {
          tables.pop();
          // A table in a cell: its rows as plain text in that cell (a Markdown cell holds one line).
          if (tables.length > 0) write(` ${table.rows.map((r) => r.map((c) => c.text.trim()).join(' ')).join('; ')} `);
          else out += `\n\n${markdownTable(table.rows)}\n\n`;
        } else if (table && (tag === 'td' || tag === 'th')) table.cell = null;
        // A list item's line ends where the next block starts.
        else if (!table && BLOCKS.has(tag) && !VOID_BLOCKS.has(tag) && tag !== 'li') out += HEADING.test(tag) ? '\n\n' : '\n';
      },
      ontext(t) {
        if (skip === 0) write(t.replace(/[ \t\r\n\f]+/g, ' '));
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.write(html);
  parser.end();
  return out.split('\n').map(tidyLine).join('\n').replace(/\n{3,}/g, '\n\n').trim();
}

/** A line trimmed, with one space after a heading's `#`s or a list item's `-` (an empty item: ''). */
function tidyLine(line: string): string {
  const m = /^\s*(#{1,6} |- )\s*(.*?)\s*$/.exec(line);
  if (!m) return line.trim();
  return m[2] ? `${m[1]}${m[2]}` : '';
}

/** A colspan / rowspan attribute as a count in [1, 1000] (absent or bad: 1). */
function span(value: string | undefined): number {
  const n = Number.parseInt(value ?? '1', 10);
  return Number.isFinite(n) && n >= 1 ? Math.min(n, 1000) : 1;
}

/**
 * Rows of cells as a Markdown table: merged cells spread over the grid they cover, the first
 * row as header. Empty rows are left out; an empty table is ''.
 */
export function markdownTable(rows: readonly Cell[][]): string {
  const grid: string[][] = [];
  // rowspans still open: column → [text, rows left]
  const open = new Map<number, [string, number]>();
  for (const row of rows) {
    const line: string[] = [];
    const place = (text: string) => {
      while (open.has(line.length)) {
        const [t, left] = open.get(line.length)!;
        if (left <= 1) open.delete(line.length);
        else open.set(line.length, [t, left - 1]);
        line.push(t);
      }
      line.push(text);
    };
    for (const cell of row) {
      const text = cell.text.replace(/\s+/g, ' ').trim().replace(/\|/g, '\\|');
      const at = line.length + countOpenFrom(open, line.length);
      for (let c = 0; c < cell.colspan; c++) {
        place(text);
        if (cell.rowspan > 1) open.set(at + c, [text, cell.rowspan - 1]);
      }
    }
    // Cells of rowspans from above that lie after this row's last cell.
    for (const col of [...open.keys()].sort((a, b) => a - b)) {
      if (col < line.length) continue;
      while (line.length < col) line.push('');
      place('');
      line.pop();
    }
    if (line.length > 0) grid.push(line);
  }
  if (grid.length === 0) return '';
  const width = Math.max(...grid.map((r) => r.length));
  const md = (r: string[]) => `| ${[...r, ...Array<string>(width - r.length).fill('')].join(' | ')} |`;
  return [md(grid[0]), md(Array<string>(width).fill('---')), ...grid.slice(1).map(md)].join('\n');
}

/** How many rowspan cells from above sit at `from` and right after it (they come before the next cell). */
function countOpenFrom(open: Map<number, unknown>, from: number): number {
  let n = 0;
  while (open.has(from + n)) n++;
  return n;
}
