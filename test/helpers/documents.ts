/**
 * Document fixtures the tests write themselves (nothing downloaded, nothing committed but this
 * code): PDFs built object by object (with a text layer, without one, "encrypted" with a
 * password nobody knows), a .docx zipped with jszip (mammoth's own zip library), and a corrupt
 * file. The PDF writer computes a correct cross-reference table, so readers take the fast path.
 */
import JSZip from 'jszip';
import { mulberry32 } from './prng.ts';

/** Escapes a string for a PDF literal string `( … )`. */
function pdfString(s: string): string {
  return `(${s.replace(/[\\()]/g, (c) => `\\${c}`)})`;
}

/** A string drawn at a place on the page (page units from the bottom left), in the order given. */
export interface PlacedLine {
  x: number;
  y: number;
  text: string;
}

/** A scanned page: one JPEG covering the whole page, no text layer. */
export interface ScannedPage {
  jpeg: Buffer;
  /** Pixels. */
  width: number;
  height: number;
}

/** A typed page with a scanned image pasted in: its lines, and the image drawn over `at` (page units, from the bottom left). */
export interface MixedPage {
  lines: readonly PlacedLine[];
  image: ScannedPage;
  at: { x: number; y: number; width: number; height: number };
}

/** Content stream of a page: lines one under the other from the top (14 pt leading), or each string at its place. */
function textOps(lines: readonly string[] | readonly PlacedLine[]): string {
  const placed = lines.filter((l): l is PlacedLine => typeof l !== 'string');
  if (placed.length === 0) return `BT /F1 12 Tf 14 TL 72 740 Td ${(lines as string[]).map((l) => `${pdfString(l)} '`).join(' ')} ET`;
  return `BT /F1 12 Tf ${placed.map((l) => `1 0 0 1 ${l.x} ${l.y} Tm ${pdfString(l.text)} Tj`).join(' ')} ET`;
}

/**
 * A PDF of Letter-sized pages. Each page is a list of lines drawn in Helvetica 12 pt (or of
 * strings drawn at given places, in the order given: the content stream's order; or a scanned
 * page, one JPEG); a page given as `null` has no text at all, only a filled rectangle (what a scan looks like to a text
 * extractor). With `encrypted`, the trailer carries a standard security handler (R2) whose user
 * password is not empty, so a reader must refuse it without a password.
 */
export function buildPdf(pages: (readonly string[] | readonly PlacedLine[] | ScannedPage | MixedPage | null)[], opts: { encrypted?: boolean } = {}): Buffer {
  const objects: string[] = [];
  const fontId = 3;
  const pageIds: number[] = [];
  // 1: catalog, 2: pages, 3: font, then per page: page object + content stream.
  objects[1] = `<< /Type /Catalog /Pages 2 0 R >>`;
  objects[fontId] = `<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>`;
  let next = 4;
  for (const lines of pages) {
    const pageId = next++;
    const contentId = next++;
    pageIds.push(pageId);
    let ops: string;
    let images = '';
    const jpegObject = (im: ScannedPage) => {
      const imageId = next++;
      // The JPEG's bytes as they are (latin1 keeps every byte), decoded by the reader (DCTDecode).
      objects[imageId] = `<< /Type /XObject /Subtype /Image /Width ${im.width} /Height ${im.height} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode /Length ${im.jpeg.length} >>\nstream\n${im.jpeg.toString('latin1')}\nendstream`;
      images = ` /XObject << /Im1 ${imageId} 0 R >>`;
    };
    if (lines === null) ops = `0.5 g 72 72 400 600 re f`;
    else if ('jpeg' in lines) {
      jpegObject(lines);
      ops = `q 612 0 0 792 0 0 cm /Im1 Do Q`;
    } else if ('image' in lines) {
      jpegObject(lines.image);
      const { x, y, width, height } = lines.at;
      ops = `${textOps(lines.lines)} q ${width} 0 0 ${height} ${x} ${y} cm /Im1 Do Q`;
    } else ops = textOps(lines);
    objects[pageId] = `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${contentId} 0 R /Resources << /Font << /F1 ${fontId} 0 R >>${images} >> >>`;
    objects[contentId] = `<< /Length ${Buffer.byteLength(ops, 'latin1')} >>\nstream\n${ops}\nendstream`;
  }
  objects[2] = `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(' ')}] /Count ${pageIds.length} >>`;
  let encryptRef = '';
  if (opts.encrypted) {
    const id = next++;
    const hex32 = (seed: number) => Array.from({ length: 32 }, (_, i) => ((i * 37 + seed) & 0xff).toString(16).padStart(2, '0')).join('');
    objects[id] = `<< /Filter /Standard /V 1 /R 2 /Length 40 /O <${hex32(11)}> /U <${hex32(97)}> /P -44 >>`;
    encryptRef = ` /Encrypt ${id} 0 R /ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>]`;
  }
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  for (let i = 1; i < objects.length; i++) {
    offsets[i] = Buffer.byteLength(out, 'latin1');
    out += `${i} 0 obj\n${objects[i]}\nendobj\n`;
  }
  const xrefAt = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${objects.length}\n0000000000 65535 f \n`;
  for (let i = 1; i < objects.length; i++) out += `${String(offsets[i]).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length} /Root 1 0 R${encryptRef} >>\nstartxref\n${xrefAt}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

function xmlEscape(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

/** A table cell of a .docx fixture: `span` columns wide; `merge` starts ('restart') or continues a vertical merge. */
export interface DocxCell {
  text: string;
  span?: number;
  merge?: 'restart' | 'continue';
}

/** A block of a .docx fixture: a paragraph, a heading (Word's "heading N" style) or a table (rows of cells). */
export type DocxBlock = string | { heading: string; level: 1 | 2 | 3 } | { table: (string | DocxCell)[][] };

function docxParagraph(text: string, style?: string): string {
  const props = style ? `<w:pPr><w:pStyle w:val="${style}"/></w:pPr>` : '';
  return `<w:p>${props}<w:r><w:t xml:space="preserve">${xmlEscape(text)}</w:t></w:r></w:p>`;
}

function docxTable(rows: (string | DocxCell)[][]): string {
  const cols = Math.max(...rows.map((r) => r.reduce((n, c) => n + (typeof c === 'string' ? 1 : (c.span ?? 1)), 0)));
  const grid = `<w:tblGrid>${'<w:gridCol w:w="2000"/>'.repeat(cols)}</w:tblGrid>`;
  const cell = (c: string | DocxCell) => {
    const d = typeof c === 'string' ? { text: c } : c;
    const props = [d.span ? `<w:gridSpan w:val="${d.span}"/>` : '', d.merge === 'restart' ? '<w:vMerge w:val="restart"/>' : d.merge === 'continue' ? '<w:vMerge/>' : ''].join('');
    return `<w:tc><w:tcPr>${props}</w:tcPr>${docxParagraph(d.text)}</w:tc>`;
  };
  return `<w:tbl><w:tblPr/>${grid}${rows.map((r) => `<w:tr>${r.map(cell).join('')}</w:tr>`).join('')}</w:tbl>`;
}

const DOCX_STYLES = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">${[1, 2, 3]
  .map((n) => `<w:style w:type="paragraph" w:styleId="Heading${n}"><w:name w:val="heading ${n}"/></w:style>`)
  .join('')}</w:styles>`;

/** A minimal .docx (WordprocessingML): one paragraph per string, headings and tables as given. */
export async function buildDocx(blocks: readonly DocxBlock[]): Promise<Buffer> {
  const zip = new JSZip();
  zip.file(
    '[Content_Types].xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>
</Types>`,
  );
  zip.file(
    '_rels/.rels',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>`,
  );
  zip.file(
    'word/_rels/document.xml.rels',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>
</Relationships>`,
  );
  zip.file('word/styles.xml', DOCX_STYLES);
  const body = blocks
    .map((b) => (typeof b === 'string' ? docxParagraph(b) : 'heading' in b ? docxParagraph(b.heading, `Heading${b.level}`) : docxTable(b.table)))
    .join('');
  zip.file(
    'word/document.xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`,
  );
  return zip.generateAsync({ type: 'nodebuffer' });
}

/**
 * About `chars` characters of sentences drawn from a small vocabulary (seeded: `mulberry32`), in
 * paragraphs of 2–6 sentences of 6–19 words, one sentence in 50 ending "barrels of tar number N"
 * (N counting up): text that does not repeat, as a book does not (a repeated paragraph would let
 * a count cache answer everything).
 */
export function variedText(chars: number, seed = 12345): string {
  const r = mulberry32(seed);
  const words = 'the a ropewalk hemp rope ship harbour tar sailor knot bowline day night long short twisted into for of and was were master counted mast sail wind sea boat net fish quay ferry dawn noon dry wet old new little girl boy dog cat ran walked saw said happy sad big small red blue green tree house town river'.split(' ');
  const out: string[] = [];
  let length = 0;
  let n = 0;
  while (length < chars) {
    const sentences = Array.from({ length: 2 + Math.floor(r() * 5) }, () => {
      const w = Array.from({ length: 6 + Math.floor(r() * 14) }, () => words[Math.floor(r() * words.length)]);
      if (r() < 0.02) w.push(`barrels of tar number ${n++}`);
      const s = w.join(' ');
      return `${s[0].toUpperCase()}${s.slice(1)}.`;
    });
    const para = `${sentences.join(' ')}\n\n`;
    out.push(para);
    length += para.length;
  }
  return out.join('');
}
