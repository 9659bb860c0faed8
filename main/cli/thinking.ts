/**
 * The chat CLI's way of showing a reasoning model's thinking: on stderr, so stdout carries the
 * answer alone (a pipe gets just the answer), framed as Ollama's CLI frames it: a "Thinking..."
 * line, the reasoning (dimmed on a terminal: SGR 2 … SGR 22, nothing on a pipe), then
 * "...done thinking." and a blank line before the answer starts. `end()` closes the frame when
 * the reply stopped while still thinking.
 */
import type { ReplyPart } from '../engine/generate/reasoning.ts';

const DIM = '\x1b[2m';
const UNDIM = '\x1b[22m';

/** Writes reasoning deltas framed on `err`; returns whether it took the delta (false: the answer's, for stdout). */
export class ThinkingPrinter {
  private open = false;

  /** `write`: where the reasoning goes (stderr); `tty`: dim it. */
  constructor(private readonly write: (s: string) => void, private readonly tty: boolean) {}

  /** Takes a delta: reasoning is written here; the first answer text after it closes the frame. */
  take(part: ReplyPart, text: string): boolean {
    if (part === 'content') {
      if (text) this.end();
      return false;
    }
    if (!text) return true;
    if (!this.open) this.write(`${this.tty ? DIM : ''}Thinking...\n`);
    this.open = true;
    this.write(text);
    return true;
  }

  /** Closes the frame if it is open (the answer started, or the reply ended inside it). */
  end(): void {
    if (!this.open) return;
    this.open = false;
    this.write(`\n...done thinking.${this.tty ? UNDIM : ''}\n\n`);
  }
}
