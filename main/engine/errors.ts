/**
 * The engine's typed errors. Every failure the engine can report is one of these: a stable
 * `code` for programs (it crosses IPC and worker boundaries as `{ code, message }`) and a
 * `message` that is one readable sentence for a person. Never throw a bare `Error` from
 * engine code.
 */

import { CodedError } from '../common/errors.ts';
import { withLoadAdvice } from './load-advice.ts';

export { firstLine } from '../common/errors.ts';

export type EngineErrorCode =
  | 'MODEL_LOAD'
  | 'CONTEXT_OVERFLOW'
  | 'SESSION_RUN'
  | 'INVALID_OPTION'
  | 'TOKENIZER'
  | 'WORKER_CRASHED'
  | 'CANCELLED'
  /** A remote engine (an OpenAI-compatible server) failed; see main/remote/errors.ts. */
  | 'REMOTE';

/** Base class: `code` identifies the failure kind, `message` is one sentence for the user. */
export class EngineError extends CodedError<EngineErrorCode> {
  constructor(code: EngineErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }

  /** Plain object for structured clone across worker / IPC boundaries. */
  toJSON(): SerializedEngineError {
    return { code: this.code, name: this.name, message: this.message };
  }
}

/**
 * A model file or folder cannot be read, is corrupt, or is unsupported. `file` names it; the
 * message ends with what to do about it (load-advice.ts).
 */
export class ModelLoadError extends EngineError {
  readonly file: string | undefined;
  constructor(message: string, file?: string, options?: { cause?: unknown }) {
    super('MODEL_LOAD', withLoadAdvice(message, file), options);
    this.file = file;
  }
}

/** The native addon is not available here (not built, cannot be loaded, no runtime library); `reason` is one
 *  line. The engine then runs on the JS backend and says why; it never reaches the user as a failure. */
export class NativeUnavailableError extends EngineError {
  constructor(readonly reason: string) {
    super('MODEL_LOAD', reason);
  }
}

/** A model tensor is stored in a type the importer cannot read (e.g. GGUF `IQ2_XXS`). */
export class UnsupportedTensorTypeError extends ModelLoadError {
  readonly tensor: string;
  readonly tensorType: string;
  constructor(tensor: string, tensorType: string, supported: readonly string[], file?: string) {
    super(`tensor ${tensor} has type ${tensorType}, which is not supported (supported: ${supported.join(', ')})`, file);
    this.tensor = tensor;
    this.tensorType = tensorType;
  }
}

/**
 * Positions [0, requested) do not fit in the configured max context. Raised before any tensor
 * is touched, so the RoPE and KV caches stay usable.
 */
export class ContextOverflowError extends EngineError {
  readonly requested: number;
  readonly maxContext: number;
  /** `atLeast`: `requested` is a lower bound (the count stopped once past the max context). */
  constructor(requested: number, maxContext: number, what = 'the sequence', atLeast = false) {
    super(
      'CONTEXT_OVERFLOW',
      `${what} needs ${atLeast ? 'at least ' : ''}${requested} positions but the max context is ${maxContext}`,
    );
    this.requested = requested;
    this.maxContext = maxContext;
  }
}

/** ONNX Runtime failed inside `session.run`; `inputShapes` records what was fed. */
export class SessionRunError extends EngineError {
  readonly inputShapes: Record<string, readonly number[]>;
  constructor(message: string, inputShapes: Record<string, readonly number[]>, options?: { cause?: unknown }) {
    const shapes = Object.entries(inputShapes)
      .map(([k, s]) => `${k}[${s.join(',')}]`)
      .join(' ');
    super('SESSION_RUN', `ONNX Runtime run failed: ${message} (inputs: ${shapes})`, options);
    this.inputShapes = inputShapes;
  }
}

/** A generation or load option is out of range; the message quotes the bad value. */
export class InvalidOptionError extends EngineError {
  readonly option: string;
  constructor(option: string, message: string) {
    super('INVALID_OPTION', `invalid ${option}: ${message}`);
    this.option = option;
  }
}

/**
 * A JSON Schema (response_format) uses a keyword or a combination constrained decoding does not
 * cover; `keyword` names it and `path` is where it sits (a JSON Pointer, "" for the root).
 */
export class UnsupportedSchemaError extends InvalidOptionError {
  constructor(
    readonly keyword: string,
    readonly path: string,
    why: string,
  ) {
    super('response_format', `the JSON Schema keyword "${keyword}" at ${JSON.stringify(path || '/')} ${why}`);
  }
}

/** The tokenizer is missing, corrupt, or does not match the model; the message ends with what to do. */
export class TokenizerError extends EngineError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('TOKENIZER', withLoadAdvice(message), options);
  }
}

/** How a chat template failed: it does not parse, it failed, it called raise_exception, or a limit. */
export type TemplateFailure = 'syntax' | 'render' | 'raised' | 'limit';

/**
 * A chat template failed. `detail` is the phrase after "the chat template", e.g. "has a syntax
 * error: …"; `origin`, when known, names where the template came from (a file, GGUF metadata).
 */
export class TemplateError extends TokenizerError {
  constructor(readonly kind: TemplateFailure, readonly detail: string, origin?: string, options?: { cause?: unknown }) {
    super(`the chat template${origin ? ` in ${origin}` : ''} ${detail}`, options);
    this.name = 'TemplateError';
  }
}

/**
 * A chat template passed a rendering limit (evaluation steps, characters produced, wall time,
 * memory): it is stopped, not run on. `detail` says which, e.g. "ran longer than 1000 ms".
 */
export class TemplateLimitError extends TemplateError {
  constructor(detail: string, origin?: string) {
    super('limit', detail, origin);
    this.name = 'TemplateLimitError';
    this.message = this.message.replace(detail, `${detail} and was stopped`);
  }
}

/** The engine worker thread exited or crashed; the host restarts it. */
export class WorkerCrashedError extends EngineError {
  constructor(message: string) {
    super('WORKER_CRASHED', message);
  }
}

export interface SerializedEngineError {
  code: EngineErrorCode;
  name: string;
  message: string;
}

/** Rebuilds a typed error from its serialized form (worker → host). Unknown codes stay EngineError. */
export function deserializeEngineError(e: SerializedEngineError): EngineError {
  const err = e.code === 'WORKER_CRASHED' ? new WorkerCrashedError(e.message) : new EngineError(e.code, e.message);
  err.name = e.name;
  return err;
}

/** Converts anything thrown into an EngineError, keeping typed ones as they are. */
export function toEngineError(e: unknown, fallback: EngineErrorCode = 'SESSION_RUN'): EngineError {
  if (e instanceof EngineError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new EngineError(fallback, message, { cause: e });
}

