/**
 * Limits shared by the contract's schemas and the code that enforces them, as plain constants: no
 * zod, no Node, so the document extraction worker (main/documents/) can import them without loading
 * the schemas.
 */

/** Largest file accepted as a document, bytes (16 MiB: far above a document that fits any max context). */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;
