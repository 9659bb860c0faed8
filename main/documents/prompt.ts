/**
 * How documents appear in a prompt: inside the user turn that carries them, before the question,
 * each between delimiters that name it. The chat template (or, without one, the transcript) then
 * renders that turn like any other, so the engine's tokenizer counts exactly what is fed.
 *
 *   <document name="rope.pdf">
 *   …extracted text, or the chosen chunks each headed "[page 3, chunk 5]"…
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

/** The user turn's text: the document blocks, then the question. */
export function userTurnText(question: string, blocks: readonly string[]): string {
  return blocks.length === 0 ? question : `${blocks.join('\n\n')}\n\n${question}`;
}

/** Where a chunk comes from, for the reader and the model: "page 3, chunk 5" or "chunk 5". */
export function chunkLabel(c: Pick<Chunk, 'part' | 'index'>): string {
  return c.part ? `${c.part}, chunk ${c.index}` : `chunk ${c.index}`;
}

/** The body of a document given by some of its chunks (in document order), each under its label. */
export function chunksBody(chunks: readonly Chunk[]): string {
  return chunks.map((c) => `[${chunkLabel(c)}]\n${c.text.trim()}`).join('\n\n');
}
