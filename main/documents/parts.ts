/**
 * The shapes every extractor shares, below them all (extract.ts and the per-format readers
 * import them from here, so no reader imports the dispatcher that imports it): a labelled part
 * of a document's text, and the progress callback of a long extraction.
 */

/** A labelled stretch of the text: a PDF page or a Markdown section, from `start` (UTF-16 offset) to the next part. */
export interface DocumentPart {
  label: string;
  start: number;
}

/**
 * Called while a long file is extracted: the fraction done (0…1) of the text pass (per PDF page),
 * then, with phase 'ocr', of the pages or image being read by OCR.
 */
export type ExtractProgress = (fraction: number, phase?: 'ocr') => void;
