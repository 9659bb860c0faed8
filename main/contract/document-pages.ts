/**
 * The one wording of what happened to a document's pages, for the CLI's stderr notes and the
 * window's document chip: which pages were read by OCR, and which have no text at all (left out
 * of the prompt, never silently). Dependency-free, so the renderer imports it as is.
 *
 * Contract: `pageList([4, 5, 6, 9])` → "4–6, 9"; `ocrNote(info)` and `noTextWarning(info)` → one
 * sentence each, or null when there is nothing to say.
 */

/** What the wording needs of a document. */
export interface PageFacts {
  kind: string;
  ocrPages?: readonly number[];
  pagesWithoutText?: readonly number[];
}

/** Ascending page numbers written with ranges of three or more: [1, 2, 3, 5] → "1–3, 5". */
export function pageList(pages: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < pages.length; ) {
    let j = i;
    while (j + 1 < pages.length && pages[j + 1] === pages[j] + 1) j++;
    if (j - i >= 2) out.push(`${pages[i]}–${pages[j]}`);
    else for (let k = i; k <= j; k++) out.push(String(pages[k]));
    i = j + 1;
  }
  return out.join(', ');
}

function pages(n: readonly number[]): string {
  return `${n.length === 1 ? 'page' : 'pages'} ${pageList(n)}`;
}

/** "read by OCR" (an image) or "pages 4–5 read by OCR"; null when OCR read nothing. */
export function ocrNote(d: PageFacts): string | null {
  if (!d.ocrPages?.length) return null;
  return d.kind === 'image' ? 'text read by OCR' : `${pages(d.ocrPages)} read by OCR`;
}

/** "pages 4–5 have no text (…): left out"; null when every page has text. */
export function noTextWarning(d: PageFacts): string | null {
  const n = d.pagesWithoutText;
  if (!n?.length) return null;
  return `${pages(n)} ${n.length === 1 ? 'has' : 'have'} no text (no text layer, and OCR found none): left out`;
}
