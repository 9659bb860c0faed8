/**
 * The services' domain error: a stable `code` (NOT_FOUND, BUSY, CONTEXT_FULL, MODEL_NOT_READY,
 * SHUT_DOWN, CANCELLED, INVALID_REQUEST, NOTHING_TO_REGENERATE, DATA_DIR, SCHEMA_TOO_NEW,
 * QUEUE_FULL, NOT_SAVED: the disk refused to store a new message) and one readable sentence. The transports map it at their edge (the router to
 * `RouterError`, `/v1` to an OpenAI-style error with an HTTP status); services never throw a
 * transport's error type.
 */

import { CodedError } from '../common/errors.ts';

export type ServiceErrorCode =
  | 'NOT_FOUND'
  | 'BUSY'
  | 'CONTEXT_FULL'
  | 'MODEL_NOT_READY'
  | 'SHUT_DOWN'
  | 'CANCELLED'
  | 'INVALID_REQUEST'
  | 'NOTHING_TO_REGENERATE'
  | 'DATA_DIR'
  | 'SCHEMA_TOO_NEW'
  | 'QUEUE_FULL'
  | 'NOT_SAVED';

/** A request the services refuse or cannot carry out; `message` quotes the bad value or the numbers. */
export class ServiceError extends CodedError<ServiceErrorCode> {
  constructor(code: ServiceErrorCode, message: string) {
    super(code, message);
  }
}

/** The first line of an error's message (one definition for the project: main/common/errors.ts). */
export { firstLine } from '../common/errors.ts';
