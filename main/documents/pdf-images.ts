/**
 * The images a PDF page paints, as bytes an OCR engine decodes: what a scanned page is.
 *
 * Why not render the page: pdf.js renders only onto a canvas, and Node has none without a native
 * canvas package (unpdf's `renderPageAsImage` needs `@napi-rs/canvas`), so the page's own images
 * are taken instead: its operator list's `paintImageXObject` / `paintInlineImageXObject` ops,
 * decoded by pdf.js (JPEG, Flate, CCITT, JBIG2 …) into pixels, made grey and written as PGM.
 * Image masks (`paintImageMaskXObject`: 1-bit stencils) and vector-drawn text are not read.
 *
 * Contract: `pageImages(page)` → PGM (P5) bytes of each image at least `MIN_OCR_PIXELS` large,
 * in paint order, at the image's own resolution.
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

/** See the file comment. */
export async function pageImages(page: PdfPage): Promise<Uint8Array[]> {
  const { getResolvedPDFJS } = await import('unpdf');
  const { OPS } = await getResolvedPDFJS();
  const list = await page.getOperatorList();
  const out: Uint8Array[] = [];
  for (let k = 0; k < list.fnArray.length; k++) {
    const fn = list.fnArray[k];
    let image: DecodedImage | null = null;
    if (fn === OPS.paintImageXObject) image = await objectOf(page, list.argsArray[k][0] as string);
    else if (fn === OPS.paintInlineImageXObject) image = list.argsArray[k][0] as DecodedImage;
    if (image?.data && image.width * image.height >= MIN_OCR_PIXELS) {
      const grey = toGrey(image);
      if (grey) out.push(pgm(image.width, image.height, grey));
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
