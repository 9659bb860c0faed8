/**
 * How documents appear in a prompt: inside the user turn that carries them, before the question,
 * each between delimiters that name it. The chat template (or, without one, the transcript) then
 * renders that turn like any other, so the engine's tokenizer counts exactly what is fed.
 *
 *   Cite the documents by their passage labels, like [notes.pdf p. 2].
 *
 *   <document name="rope.pdf">
 *   [rope.pdf p. 1]
 *   …the page's text (or of the chosen chunks, each passage under its label: citations.ts)…
 *   </document>
 *
 *   question
 *
 * A document keeps its place in its turn across follow-ups, so the prompt of a follow-up
 * extends the previous one and the engine reuses its KV cache for the whole document.
 */
import type { Chunk } from './chunk.ts';

/** One document, delimited by its name (quotes in the name are replaced so the tag stays whole). */
export function documentBlock(name: string, body: string): string {
  return `<document name="${name.replace(/"/g, "'")}">\n${body}\n</document>`;
}

/**
 * How to cite, said once at the top of a turn that carries documents (in the turn, not the system
 * prompt, so attaching a document later keeps the conversation's KV cache up to that turn).
 */
export const CITATION_NOTE = 'Cite the documents by their passage labels, like [notes.pdf p. 2].';

/** The user turn's text: the citation note and the document blocks, then the question. */
export function userTurnText(question: string, blocks: readonly string[]): string {
  return blocks.length === 0 ? question : `${CITATION_NOTE}\n\n${blocks.join('\n\n')}\n\n${question}`;
}

/** Where a chunk comes from, for the "Used:" list: "page 3, chunk 5" or "chunk 5". */
export function chunkLabel(c: Pick<Chunk, 'part' | 'index'>): string {
  return c.part ? `${c.part}, chunk ${c.index}` : `chunk ${c.index}`;
}

