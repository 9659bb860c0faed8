/**
 * Reading order of a PDF page from the positions of its text, not from the order its content
 * stream draws it: a two-column page drawn line by line across both columns reads column by column.
 *
 * Contract: `layoutPageText(items)` → the page's text. `items` are pdf.js text items reduced to
 * their baseline origin (`x`, `y`, page units, y up), advance `width`, font `size` and string.
 *   1. Lines: items whose baselines lie within 0.4 × font size of each other, left to right.
 *   2. Segments: a line splits where the gap between two items exceeds one font size (a gutter
 *      or a table column, never a word space); inside a segment a gap over 0.15 × size is a space.
 *   3. Recursive XY-cut (Nagy & Seth, 1984): a region is cut first at a vertical gutter — an x
 *      range no segment of the region covers, at least one font size wide, with prose on both
 *      sides (each side ≥ 2 segments averaging ≥ 12 characters, so a table of short cells stays
 *      row by row) — left side first; else at the horizontal gaps over 1.6 × the region's median
 *      line spacing, top first; else it is read line by line (a line's segments joined by a space).
 *      Regions are separated by a blank line, lines by a newline.
 * A page laid out in one column comes out as its lines, top to bottom, as before.
 */

/** A text item as the layout needs it (from pdf.js `getTextContent`: transform[4], transform[5], width, height). */
export interface PlacedText {
  str: string;
  /** Baseline origin, page units (1/72 in), y growing upwards. */
  x: number;
  y: number;
  /** Advance width, page units. */
  width: number;
  /** Font size, page units (> 0). */
  size: number;
}

/** A run of items on one line with no gutter inside. */
interface Segment {
  text: string;
  x0: number;
  x1: number;
  y: number;
  size: number;
  /** Index of its line, top to bottom. */
  line: number;
}

const SAME_LINE = 0.4;
const SEGMENT_GAP = 1.0;
const WORD_GAP = 0.15;
const PARAGRAPH_GAP = 1.6;
const PROSE_CHARS = 12;

/** The page's text in reading order (see the file comment); '' for a page without text. */
export function layoutPageText(items: readonly PlacedText[]): string {
  const segments = toSegments(items.filter((i) => i.str.trim().length > 0 && i.size > 0));
  return readRegion(segments).trim();
}

/** Steps 1 and 2: lines top to bottom, each cut into segments at gaps wider than a font size. */
function toSegments(items: PlacedText[]): Segment[] {
  const sorted = [...items].sort((a, b) => b.y - a.y || a.x - b.x);
  const lines: PlacedText[][] = [];
  for (const item of sorted) {
    const line = lines[lines.length - 1];
    if (line && Math.abs(line[0].y - item.y) <= SAME_LINE * Math.min(line[0].size, item.size)) line.push(item);
    else lines.push([item]);
  }
  const out: Segment[] = [];
  lines.forEach((line, index) => {
    line.sort((a, b) => a.x - b.x);
    let seg: Segment | null = null;
    for (const item of line) {
      const gap = seg ? item.x - seg.x1 : 0;
      if (!seg || gap > SEGMENT_GAP * Math.max(seg.size, item.size)) {
        seg = { text: item.str, x0: item.x, x1: item.x + item.width, y: item.y, size: item.size, line: index };
        out.push(seg);
        continue;
      }
      const spaced = /\s$/.test(seg.text) || /^\s/.test(item.str) || gap <= WORD_GAP * item.size;
      seg.text += (spaced ? '' : ' ') + item.str;
      seg.x1 = Math.max(seg.x1, item.x + item.width);
      seg.size = Math.max(seg.size, item.size);
    }
  });
  return out;
}

/** Step 3: a region in reading order. */
function readRegion(segments: Segment[]): string {
  if (segments.length <= 1) return segments.map((s) => s.text.trim()).join('');
  const columns = verticalCut(segments);
  if (columns) return columns.map(readRegion).join('\n\n');
  const bands = horizontalCuts(segments);
  if (bands) return bands.map(readRegion).join('\n\n');
  return readLines(segments);
}

/** The region split at its widest gutter with prose on both sides, or null. */
function verticalCut(segments: Segment[]): [Segment[], Segment[]] | null {
  const byX = [...segments].sort((a, b) => a.x0 - b.x0);
  const size = median(segments.map((s) => s.size));
  let reach = byX[0].x1;
  let best: { at: number; width: number } | null = null;
  for (let i = 1; i < byX.length; i++) {
    const gap = byX[i].x0 - reach;
    if (gap >= size && (!best || gap > best.width)) {
      const at = reach + gap / 2;
      if (isProse(segments.filter((s) => s.x1 <= at)) && isProse(segments.filter((s) => s.x0 >= at))) best = { at, width: gap };
    }
    reach = Math.max(reach, byX[i].x1);
  }
  if (!best) return null;
  const at = best.at;
  return [segments.filter((s) => s.x1 <= at), segments.filter((s) => s.x0 >= at)];
}

function isProse(side: Segment[]): boolean {
  return side.length >= 2 && side.reduce((n, s) => n + s.text.trim().length, 0) / side.length >= PROSE_CHARS;
}

/** The region cut where the space between two lines exceeds 1.6 × its median spacing, or null. */
function horizontalCuts(segments: Segment[]): Segment[][] | null {
  const lineYs = [...new Map(segments.map((s) => [s.line, s.y])).entries()].sort((a, b) => a[0] - b[0]);
  if (lineYs.length < 3) return null;
  const gaps = lineYs.slice(1).map(([, y], i) => lineYs[i][1] - y);
  const limit = PARAGRAPH_GAP * median(gaps);
  const bands: Segment[][] = [[]];
  const bandOf = new Map<number, number>();
  lineYs.forEach(([line], i) => {
    if (i > 0 && gaps[i - 1] > limit) bands.push([]);
    bandOf.set(line, bands.length - 1);
  });
  if (bands.length < 2) return null;
  for (const s of segments) bands[bandOf.get(s.line)!].push(s);
  return bands;
}

/** Lines top to bottom; a line's segments left to right, joined by a space. */
function readLines(segments: Segment[]): string {
  const lines = new Map<number, Segment[]>();
  for (const s of segments) lines.set(s.line, [...(lines.get(s.line) ?? []), s]);
  return [...lines.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([, segs]) => segs.sort((a, b) => a.x0 - b.x0).map((s) => s.text.trim()).join(' '))
    .join('\n');
}

function median(values: readonly number[]): number {
  const v = [...values].sort((a, b) => a - b);
  return v.length === 0 ? 0 : v[Math.floor((v.length - 1) / 2)];
}
