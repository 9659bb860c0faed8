/**
 * The base of every typed error in the project, below all layers (the engine, documents, services and
 * the transports each derive their own): a stable `code` for programs and a `message` that is one
 * readable sentence for a person; `name` is the concrete class's. Plus `firstLine`, the one rule for
 * turning anything thrown (ONNX Runtime's messages are multi-line) into one sentence.
 * Imports nothing.
 */

/** A typed error: `code` identifies the failure kind (it crosses IPC and worker boundaries), `message` is one sentence. */
export class CodedError<Code extends string = string> extends Error {
  readonly code: Code;
  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The first line of an error's message (or of `String(e)` for anything else thrown): one sentence for a report. */
export function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}
