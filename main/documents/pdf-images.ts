/**
 * The images a PDF page paints, as bytes an OCR engine decodes: what a scanned page is.
 *
 * Why not render the page: pdf.js renders only onto a canvas, and Node has none without a native
 * canvas package (unpdf's `renderPageAsImage` needs `@napi-rs/canvas`), so the page's own images
 * are taken instead: its operator list's `paintImageXObject` / `paintInlineImageXObject` ops,
 * decoded by pdf.js (JPEG, Flate, CCITT, JBIG2 …) into pixels, made grey and written as PGM.
 * Image masks (`paintImageMaskXObject`: 1-bit stencils) and vector-drawn text are not read.
 *
 * Contract: `pageImages(page)` → each image at least `MIN_OCR_PIXELS` large, in paint order: its
 * PGM (P5) bytes at the image's own resolution and the box it covers on the page (page units,
 * y up: the unit square through the current transformation matrix, tracked through the
 * operator list's save / restore / transform and form XObjects' matrices).
 */
type PdfPage = Awaited<ReturnType<Awaited<ReturnType<typeof import('unpdf').getDocumentProxy>>['getPage']>>;

/** Smaller images (icons, rules, logos) hold no page of text. */
export const MIN_OCR_PIXELS = 200 * 50;

/** pdf.js's decoded image: `kind` 1 = 1 bit grey (rows padded to bytes), 2 = RGB, 3 = RGBA. */
interface DecodedImage {
  width: number;
  height: number;
  kind?: number;
  data?: Uint8Array | Uint8ClampedArray;
}

/** Where an image lies on its page: page units, y up. */
export interface PageBox {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export interface PageImage {
  /** PGM (P5) bytes. */
  bytes: Uint8Array;
  box: PageBox;
}

/** A PDF matrix [a b c d e f]: x' = a x + c y + e, y' = b x + d y + f. */
type Matrix = [number, number, number, number, number, number];

/** m × n: n applied first (PDF's `cm` premultiplies the current matrix). */
function multiply(n: Matrix, m: Matrix): Matrix {
  return [n[0] * m[0] + n[1] * m[2], n[0] * m[1] + n[1] * m[3], n[2] * m[0] + n[3] * m[2], n[2] * m[1] + n[3] * m[3], n[4] * m[0] + n[5] * m[2] + m[4], n[4] * m[1] + n[5] * m[3] + m[5]];
}

/** The unit square's corners through `m`, as a box. */
function unitBox(m: Matrix): PageBox {
  const xs = [m[4], m[0] + m[4], m[2] + m[4], m[0] + m[2] + m[4]];
  const ys = [m[5], m[1] + m[5], m[3] + m[5], m[1] + m[3] + m[5]];
  return { x0: Math.min(...xs), y0: Math.min(...ys), x1: Math.max(...xs), y1: Math.max(...ys) };
}

/** See the file comment. */
export async function pageImages(page: PdfPage): Promise<PageImage[]> {
  const { getResolvedPDFJS } = await import('unpdf');
  const { OPS } = await getResolvedPDFJS();
  const list = await page.getOperatorList();
  const out: PageImage[] = [];
  let ctm: Matrix = [1, 0, 0, 1, 0, 0];
  const saved: Matrix[] = [];
  for (let k = 0; k < list.fnArray.length; k++) {
    const fn = list.fnArray[k];
    const args = list.argsArray[k];
    if (fn === OPS.save) saved.push(ctm);
    else if (fn === OPS.restore) ctm = saved.pop() ?? ctm;
    else if (fn === OPS.transform) ctm = multiply(args as Matrix, ctm);
    else if (fn === OPS.paintFormXObjectBegin) {
      saved.push(ctm);
      if (Array.isArray(args[0])) ctm = multiply(args[0] as Matrix, ctm);
    } else if (fn === OPS.paintFormXObjectEnd) ctm = saved.pop() ?? ctm;
    let image: DecodedImage | null = null;
    if (fn === OPS.paintImageXObject) image = await objectOf(page, args[0] as string);
    else if (fn === OPS.paintInlineImageXObject) image = args[0] as DecodedImage;
    if (image?.data && image.width * image.height >= MIN_OCR_PIXELS) {
      const grey = toGrey(image);
      if (grey) out.push({ bytes: pgm(image.width, image.height, grey), box: unitBox(ctm) });
    }
  }
  return out;
}

/** A page or document object by id, once pdf.js has decoded it. */
function objectOf(page: PdfPage, id: string): Promise<DecodedImage | null> {
  const objs = id.startsWith('g_') ? page.commonObjs : page.objs;
  return new Promise((resolve) => objs.get(id, (data: unknown) => resolve((data as DecodedImage) ?? null)));
}

/** One byte of grey per pixel (ITU-R BT.601 luma weights for colour), or null for an unknown kind. */
function toGrey({ width, height, kind, data }: DecodedImage): Uint8Array | null {
  const n = width * height;
  const grey = new Uint8Array(n);
  if (kind === 1) {
    const stride = Math.ceil(width / 8);
    for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) grey[y * width + x] = (data![y * stride + (x >> 3)] >> (7 - (x & 7))) & 1 ? 255 : 0;
    return grey;
  }
  const channels = kind === 2 ? 3 : kind === 3 ? 4 : 0;
  if (channels === 0 || data!.length < n * channels) return null;
  for (let i = 0; i < n; i++) {
    const p = i * channels;
    grey[i] = Math.round(0.299 * data![p] + 0.587 * data![p + 1] + 0.114 * data![p + 2]);
  }
  return grey;
}

/** A binary PGM (netpbm P5) image: a text header, then the grey bytes row by row. */
export function pgm(width: number, height: number, grey: Uint8Array): Uint8Array {
  const header = new TextEncoder().encode(`P5\n${width} ${height}\n255\n`);
  const out = new Uint8Array(header.length + grey.length);
  out.set(header);
  out.set(grey, header.length);
  return out;
}
